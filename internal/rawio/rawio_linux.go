//go:build linux

package rawio

import (
	"syscall"
	"unsafe"
)

// Read reads fd once into p (not empty), retrying EINTR: the bytes read,
// 0 at EOF, or the errno (EAGAIN: nothing to read yet).
func Read(fd uintptr, p []byte) (int, syscall.Errno) {
	for {
		r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		if e != syscall.EINTR {
			return int(r), e
		}
	}
}

// Write writes p (not empty) to fd once, retrying EINTR: the bytes
// written, perhaps fewer than len(p), or the errno (EAGAIN: no room yet).
func Write(fd uintptr, p []byte) (int, syscall.Errno) {
	for {
		r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		if e != syscall.EINTR {
			return int(r), e
		}
	}
}

// Writev writes the vectors iov (not empty) to fd once, retrying EINTR:
// the bytes written, perhaps fewer than all, or the errno.
func Writev(fd uintptr, iov []syscall.Iovec) (int, syscall.Errno) {
	for {
		r, _, e := syscall.RawSyscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)))
		if e != syscall.EINTR {
			return int(r), e
		}
	}
}
