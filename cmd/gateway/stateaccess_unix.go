//go:build unix

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// checkStateAccess fails, naming the file, its owner, this process's user
// and the fix, when this process cannot use all of the state dir (read its
// files, write its directories and database): a backup made as root and
// started by a gateway that runs as its own user (the README's unit)
// failed with SQLite's "unable to open database file (14)" or "state dir
// lock: …: permission denied", which say neither whose the file is nor
// what to do.
func checkStateAccess(dir string) error {
	var denied string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // gone meanwhile (a sandbox's key)
		}
		if err != nil && !errors.Is(err, fs.ErrPermission) {
			return err
		}
		if d == nil {
			denied = p // dir itself, behind a directory this user cannot search
			return fs.SkipAll
		}
		// A file is read, or removed through its directory; the
		// database's files and the lock are written too.
		mode := uint32(unix.R_OK)
		switch name := d.Name(); {
		case d.IsDir():
			mode |= unix.W_OK | unix.X_OK
		case !d.Type().IsRegular():
			return nil
		case filepath.Dir(p) == filepath.Clean(dir) && (strings.HasPrefix(name, dbFile) || name == lockFile):
			mode |= unix.W_OK
		}
		// The effective ids, as open(2) checks them.
		if unix.Faccessat(unix.AT_FDCWD, p, mode, unix.AT_EACCESS) == nil && err == nil {
			return nil
		}
		if uid, ok := ownerOf(p); ok && uid == os.Geteuid() {
			// This user's own, read-only (its mode, a read-only
			// mount): not what chown fixes; the error of its use
			// says what does.
			return nil
		}
		denied = p
		return fs.SkipAll
	})
	if err != nil || denied == "" {
		return err
	}
	owner := "another user"
	if uid, ok := ownerOf(denied); ok {
		owner = userName(uid)
	}
	me := userName(os.Geteuid())
	give := strconv.Itoa(os.Geteuid()) + ":"
	if u, err := user.LookupId(strconv.Itoa(os.Geteuid())); err == nil {
		give = u.Username + ":"
	}
	return fmt.Errorf("state dir %s: %s belongs to %s, and this process runs as %s, which cannot use it: run the gateway and its commands as the state dir's user or, if the state dir is to be this user's (a backup or copy made as root, say), give it over: chown -R %s %s",
		dir, denied, owner, me, give, dir)
}

// ownerOf is the uid that owns p.
func ownerOf(p string) (int, bool) {
	st, err := os.Lstat(p)
	if err != nil {
		return 0, false
	}
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(s.Uid), true
}

// userName is uid's name with the number, or the number alone.
func userName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return fmt.Sprintf("%s (uid %d)", u.Username, uid)
	}
	return fmt.Sprintf("uid %d", uid)
}
