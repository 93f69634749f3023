//go:build unix

package bytestream

import (
	"io"
	"testing"

	"github.com/hostgate/hostgate/internal/testenv"
)

// BenchmarkSmallRoundTrip: a 100-byte message from a dialed WebSocket (the
// write-behind side: clients and agents) and a 100-byte answer, one at a
// time, so every message is a burst of its own, as the SSH messages of
// small forwarded connections are. Reports CPU time per round trip.
func BenchmarkSmallRoundTrip(b *testing.B) {
	a, s := wsPair(b)
	msg := make([]byte, 100)
	go func() {
		buf := make([]byte, 100)
		for {
			if _, err := io.ReadFull(s, buf); err != nil {
				return
			}
			if _, err := s.Write(buf); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 100)
	cpu := testenv.CPUTime(b)
	b.ResetTimer()
	for b.Loop() {
		if _, err := a.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(a, buf); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	testenv.ReportCPU(b, cpu)
}
