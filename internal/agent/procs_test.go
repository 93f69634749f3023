package agent

import (
	"runtime"
	"testing"
)

// TestRoundQuota: one P at a limit of one CPU or less; above it, the
// runtime's own size. The limit as a container's cgroup holds it, and
// GOMAXPROCS set over it, are checked live in e2e TestSandboxAgentOneP:
// on a host without a limit FitProcs changes nothing either way.
func TestRoundQuota(t *testing.T) {
	prev := runtime.GOMAXPROCS(2)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	for _, tc := range []struct {
		cpus  float64
		procs int
	}{{0.01, 1}, {0.5, 1}, {1, 1}, {1.01, 2}, {1.5, 2}, {8, 2}} {
		if got := roundQuota(tc.cpus); got != tc.procs {
			t.Errorf("roundQuota(%v) = %d, want %d", tc.cpus, got, tc.procs)
		}
	}
}
