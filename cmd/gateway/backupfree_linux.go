package main

import "golang.org/x/sys/unix"

// backupFree is what an unprivileged writer may still use of dir's
// filesystem; tests replace it.
var backupFree = func(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}
