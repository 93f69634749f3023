package sftp

import (
	"io"
	"os"
	"syscall"
	"unsafe"
)

// writev is writev(2) of bufs (none empty, at most IOV_MAX) to fd, as a
// raw system call where raw is set (HOSTGATE.md, change 19).
func writev(fd int, bufs [][]byte, iov []syscall.Iovec, raw bool) (int, []syscall.Iovec, error) {
	iov = iov[:0]
	for _, b := range bufs {
		v := syscall.Iovec{Base: &b[0]}
		v.SetLen(len(b))
		iov = append(iov, v)
	}
	call := syscall.Syscall
	if raw {
		call = syscall.RawSyscall
	}
	n, _, e := call(syscall.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)))
	clear(iov) // keeps no buffer given back
	if e != 0 {
		return 0, iov, e
	}
	return int(n), iov, nil
}

// fileWritev writes to f with writev(2), through its poller where f is
// non-blocking (a pipe); nil when f has no descriptor to write to. A
// regular file of a local file system is written by raw writev, as the
// server's change 19 writes (rawWritable, rawBackoff): a download to a
// local file handed the runtime a write of up to a few MiB per call.
func fileWritev(f *os.File) func([][]byte) (int64, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	raw := rawWritable(f)
	var bo rawBackoff
	var iov []syscall.Iovec
	return func(bufs [][]byte) (int64, error) {
		var total int64
		for len(bufs) > 0 {
			var n int
			var werr error
			err := rc.Write(func(fd uintptr) bool {
				useRaw := raw && bo.use()
				call := func() {
					for {
						n, iov, werr = writev(int(fd), bufs, iov, useRaw)
						if werr != syscall.EINTR {
							return
						}
					}
				}
				if !useRaw {
					call()
					return werr != syscall.EAGAIN
				}
				if timedRaw(call) {
					bo.slowed()
				}
				return true // a regular file: never EAGAIN
			})
			if err == nil {
				err = werr
			}
			if err == nil && n <= 0 {
				return total, io.ErrShortWrite
			}
			if n > 0 {
				total += int64(n)
				for n > 0 && n >= len(bufs[0]) {
					n -= len(bufs[0])
					bufs = bufs[1:]
				}
				if n > 0 {
					bufs[0] = bufs[0][n:]
				}
			}
			if err != nil {
				return total, &os.PathError{Op: "writev", Path: f.Name(), Err: err}
			}
		}
		return total, nil
	}
}
