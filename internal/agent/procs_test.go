package agent

import (
	"runtime"
	"testing"
)

// TestFitProcs: one P under a limit of one CPU or less, unless GOMAXPROCS
// says otherwise; a larger limit, or none, leaves the runtime's default.
func TestFitProcs(t *testing.T) {
	// Two Ps to start from whatever the machine: one is what is tested.
	const before = 2
	prev := runtime.GOMAXPROCS(before)
	orig := readCPULimit
	t.Cleanup(func() { readCPULimit = orig; fitted.Store(nil); runtime.GOMAXPROCS(prev) })
	for _, tc := range []struct {
		name   string
		cpus   float64
		ok     bool
		env    string
		procs  int
		logged bool
	}{
		{"one CPU", 1, true, "", 1, true},
		{"half a CPU", 0.5, true, "", 1, true},
		{"one and a half", 1.5, true, "", before, false},
		{"no limit", 0, false, "", before, false},
		{"GOMAXPROCS set", 1, true, "3", before, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runtime.GOMAXPROCS(before)
			fitted.Store(nil)
			t.Setenv("GOMAXPROCS", tc.env)
			readCPULimit = func() (float64, bool) { return tc.cpus, tc.ok }
			FitProcs()
			if got := runtime.GOMAXPROCS(0); got != tc.procs {
				t.Fatalf("GOMAXPROCS %d after FitProcs, want %d", got, tc.procs)
			}
			if logged := fitted.Load() != nil; logged != tc.logged {
				t.Fatalf("fitted recorded %v, want %v", logged, tc.logged)
			}
		})
	}
}
