package procstat

import (
	"strconv"

	"golang.org/x/sys/unix"
)

// Session returns the session id of pid when it is a live process (not a
// zombie, not dead), reading its stat once into buf.
func Session(pid int, buf *Buf) (sid int, ok bool) {
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, false
	}
	k, err := unix.Read(fd, buf[:])
	_ = unix.Close(fd)
	if err != nil || k <= 0 {
		return 0, false
	}
	state, _, sid, ok := Parse(buf[:k])
	if !ok || state == 'Z' || state == 'X' {
		return 0, false
	}
	return sid, true
}
