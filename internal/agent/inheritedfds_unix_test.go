//go:build unix

package agent

import (
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Both ways of HideInheritedFDs (close_range where the kernel has it, else
// the listing) leave a descriptor made without close-on-exec, as an
// inherited one is, marked close-on-exec; 0-2 stay as they are.
func TestHideInheritedFDs(t *testing.T) {
	for name, hide := range map[string]func() error{"HideInheritedFDs": HideInheritedFDs, "listed": cloexecListed} {
		fd, err := syscall.Dup(1) // dup(2) gives a descriptor without FD_CLOEXEC
		if err != nil {
			t.Fatal(err)
		}
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC != 0 {
			t.Fatalf("%s: dup'd fd flags %#x %v, want no FD_CLOEXEC", name, flags, err)
		}
		if err := hide(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
			t.Errorf("%s: fd %d flags %#x %v, want FD_CLOEXEC", name, fd, flags, err)
		}
		_ = syscall.Close(fd)
		for fd := range 3 {
			if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC != 0 {
				t.Errorf("%s: fd %d marked close-on-exec", name, fd)
			}
		}
	}
}
