//go:build unix && !linux

package testenv

import (
	"errors"
	"syscall"
	"testing"
	"time"
)

// WaitGone blocks until process pid has terminated, failing t if it still
// runs after within. Off Linux (no pidfd) it asks every 10 ms whether pid
// exists, so a zombie counts as alive: wait only for a process another
// parent reaps, such as a descendant of a child process.
func WaitGone(t testing.TB, pid int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := syscall.Kill(pid, 0)
		if errors.Is(err, syscall.ESRCH) {
			return
		}
		if err != nil && !errors.Is(err, syscall.EPERM) {
			t.Fatalf("kill -0 %d: %v", pid, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d still alive after %v", pid, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
