//go:build unix

package bytestream

import (
	"os"
	"syscall"
)

// pollable returns a pollable *os.File for fd when it is a pipe or socket
// (os.NewFile registers a non-blocking fd with the poller), else f unchanged.
func pollable(f *os.File, fd int, name string) *os.File {
	st, err := f.Stat()
	if err != nil || st.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return f
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		return f
	}
	if st.Mode()&os.ModeNamedPipe != 0 {
		growPipe(fd)
	}
	return os.NewFile(uintptr(fd), name)
}
