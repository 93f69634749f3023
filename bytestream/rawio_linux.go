//go:build linux

package bytestream

import (
	"net"
	"sync"
	"syscall"
	"unsafe"

	"github.com/hostgate/hostgate/internal/rawio"
)

// On Linux the read-ahead's reads and the cork's writes of a WebSocket's
// TCP descriptor are raw system calls (internal/rawio says why, with the
// numbers).

// rawReads says readAhead can read the conn's descriptor itself.
const rawReads = true

// readFD reads fd once into p, retrying EINTR; wait is true when the
// descriptor has nothing to give yet (EAGAIN). n is -1 on an error, as
// syscall.Read's.
func readFD(fd uintptr, p []byte) (n int, wait bool, err error) {
	if len(p) == 0 {
		return 0, false, nil
	}
	n, e := rawio.Read(fd, p)
	if e != 0 {
		return -1, e == syscall.EAGAIN, e
	}
	return n, false, nil
}

// rawWriter writes a cork's flush to a TCP conn's descriptor with one raw
// writev(2) per wakeup, waiting through the conn's RawConn (so its write
// deadline holds) while the socket buffer is full.
type rawWriter struct {
	conn net.Conn
	raw  syscall.RawConn
	// The callback and what it works on, in the writer rather than in a
	// closure, which would be allocated at every flush (see readAhead).
	// Used under the cork's mutex.
	fn      func(fd uintptr) bool
	iov     *[maxCorkPieces]syscall.Iovec
	idx, n  int
	written int64
	err     error
}

// iovecs holds the vectors of flushes under way: an idle conn holds none.
var iovecs = sync.Pool{New: func() any { return new([maxCorkPieces]syscall.Iovec) }}

// newRawWriter returns conn's raw writer, or nil where conn is not a TCP
// conn (tests' wrappers, which then see net.Buffers' writes).
func newRawWriter(conn net.Conn) *rawWriter {
	tc, ok := conn.(*net.TCPConn)
	if !ok {
		return nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	w := &rawWriter{conn: conn, raw: raw}
	w.fn = w.writeOnce
	return w
}

// writev writes every byte of v (at most maxCorkPieces pieces) or fails,
// as net.Buffers.WriteTo does.
func (w *rawWriter) writev(v net.Buffers) (int64, error) {
	w.iov = iovecs.Get().(*[maxCorkPieces]syscall.Iovec)
	w.idx, w.n, w.written, w.err = 0, 0, 0, nil
	for _, p := range v {
		if len(p) > 0 {
			w.iov[w.n].Base = &p[0]
			w.iov[w.n].SetLen(len(p))
			w.n++
		}
	}
	err := w.raw.Write(w.fn)
	clear(w.iov[:w.n]) // the pool must not keep the payload alive
	iovecs.Put(w.iov)
	w.iov = nil
	if w.err != nil {
		err = &net.OpError{Op: "write", Net: "tcp", Source: w.conn.LocalAddr(), Addr: w.conn.RemoteAddr(), Err: w.err}
	}
	return w.written, err
}

// writeOnce is the raw write's callback: writev until every vector is
// written (true), the socket buffer is full (false: wait), or it fails.
func (w *rawWriter) writeOnce(fd uintptr) bool {
	for w.idx < w.n {
		r, e := rawio.Writev(fd, w.iov[w.idx:w.n])
		switch e {
		case 0:
		case syscall.EAGAIN:
			return false
		default:
			w.err = e
			return true
		}
		w.written += int64(r)
		for r > 0 { // past the vectors written whole, into the one cut short
			l := int(w.iov[w.idx].Len)
			if r < l {
				w.iov[w.idx].Base = (*byte)(unsafe.Add(unsafe.Pointer(w.iov[w.idx].Base), r))
				w.iov[w.idx].SetLen(l - r)
				break
			}
			r -= l
			w.idx++
		}
	}
	return true
}
