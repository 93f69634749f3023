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

// Kill sends SIGKILL to pid if it is a live process whose session member
// accepts, and returns the pidfd it signalled it through (the caller
// closes it, or waits on it: it is readable once the process has ended).
// Only a member gets a pidfd (opening one for every pid scanned was most
// of a scan's cost), and its session is read again behind it, so a pid
// that ended and was reused between the two reads is never signalled.
func Kill(pid int, member func(sid int) bool, buf *Buf) (pidfd int, ok bool) {
	if sid, live := Session(pid, buf); !live || !member(sid) {
		return 0, false
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return 0, false
	}
	if sid, live := Session(pid, buf); !live || !member(sid) || unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) != nil {
		_ = unix.Close(fd)
		return 0, false
	}
	return fd, true
}
