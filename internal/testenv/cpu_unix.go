//go:build unix

package testenv

import (
	"syscall"
	"testing"
	"time"
)

// CPUTime is this process's CPU time so far (user + system). A benchmark
// whose whole path runs in the one process reports it per op: it is the
// path's cost, steadier than wall time on a busy machine.
func CPUTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ReportCPU reports the CPU time per op since start (a CPUTime) as
// cpu-µs/op.
func ReportCPU(b *testing.B, start time.Duration) {
	if b.N > 0 {
		b.ReportMetric(float64((CPUTime(b)-start).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
	}
}
