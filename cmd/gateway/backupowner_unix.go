//go:build unix

package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// keepOwner gives out, a backup of dir made by root, to dir's owner: what
// root copies is root's, and a gateway that runs as its own user (the
// README's unit) could not start on the backup, nor on the state dir it
// was copied back into. As another user it leaves out as it is.
func keepOwner(dir, out string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok || (s.Uid == 0 && s.Gid == 0) {
		return nil
	}
	return filepath.WalkDir(out, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(s.Uid), int(s.Gid))
	})
}
