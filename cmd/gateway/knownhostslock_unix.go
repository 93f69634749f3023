//go:build unix

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

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
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			break
		}
	}
	return func() { _ = f.Close() }, nil
}
