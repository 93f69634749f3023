package agent

import (
	"log/slog"
	"os"
	"runtime"
	"sync/atomic"

	"github.com/hostgate/hostgate/internal/cpulimit"
)

// fitted is the CPU limit FitProcs sized the runtime to, when it did.
var fitted atomic.Pointer[float64]

// readCPULimit is cpulimit.Read; a test gives its own.
var readCPULimit = cpulimit.Read

// FitProcs runs the Go runtime on one P where the agent's cgroup holds it
// to one CPU or less (a sandbox's default, `cpus` 1) and GOMAXPROCS does
// not say otherwise. Go's default rounds such a limit up to two, and with a
// second P idle, every goroutine a message readies wakes a thread for it.
// Through a sandbox's tunnel, on one P, the agent's exec round trip took
// 0.93x the time, the API's exec 0.94x and a loop of small-file Creates
// 0.90x (e2e BenchmarkExecRoundTrip and BenchmarkSandboxTransfer, three
// alternating runs each, medians; bench/HISTORY.md, round 57). Call it
// before anything starts goroutines of its own.
func FitProcs() {
	if os.Getenv("GOMAXPROCS") != "" {
		return
	}
	cpus, ok := readCPULimit()
	if !ok || cpus > 1 {
		return
	}
	if runtime.GOMAXPROCS(1) > 1 {
		fitted.Store(&cpus)
	}
}

// logProcs says so when FitProcs sized the runtime.
func logProcs(log *slog.Logger) {
	if cpus := fitted.Load(); cpus != nil {
		log.Info("one P: the cgroup holds this agent to one CPU or less", "cpus", *cpus)
	}
}
