//go:build unix

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// lockKnownHosts holds the known_hosts file at path for one
// read-modify-rename until unlock: every ssh runs its own `gateway cert`
// and `gateway proxy` on one file, and two that rewrote it at once each
// kept only their own host's line. The lock is a file of its own beside
// it ("." + name + ".lock"): the known_hosts file is replaced by each
// rewrite, so a lock on it would be on a file no longer there. A
// filesystem that does not lock (an NFS home without lockd) gets the
// rewrite unlocked, as before, rather than none.
func lockKnownHosts(path string) (unlock func(), err error) {
	name := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".lock")
	// Readable by all (it holds nothing): another user's run on a file
	// shared with them takes the lock through a read-only descriptor,
	// which flock(2) takes as well.
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if errors.Is(err, fs.ErrPermission) {
		f, err = os.Open(name)
	}
	if err != nil {
		return nil, fmt.Errorf("locking it for the rewrite: %w", err)
	}
	// Polled, not waited for in flock(2): a rewrite holds the lock for
	// a moment, but a holder that never lets go (a run stopped mid-
	// rewrite, a lock an NFS server keeps for a client that crashed)
	// hung every later ssh, whose cert and proxy runs waited for ever,
	// saying nothing. A holder that dies lets go by itself: flock's
	// lock is the open file's, not the lock file's being there. Pauses
	// of 5 ms at most: with longer ones (100 ms), 16 runs at once took
	// five times as long as flock's own wait.
	deadline := time.Now().Add(knownHostsLockWait)
	for pause := time.Millisecond; ; pause = min(2*pause, 5*time.Millisecond) {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return func() { _ = f.Close() }, nil
		case err == unix.EINTR:
			continue
		case err != unix.EWOULDBLOCK:
			// No locks on this filesystem: unlocked, as the doc says.
			return func() { _ = f.Close() }, nil
		case !time.Now().Before(deadline):
			_ = f.Close()
			return nil, fmt.Errorf("its lock %s has been held by another process for %v: a gateway cert or gateway proxy stopped mid-rewrite (fuser -v %s names it: end it), or a lock the file server keeps for a machine that crashed; when no process holds it, remove %s", name, knownHostsLockWait, name, name)
		}
		time.Sleep(pause)
	}
}

// knownHostsLockWait bounds lockKnownHosts's wait for another run's
// rewrite, which takes milliseconds (a variable for tests).
var knownHostsLockWait = 10 * time.Second
