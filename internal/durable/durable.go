// Package durable makes a file written aside and then renamed or linked
// into place survive a power loss. Syncing the file keeps its contents;
// its new name is an entry in its directory, which is on disk only once
// the directory is synced too: until then a crash can leave the old file,
// or none, though the write had succeeded (a new CA key lost, and a
// gateway that makes another, which every agent pinned to the first
// refuses).
package durable

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// Synced, when set, is called with each directory SyncDir has synced.
// Only tests set it: they cannot cut the power, and check with it that
// a new name was made durable once it was in place.
var Synced func(dir string)

// Rename is os.Rename that then syncs newpath's directory.
func Rename(oldpath, newpath string) error {
	if err := os.Rename(oldpath, newpath); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(newpath))
}

// Link is os.Link that then syncs newpath's directory. When newpath
// exists (a concurrent first writer's) it syncs the directory too, as
// the caller goes on with what is there, and returns the link's error,
// fs.ErrExist.
func Link(oldpath, newpath string) error {
	err := os.Link(oldpath, newpath)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if serr := SyncDir(filepath.Dir(newpath)); serr != nil {
		return serr
	}
	return err
}

// SyncDir syncs the directory dir, so that the names made or removed in
// it are on disk.
func SyncDir(dir string) error {
	if err := syncDir(dir); err != nil {
		return err
	}
	if Synced != nil {
		Synced(dir)
	}
	return nil
}
