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
	c   *net.TCPConn
	raw syscall.RawConn
	// The callbacks and what they work on, here rather than in
	// closures, which would be allocated at every call. One reader and
	// one writer at a time, as copyHalf uses them.
	rfn, wfn func(fd uintptr) bool
	rp, wp   []byte
	rn, wn   int
	rerr     syscall.Errno
	werr     syscall.Errno
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
	t := &rawTCP{c: c, raw: raw}
	t.rfn, t.wfn = t.readOnce, t.writeOnce
	return t
}

func (t *rawTCP) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	t.rp, t.rn, t.rerr = p, 0, 0
	err := t.raw.Read(t.rfn)
	t.rp = nil
	switch {
	case err != nil:
		return 0, err
	case t.rerr != 0:
		return 0, t.opError("read", t.rerr)
	case t.rn == 0:
		return 0, io.EOF
	}
	return t.rn, nil
}

func (t *rawTCP) readOnce(fd uintptr) bool {
	n, e := rawio.Read(fd, t.rp)
	switch e {
	case 0:
		t.rn = n
	case syscall.EAGAIN:
		return false
	default:
		t.rerr = e
	}
	return true
}

// Write writes all of p or fails, as net.Conn's Write does.
func (t *rawTCP) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	t.wp, t.wn, t.werr = p, 0, 0
	err := t.raw.Write(t.wfn)
	t.wp = nil
	switch {
	case t.werr != 0:
		return t.wn, t.opError("write", t.werr)
	case err != nil:
		return t.wn, err
	}
	return t.wn, nil
}

func (t *rawTCP) writeOnce(fd uintptr) bool {
	for t.wn < len(t.wp) {
		n, e := rawio.Write(fd, t.wp[t.wn:])
		switch e {
		case 0:
			t.wn += n
		case syscall.EAGAIN:
			return false
		default:
			t.werr = e
			return true
		}
	}
	return true
}

// opError is the error net's own Read or Write would return for errno.
func (t *rawTCP) opError(op string, errno syscall.Errno) error {
	return &net.OpError{Op: op, Net: "tcp", Source: t.c.LocalAddr(), Addr: t.c.RemoteAddr(), Err: os.NewSyscallError(op, errno)}
}
