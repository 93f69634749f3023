package agent

import (
	"runtime"
	"testing"
)

// TestRoundQuota: one P at a limit of one CPU or less; above it, the
// runtime's own size. The limit as a container's cgroup holds it is read
// live in e2e TestSandboxAgentOneP.
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

// TestFitProcsHonoursGOMAXPROCS: GOMAXPROCS in the environment leaves the
// runtime as it is, whatever the cgroup says.
func TestFitProcsHonoursGOMAXPROCS(t *testing.T) {
	prev := runtime.GOMAXPROCS(3)
	t.Cleanup(func() { fitted.Store(nil); runtime.GOMAXPROCS(prev) })
	t.Setenv("GOMAXPROCS", "3")
	FitProcs()
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Fatalf("GOMAXPROCS %d after FitProcs with GOMAXPROCS=3 set, want 3", got)
	}
	if fitted.Load() != nil {
		t.Fatal("FitProcs recorded a fit with GOMAXPROCS set")
	}
}
