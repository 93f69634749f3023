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
	b.Run("websocket", func(b *testing.B) {
		a, s := wsPair(b)
		smallRoundTrips(b, a, s)
	})
	// Through a yamux stream, as an agent tunnel carries SSH: the dialed
	// side (an agent) asks, the accepted side (the gateway) answers, each
	// reading frames through the layers a tunnel has.
	b.Run("websocket+yamux", func(b *testing.B) {
		x, y := wsPair(b)
		a, s := benchMux(b, x, y, &MuxConfig{})
		smallRoundTrips(b, a, s)
	})
}

// smallRoundTrips times 100-byte round trips from a, answered by s.
func smallRoundTrips(b *testing.B, a, s io.ReadWriter) {
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
