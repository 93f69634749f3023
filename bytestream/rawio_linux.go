//go:build linux

package bytestream

import (
	"net"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// On Linux the read-ahead's reads and the cork's writes of a WebSocket's
// TCP descriptor are raw system calls (syscall.RawSyscall), not the
// runtime's syscall.Syscall, for the sake of the Go scheduler.
//
// A goroutine in syscall.Syscall hands its P to the runtime: sysmon, the
// runtime's monitor thread, takes a P back from a call that lasts more
// than a tick (20 µs) while its process is busy and gives it to another
// thread, and it polls every 20 µs while it finds such calls. A loopback
// writev of a few hundred KiB does the receiver's TCP work inline and
// takes longer than that, so a gateway, agent or client moving a bulk
// stream kept sysmon awake and its threads trading Ps: about 21 context
// switches per MiB in each process, half of them sysmon's sleeps. A raw
// call keeps the P: the descriptors are non-blocking (the netpoller waits
// for them, through RawConn, when they would block), so it never sleeps
// in the kernel, and holding a P for it is holding it for a copy of that
// many bytes. SFTP through the gateway on this 2-core machine, three
// alternating rounds of three 256 MiB runs each (bench/HISTORY.md, round
// 36): context switches per MiB in the gateway 22 to 8.5, the agent 22 to
// 14, the client 21 to 10; CPU per MiB downloaded, all three processes,
// 4.1 to 3.6 ms (medians), uploaded 4.6 to 3.95.

// rawReads says readAhead can read the conn's descriptor itself.
const rawReads = true

// readFD reads fd once into p, retrying EINTR; wait is true when the
// descriptor has nothing to give yet (EAGAIN). n is -1 on an error, as
// syscall.Read's.
func readFD(fd uintptr, p []byte) (n int, wait bool, err error) {
	if len(p) == 0 {
		return 0, false, nil
	}
	for {
		r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		switch e {
		case 0:
			return int(r), false, nil
		case syscall.EINTR:
			continue
		}
		return -1, e == syscall.EAGAIN, e
	}
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
	iov     *[maxCorkPieces]unix.Iovec
	idx, n  int
	written int64
	err     error
}

// iovecs holds the vectors of flushes under way: an idle conn holds none.
var iovecs = sync.Pool{New: func() any { return new([maxCorkPieces]unix.Iovec) }}

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
	w.iov = iovecs.Get().(*[maxCorkPieces]unix.Iovec)
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
		r, _, e := syscall.RawSyscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&w.iov[w.idx])), uintptr(w.n-w.idx))
		switch e {
		case 0:
		case syscall.EAGAIN:
			return false
		case syscall.EINTR:
			continue
		default:
			w.err = e
			return true
		}
		w.written += int64(r)
		for r > 0 { // past the vectors written whole, into the one cut short
			l := uintptr(w.iov[w.idx].Len)
			if r < l {
				w.iov[w.idx].Base = (*byte)(unsafe.Add(unsafe.Pointer(w.iov[w.idx].Base), r))
				w.iov[w.idx].SetLen(int(l - r))
				break
			}
			r -= l
			w.idx++
		}
	}
	return true
}
