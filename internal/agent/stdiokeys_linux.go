package agent

import (
	"fmt"
	"os"
	"sync"
	"syscall"
)

// ownOOMScoreAdj is this process's /proc/self/oom_score_adj, opened once
// before protectKeys makes its /proc files root's, which an unprivileged
// agent could not open after (sshlayer.ServerConfig.OOMScoreAdjFile); nil
// where it cannot be opened. It stays open for the process's life.
var ownOOMScoreAdj = sync.OnceValue(func() *os.File {
	f, err := os.OpenFile("/proc/self/oom_score_adj", os.O_RDWR, 0)
	if err != nil {
		return nil
	}
	return f
})

// protectKeys makes this process non-dumpable before it reads its host
// key: other processes of the same user (every command run in the same
// container) can then neither ptrace it nor open its /proc entries, such
// as the stdin pipe the key arrives on. Commands it starts are dumpable
// again after their execve, as usual.
func protectKeys() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0); errno != 0 {
		return fmt.Errorf("agent: prctl(PR_SET_DUMPABLE, 0): %w", errno)
	}
	return nil
}
