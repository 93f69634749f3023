//go:build unix

package bytestream

import (
	"io"
	"syscall"
	"testing"
	"time"
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
	cpu0 := processCPU(b)
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
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// processCPU is this process's user and system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
