package bytestream

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/hostgate/hostgate/internal/rawio"
)

// NewPipeConn joins a reader and a writer — a child's stdout and stdin, a
// docker exec attachment — into one net.Conn. Reads come from r, writes go to
// w. CloseWrite closes w, which the peer sees as EOF; Close closes both (once)
// and returns the first error.
//
// Deadlines are passed through to r and w when they implement
// SetReadDeadline/SetWriteDeadline (os.File pipes and sockets do, net.Conn
// does); otherwise the setters return os.ErrNoDeadline. Whether Close
// interrupts a blocked Read or Write likewise depends on r and w: it does for
// pollable os.Files and net.Conns.
func NewPipeConn(r io.ReadCloser, w io.WriteCloser) net.Conn {
	return &pipeConn{r: r, w: w, rs: rawStream(r), ws: rawStream(w)}
}

// pipeConn is safe for one reader and one writer at a time, like net.Conn;
// Close and CloseWrite may be called from any goroutine.
type pipeConn struct {
	r io.ReadCloser
	w io.WriteCloser
	// rs and ws read r and write w with raw system calls where they
	// are pollable files on Linux (rawStream); nil otherwise. Any error
	// of theirs is left for r's or w's own call to say, as it would have.
	rs, ws *rawio.Stream

	wOnce sync.Once
	wErr  error
	rOnce sync.Once
	rErr  error
}

type readDeadliner interface{ SetReadDeadline(time.Time) error }
type writeDeadliner interface{ SetWriteDeadline(time.Time) error }

func (c *pipeConn) Read(p []byte) (int, error) {
	if c.rs != nil && len(p) > 0 {
		switch n, errno, err := c.rs.Read(p); {
		case errno == 0 && err == nil && n == 0:
			return 0, io.EOF
		case errno == 0 && err == nil:
			return n, nil
		case errno != 0:
			// Said here, as the file's Read would: a socket's reset
			// (ECONNRESET) is reported once, and the file's Read after
			// it found the socket at its end, a clean EOF, which a copy
			// took for the peer's half-close.
			return 0, &os.PathError{Op: "read", Path: c.r.(*os.File).Name(), Err: errno}
		}
		// Closed, past a deadline: the file's Read says so (or reads,
		// where a deadline moved meanwhile).
	}
	n, err := c.r.Read(p)
	return n, closedErr(err)
}

func (c *pipeConn) Write(p []byte) (int, error) {
	written := 0
	if c.ws != nil && len(p) > 0 {
		n, errno, err := c.ws.Write(p)
		if errno == 0 && err == nil {
			return n, nil
		}
		// The rest, by the file's Write, which says what the raw write
		// met (SIGPIPE's handling on fd 1 included) or writes it.
		written, p = n, p[n:]
	}
	n, err := c.w.Write(p)
	return written + n, closedErr(err)
}

// PipeFiles returns the files the conn reads and writes where its raw
// calls serve them (pollable files in non-blocking mode, on Linux), nil
// otherwise: bicopy splices between such a pipe and a TCP conn (`gateway
// proxy`'s direct sessions) instead of copying through its buffers.
// Whoever moves bytes through them keeps to the conn's one reader and one
// writer, and still closes through the conn.
func (c *pipeConn) PipeFiles() (r, w *os.File) {
	if c.rs != nil {
		r, _ = c.r.(*os.File)
	}
	if c.ws != nil {
		w, _ = c.w.(*os.File)
	}
	return r, w
}

// closedErr makes a closed file look like a closed net.Conn, which is what
// copy loops (bicopy, x/crypto/ssh) test for, keeping the original error.
func closedErr(err error) error {
	if errors.Is(err, os.ErrClosed) && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("%w: %w", net.ErrClosed, err)
	}
	return err
}

// CloseWrite closes the writer so the peer reads EOF; reading goes on. A
// socket's writing direction is shut down first: r may be the same
// socket.
func (c *pipeConn) CloseWrite() error {
	c.wOnce.Do(func() {
		shutdownWrite(c.w)
		c.wErr = c.w.Close()
	})
	return c.wErr
}

func (c *pipeConn) Close() error {
	werr := c.CloseWrite()
	c.rOnce.Do(func() { c.rErr = c.r.Close() })
	if werr != nil && !errors.Is(werr, os.ErrClosed) {
		return werr
	}
	return c.rErr
}

func (c *pipeConn) LocalAddr() net.Addr  { return pipeAddr{} }
func (c *pipeConn) RemoteAddr() net.Addr { return pipeAddr{} }

func (c *pipeConn) SetDeadline(t time.Time) error {
	return errors.Join(c.SetReadDeadline(t), c.SetWriteDeadline(t))
}

func (c *pipeConn) SetReadDeadline(t time.Time) error {
	if d, ok := c.r.(readDeadliner); ok {
		return d.SetReadDeadline(t)
	}
	return os.ErrNoDeadline
}

func (c *pipeConn) SetWriteDeadline(t time.Time) error {
	if d, ok := c.w.(writeDeadliner); ok {
		return d.SetWriteDeadline(t)
	}
	return os.ErrNoDeadline
}

// pipeAddr names both ends of a pipe conn; there is no network address.
type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }
