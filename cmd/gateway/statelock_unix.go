//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// lockStateDir takes the state dir for this process until unlock: two
// gateways serving from one dir would each hold tunnels the other's
// registry does not know, and each run its own sandbox adoption and reaping
// on the same containers. Token and host commands do not take it (the
// database serializes them); a crashed gateway's lock goes with it.
func lockStateDir(dir string) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	if err := checkStateAccess(dir); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state dir lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("another gateway is serving from %s; stop it or give this one its own --state-dir", dir)
		}
		return nil, fmt.Errorf("state dir lock: %w", err)
	}
	return func() { _ = f.Close() }, nil
}

// stateDirServed reports whether a gateway holds dir's lock now.
func stateDirServed(dir string) bool {
	f, err := os.Open(filepath.Join(dir, lockFile))
	if err != nil {
		return false
	}
	defer f.Close()
	// A shared lock, let go at once by the Close: it fails only against
	// a serving gateway's exclusive one.
	return errors.Is(unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB), unix.EWOULDBLOCK)
}
