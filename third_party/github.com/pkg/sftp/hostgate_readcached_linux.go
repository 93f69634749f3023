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
	// The offset goes as two words, as x/sys/unix's Preadv2 passes it: on
	// 32-bit Linux the kernel joins them (without the high word a read at
	// 4 GiB or more got the bytes 4 GiB before); on 64-bit Linux the high
	// word is ignored.
	lo, hi := uintptr(off), uintptr(uint64(off)>>(unsafe.Sizeof(uintptr(0))*8-1)>>1)
	if err := rc.Control(func(fd uintptr) {
		for {
			r, _, e = syscall.RawSyscall6(unix.SYS_PREADV2, fd, uintptr(unsafe.Pointer(&iov)), 1, lo, hi, unix.RWF_NOWAIT)
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
