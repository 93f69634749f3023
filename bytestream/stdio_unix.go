//go:build unix

package bytestream

import (
	"io"
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

// shutdownWrite ends w's sending side where w is a socket, before
// CloseWrite closes it. Closing the descriptor alone ends nothing while
// another descriptor holds the socket, and stdin and stdout are often one
// socket (socat's EXEC, inetd, systemd's Accept=yes, sshd's socketpair for
// a command without a pty): the peer never read EOF and waited for it.
// Anything else (a pipe: ENOTSOCK) is left to the close.
func shutdownWrite(w io.Writer) {
	f, ok := w.(*os.File)
	if !ok {
		return
	}
	raw, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = raw.Control(func(fd uintptr) { _ = syscall.Shutdown(int(fd), syscall.SHUT_WR) })
}
