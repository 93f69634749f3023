//go:build linux

package sftp

import (
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// readAtCached reads into b at off what the page cache holds, by one
// preadv2(2) with RWF_NOWAIT issued as a raw syscall (HOSTGATE.md, change
// 18): n bytes from b's start, or ok false where none were read so (not
// cached, at or past the end, a file that cannot say: the caller reads as
// before), with unsupported true where the file never can (a pipe, a
// file system without RWF_NOWAIT).
func readAtCached(f *os.File, b []byte, off int64) (n int, ok, unsupported bool) {
	if len(b) == 0 || off < 0 {
		return 0, false, false
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, false, true
	}
	iov := unix.Iovec{Base: &b[0]}
	iov.SetLen(len(b))
	var (
		r uintptr
		e syscall.Errno
	)
	// On 64-bit Linux the offset's high word is ignored; pos_h is 0.
	if err := rc.Control(func(fd uintptr) {
		for {
			r, _, e = syscall.RawSyscall6(unix.SYS_PREADV2, fd, uintptr(unsafe.Pointer(&iov)), 1, uintptr(off), 0, unix.RWF_NOWAIT)
			if e != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return 0, false, true
	}
	switch e {
	case 0:
		return int(r), r > 0, false
	case syscall.EAGAIN:
		return 0, false, false
	}
	return 0, false, true
}
