//go:build unix && !linux

package bytestream

import "syscall"

// rawReads says readAhead can read the conn's descriptor itself.
const rawReads = true

// readFD reads fd once into p, retrying EINTR; wait is true when the
// descriptor has nothing to give yet (EAGAIN).
func readFD(fd uintptr, p []byte) (n int, wait bool, err error) {
	for {
		n, err = syscall.Read(int(fd), p)
		if err != syscall.EINTR {
			return n, err == syscall.EAGAIN, err
		}
	}
}
