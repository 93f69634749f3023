package testenv

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// WaitGone blocks until process pid has terminated, failing t if it still
// runs after within. On Linux it waits on a pidfd, which becomes readable
// when the process exits (a zombie counts as gone), so nothing polls.
func WaitGone(t testing.TB, pid int, within time.Duration) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return
	}
	if err != nil {
		t.Fatalf("pidfd_open %d: %v", pid, err)
	}
	defer func() { _ = unix.Close(fd) }()
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(within)
	for {
		n, err := unix.Poll(fds, max(0, int(time.Until(deadline)/time.Millisecond)))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			t.Fatalf("poll pidfd of %d: %v", pid, err)
		}
		if n != 1 {
			t.Fatalf("process %d still alive after %v", pid, within)
		}
		return
	}
}
