//go:build unix

package main

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate/bytestream"
)

// BenchmarkProxyCopy: the bytes `gateway proxy` moves between ssh's pipes
// and its WebSocket, each way, 256 KiB an op, with the proxy a process of
// its own (this test binary as the gateway binary, as OpenSSH runs it) so
// that its CPU time is measured alone: proxy-cpu-µs/MiB is the number to
// compare (bench/HISTORY.md, round 48). ssh's side is as OpenSSH makes it:
// 32 KiB writes into the proxy's stdin (one SSH packet each) and reads of
// what its stdout holds; the gateway's is a WebSocket that only takes or
// sends bytes, in 64 KiB messages as the gateway's relay writes them.
func BenchmarkProxyCopy(b *testing.B) {
	const op = 256 << 10
	b.Run("upload", func(b *testing.B) {
		got := make(chan int64, 1)
		url := fakeGateway(b, func(c net.Conn) {
			n, _ := io.Copy(io.Discard, c)
			got <- n
		})
		p := startProxy(b, url)
		chunk := make([]byte, 32<<10)
		b.SetBytes(op)
		for b.Loop() {
			for range op / len(chunk) {
				if _, err := p.stdin.Write(chunk); err != nil {
					b.Fatal(err)
				}
			}
		}
		p.end(b, int64(b.N)*op)
		if n := <-got; n != int64(b.N)*op {
			b.Fatalf("the gateway got %d bytes of %d", n, int64(b.N)*op)
		}
	})
	b.Run("download", func(b *testing.B) {
		url := fakeGateway(b, func(c net.Conn) {
			msg := make([]byte, bytestream.MaxMessageSize)
			for {
				if _, err := c.Write(msg); err != nil {
					return
				}
			}
		})
		p := startProxy(b, url)
		buf := make([]byte, op)
		b.SetBytes(op)
		for b.Loop() {
			if _, err := io.ReadFull(p.stdout, buf); err != nil {
				b.Fatal(err)
			}
		}
		p.end(b, int64(b.N)*op)
	})
}

// fakeGateway serves a WebSocket at any path and hands it to serve, then
// closes it.
func fakeGateway(b *testing.B, serve func(net.Conn)) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := bytestream.Accept(w, r, nil)
		if err != nil {
			return
		}
		serve(c)
		_ = c.Close()
	}))
	b.Cleanup(srv.Close)
	return srv.URL
}

// proxyProc is `gateway proxy` running as a process, with ssh's ends of
// its stdio.
type proxyProc struct {
	cmd    *exec.Cmd
	stdin  *os.File // the proxy's stdin, to write
	stdout *os.File // its stdout, to read
}

// startProxy starts `gateway proxy` to the gateway at url.
func startProxy(b *testing.B, url string) *proxyProc {
	cmd := exec.Command(os.Args[0], "proxy", "--url", url, "--token", "tok", "box")
	cmd.Env = append(os.Environ(), "HOSTGATE_TEST_BE_GATEWAY=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &proxyProc{cmd: cmd, stdin: stdin.(*os.File), stdout: stdout.(*os.File)}
	b.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
	})
	return p
}

// end closes the proxy's stdin, as ssh does when it exits, waits for the
// proxy to exit and reports its CPU time per MiB of n bytes moved.
func (p *proxyProc) end(b *testing.B, n int64) {
	b.StopTimer()
	_ = p.stdin.Close()
	_, _ = io.Copy(io.Discard, p.stdout)
	if err := p.cmd.Wait(); err != nil {
		b.Fatalf("gateway proxy: %v", err)
	}
	ru := p.cmd.ProcessState.SysUsage().(*syscall.Rusage)
	used := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	b.ReportMetric(float64(used.Microseconds())/(float64(n)/(1<<20)), "proxy-cpu-µs/MiB")
}
