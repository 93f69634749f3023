package agent

import (
	"bytes"
	"os"
	"runtime"
	"strconv"
	"sync"
)

// stdioThreads is how many OS threads a stdio agent (a sandbox's) holds
// from its start, before any command runs. A sandbox's pids limit counts
// threads, and its commands may take every pid the agent leaves: a thread
// the Go runtime needs then and cannot create is fatal (newosproc), and
// the agent, every command's channel and the tunnel go with it. A serving
// agent holds 7 threads, 8 after a burst of commands, and on a loaded
// machine it needed a 9th while 40 commands filled pids 16 (e2e
// TestSandboxPidsLimitKeepsAgent, 1 run in 24). The runtime
// keeps the threads made at the start idle and reuses them (it never
// gives one back), so the agent needs a new one only past this many.
// That still happened under CI's load, with every pid taken: commands
// now leave the agent a headroom besides (keepTasks), and get 2 of
// pids 16.
const stdioThreads = 10

// reserveThreads makes the process hold at least n OS threads, where
// /proc says how many it holds. A goroutine locked to its thread keeps
// that thread while it waits, so the next one needs another: they are
// added one by one until the process holds n, then unlocked, and their
// threads stay, idle.
func reserveThreads(n int) {
	release := make(chan struct{})
	var ended sync.WaitGroup
	defer ended.Wait()
	defer close(release)
	for range n {
		if t := threadCount(); t < 0 || t >= n {
			return
		}
		locked := make(chan struct{})
		ended.Add(1)
		go func() {
			defer ended.Done()
			runtime.LockOSThread()
			close(locked)
			<-release
			runtime.UnlockOSThread()
		}()
		<-locked
	}
}

// threadCount is how many threads this process has, or -1 without /proc.
func threadCount() int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("Threads:")); ok {
			if n, err := strconv.Atoi(string(bytes.TrimSpace(v))); err == nil {
				return n
			}
		}
	}
	return -1
}
