package agent

import (
	"fmt"
	"syscall"
)

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
