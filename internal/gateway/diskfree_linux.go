package gateway

import "golang.org/x/sys/unix"

// diskFree is the space of dir's filesystem: what an unprivileged
// writer may still use (the gateway is one) and the filesystem's size.
func diskFree(dir string) (free, total uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
}
