package bytestream

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
)

// aheadSize is what one read-ahead syscall asks the kernel for.
const aheadSize = 64 << 10

// aheadBufs holds read-ahead buffers while no conn has unread bytes in one.
var aheadBufs = sync.Pool{New: func() any { b := make([]byte, aheadSize); return &b }}

// readAhead serves the small reads of the buffers above a WebSocket's TCP
// conn (coder/websocket's: 4 KiB on a dialed conn, acceptBufSize on an
// accepted one) from one
// large read syscall. A bulk stream through an agent was read 8 KiB per
// syscall; each is a kernel entry and, on a busy pipeline, a wakeup.
// The buffer is taken from a pool only when the kernel has bytes to give
// (the wait for data happens without it) and returned as soon as it is
// drained, so 10,000 idle tunnels hold no read-ahead memory.
type readAhead struct {
	conn net.Conn
	raw  syscall.RawConn // nil: reads go straight to conn

	mu   sync.Mutex // one reader at a time; guards buf and off
	buf  *[]byte    // unread bytes are (*buf)[off:]; nil when none
	off  int
	keep []byte // bytes a hijack left buffered, served first

	// The raw read's callback and its results, kept here rather than
	// in a closure: a closure handed to RawConn.Read, and each variable
	// it sets, escaped to the heap on every read syscall (four
	// allocations per read, half of all a downloading client made).
	// Guarded by mu.
	readFn func(fd uintptr) bool
	rbuf   *[]byte
	rn     int
	rerr   error
}

func newReadAhead(conn net.Conn, leftover []byte) *readAhead {
	r := &readAhead{conn: conn}
	if len(leftover) > 0 {
		r.keep = leftover
	}
	if sc, ok := conn.(syscall.Conn); ok && rawReads {
		if raw, err := sc.SyscallConn(); err == nil {
			r.raw = raw
			r.readFn = r.readOnce
		}
	}
	return r
}

// readOnce is the raw read's callback: one read of fd into a pooled
// buffer, taken only once the kernel has bytes to give.
func (r *readAhead) readOnce(fd uintptr) bool {
	if r.rbuf == nil {
		r.rbuf = aheadBufs.Get().(*[]byte)
	}
	var wait bool
	r.rn, wait, r.rerr = readFD(fd, *r.rbuf)
	if wait {
		// Wait for data without holding the buffer.
		aheadBufs.Put(r.rbuf)
		r.rbuf = nil
		return false
	}
	return true
}

func (r *readAhead) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.keep) > 0 {
		n := copy(p, r.keep)
		r.keep = r.keep[n:]
		return n, nil
	}
	if r.buf != nil {
		return r.serve(p), nil
	}
	if r.raw == nil || len(p) >= aheadSize/2 || len(p) == 0 {
		return r.conn.Read(p)
	}
	err := r.raw.Read(r.readFn)
	buf, n, rerr := r.rbuf, r.rn, r.rerr
	r.rbuf, r.rn, r.rerr = nil, 0, nil
	if err == nil && rerr != nil {
		err = os.NewSyscallError("read", rerr)
	}
	if err == nil && n <= 0 {
		err = io.EOF
	}
	if err != nil {
		if buf != nil {
			aheadBufs.Put(buf)
		}
		if errors.Is(err, io.EOF) {
			return 0, io.EOF
		}
		return 0, &net.OpError{Op: "read", Net: r.conn.LocalAddr().Network(), Source: r.conn.LocalAddr(), Addr: r.conn.RemoteAddr(), Err: err}
	}
	*buf = (*buf)[:n]
	r.buf, r.off = buf, 0
	return r.serve(p), nil
}

// serve copies unread bytes to p, releasing the buffer once drained.
func (r *readAhead) serve(p []byte) int {
	n := copy(p, (*r.buf)[r.off:])
	r.off += n
	if r.off == len(*r.buf) {
		*r.buf = (*r.buf)[:cap(*r.buf)]
		aheadBufs.Put(r.buf)
		r.buf = nil
	}
	return n
}
