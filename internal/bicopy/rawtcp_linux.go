//go:build linux

package bicopy

import (
	"io"
	"net"
	"os"
	"syscall"

	"github.com/hostgate/hostgate/internal/rawio"
)

// rawTCP reads and writes a TCP conn with raw system calls (internal/rawio
// says why) in the callbacks of the conn's RawConn, which waits in the
// netpoller, and keeps the conn's deadlines, while the socket has nothing
// to give or no room: a forward's 256 KiB writes to loopback outlast
// sysmon's 20 µs tick, as the WebSocket's do.
type rawTCP struct {
	c *net.TCPConn
	s *rawio.Stream
}

// newRawTCP returns x's raw reader and writer, or nil where x is no
// *net.TCPConn.
func newRawTCP(x any) *rawTCP {
	c, ok := x.(*net.TCPConn)
	if !ok {
		return nil
	}
	raw, err := c.SyscallConn()
	if err != nil {
		return nil
	}
	return &rawTCP{c: c, s: rawio.NewStream(raw)}
}

func (t *rawTCP) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, errno, err := t.s.Read(p)
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, t.opError("read", errno)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// Write writes all of p or fails, as net.Conn's Write does.
func (t *rawTCP) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, errno, err := t.s.Write(p)
	if errno != 0 {
		return n, t.opError("write", errno)
	}
	return n, err
}

// opError is the error net's own Read or Write would return for errno.
func (t *rawTCP) opError(op string, errno syscall.Errno) error {
	return &net.OpError{Op: op, Net: "tcp", Source: t.c.LocalAddr(), Addr: t.c.RemoteAddr(), Err: os.NewSyscallError(op, errno)}
}
