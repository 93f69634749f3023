//go:build unix

package hostgate

import (
	"io/fs"
	"os"
	"path"
	"time"

	"golang.org/x/sys/unix"
)

// setLinkTime gives the symbolic link name under root mtime, as both its
// times, without following it: os.Root has no Lchtimes, so the link's
// directory is opened in root (which keeps every step inside it) and
// utimensat takes the link's last element from there.
func setLinkTime(root *os.Root, name string, mtime time.Time) error {
	ts, err := unix.TimeToTimespec(mtime)
	if err != nil {
		return &fs.PathError{Op: "lchtimes", Path: name, Err: err}
	}
	dir, err := root.Open(path.Dir(name))
	if err != nil {
		return err
	}
	defer dir.Close()
	rc, err := dir.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.UtimesNanoAt(int(fd), path.Base(name), []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
	}); err != nil {
		return err
	}
	if serr != nil {
		return &fs.PathError{Op: "lchtimes", Path: name, Err: serr}
	}
	return nil
}
