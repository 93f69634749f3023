//go:build linux

package rawio

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
)

// TCPConn is a TCP conn whose Read and Write are raw calls (Stream). For
// a conn that carries a bulk stream through Go code of its own: an SSH
// transport straight over TCP (`agent serve --listen`, the agent's direct
// listener, hostgate's client of either) and a forward's TCP ends. The
// rest of net.Conn is the conn's own. Reads wait for each other, as
// writes do, as net's own do: a Stream has one reader and one writer.
type TCPConn struct {
	*net.TCPConn
	s        *Stream
	rmu, wmu sync.Mutex
}

// Raw returns x as a TCPConn, or nil where x is no *net.TCPConn.
func Raw(x any) *TCPConn {
	tc, ok := x.(*net.TCPConn)
	if !ok {
		return nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return &TCPConn{TCPConn: tc, s: NewStream(raw)}
}

// NewTCPConn returns c as a TCPConn where c is a *net.TCPConn, else c.
func NewTCPConn(c net.Conn) net.Conn {
	if t := Raw(c); t != nil {
		return t
	}
	return c
}

// Read reads once, as net.Conn's Read does.
func (c *TCPConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	n, errno, err := c.s.Read(p)
	c.rmu.Unlock()
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, c.opError("read", errno)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// Write writes all of p or fails, as net.Conn's Write does.
func (c *TCPConn) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.wmu.Lock()
	n, errno, err := c.s.Write(p)
	c.wmu.Unlock()
	if errno != 0 {
		return n, c.opError("write", errno)
	}
	return n, err
}

// opError is the error net's own Read or Write would return for errno.
func (c *TCPConn) opError(op string, errno syscall.Errno) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError(op, errno)}
}
