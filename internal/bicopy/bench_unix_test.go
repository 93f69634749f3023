//go:build unix

package bicopy

import (
	"context"
	"io"
	"net"
	"testing"

	"github.com/hostgate/hostgate/internal/testenv"
)

// BenchmarkCopyShortConn: one small request and answer through Copy per
// op, over in-memory pipes, the shape of a forwarded HTTP request with
// "Connection: close": what Copy's own goroutines cost per connection.
func BenchmarkCopyShortConn(b *testing.B) {
	req, ans := make([]byte, 80), make([]byte, 120)
	buf := make([]byte, 512)
	cpu := testenv.CPUTime(b)
	for b.Loop() {
		client, proxyIn := net.Pipe()
		proxyOut, server := net.Pipe()
		done := make(chan struct{})
		go func() { defer close(done); _, _ = Copy(context.Background(), proxyIn, proxyOut) }()
		go func() {
			if _, err := io.ReadFull(server, buf[:len(req)]); err == nil {
				_, _ = server.Write(ans)
			}
			_ = server.Close()
		}()
		if _, err := client.Write(req); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(client, make([]byte, len(ans))); err != nil {
			b.Fatal(err)
		}
		_ = client.Close()
		<-done
	}
	testenv.ReportCPU(b, cpu)
}
