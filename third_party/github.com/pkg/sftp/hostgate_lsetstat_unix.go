//go:build linux || darwin

package sftp

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// hostgate: change 21 (HOSTGATE.md). The calls lsetstat@openssh.com makes,
// as OpenSSH's sftp-server makes them: on the path itself, never on what a
// symlink there points to.

func lsetstatChmod(path string, mode uint32) error {
	err := unix.Fchmodat(unix.AT_FDCWD, path, mode, unix.AT_SYMLINK_NOFOLLOW)
	if !errors.Is(err, unix.EOPNOTSUPP) {
		return err
	}
	// A Linux older than 6.6 lacks fchmodat2, the only call that takes
	// the flag; glibc then changes any file but a symlink (whose mode
	// Linux cannot change), and so does this.
	fi, lerr := os.Lstat(path)
	if lerr != nil {
		return lerr
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return err
	}
	return unix.Fchmodat(unix.AT_FDCWD, path, mode, 0)
}

func lsetstatChtimes(path string, atime, mtime uint32) error {
	ts := []unix.Timespec{unix.NsecToTimespec(int64(atime) * 1e9), unix.NsecToTimespec(int64(mtime) * 1e9)}
	return unix.UtimesNanoAt(unix.AT_FDCWD, path, ts, unix.AT_SYMLINK_NOFOLLOW)
}

func lsetstatChown(path string, uid, gid uint32) error {
	return os.Lchown(path, int(uid), int(gid))
}
