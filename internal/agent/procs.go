package agent

import (
	"log/slog"
	"runtime"
	"sync/atomic"

	"go.uber.org/automaxprocs/maxprocs"
)

// fitted is the CPU limit FitProcs sized the runtime to, when it did.
var fitted atomic.Pointer[float64]

// FitProcs runs the Go runtime on one P where the agent's cgroup holds it
// to one CPU or less (a sandbox's default, `cpus` 1) and GOMAXPROCS does
// not say otherwise. Go's default rounds such a limit up to two, and with a
// second P idle, every goroutine a message readies wakes a thread for it.
// Through a sandbox's tunnel, on one P, the agent's exec round trip took
// 0.93x the time, the API's exec 0.94x and a loop of small-file Creates
// 0.90x (e2e BenchmarkExecRoundTrip and BenchmarkSandboxTransfer, three
// alternating runs each, medians; bench/HISTORY.md, round 57). Call it
// before anything starts goroutines of its own.
//
// automaxprocs reads the limit: it finds the cgroup's files through
// /proc/self/mountinfo, wherever the hierarchy is mounted, in a container
// or on a host, v1 or v2. Only its reading is taken: above one CPU the
// runtime's own default stays, and keeps following the limit as it
// changes, which setting GOMAXPROCS would have stopped.
func FitProcs() {
	var quota float64
	if _, err := maxprocs.Set(maxprocs.RoundQuotaFunc(func(q float64) int {
		quota = q
		return roundQuota(q)
	})); err != nil || quota == 0 {
		return // no limit, GOMAXPROCS set, or a cgroup it could not read
	}
	if quota > 1 {
		runtime.SetDefaultGOMAXPROCS()
		return
	}
	fitted.Store(&quota)
}

// roundQuota is the runtime's size under a limit of q CPUs: one P at one
// CPU or less, the runtime's own default above.
func roundQuota(q float64) int {
	if q <= 1 {
		return 1
	}
	return runtime.GOMAXPROCS(0)
}

// logProcs says so when FitProcs sized the runtime.
func logProcs(log *slog.Logger) {
	if cpus := fitted.Load(); cpus != nil {
		log.Info("one P: the cgroup holds this agent to one CPU or less", "cpus", *cpus)
	}
}
