package bytestream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/hostgate/hostgate/internal/textcut"
)

// msgConn is a net.Conn over a *websocket.Conn, one binary message per
// Write, as websocket.NetConn is, but without a context per operation.
//
// NetConn runs every read and write under a cancellable context so that a
// deadline can cancel it, and coder/websocket registers a
// context.AfterFunc on such a context for every frame it reads and every
// message it writes: an allocation and a lock on the parent context each
// time. perf of an SFTP download through the gateway put that at about 6%
// of the gateway's CPU, 3% of the agent's and 4% of the client's. Here
// operations run under context.Background(), which registers nothing.
// Deadlines keep NetConn's meaning: one that passes while an operation is
// blocked closes the connection (NetConn's cancelled context did that);
// one that passes between operations fails the next ones until it is
// reset.
type msgConn struct {
	ws    *websocket.Conn
	tcp   net.Conn // the conn under ws; nil: unknown (a caller's HTTP client dialed)
	addrs bool     // RemoteAddr is tcp's (accepted conns, as NetConn's); LocalAddr is tcp's whenever tcp is known
	// peer is RemoteAddr when addrs is false: the URL a dialed conn
	// dialed, or unknown.
	peer net.Addr

	readMu  sync.Mutex // held by Read for its whole call
	reader  io.Reader  // the message being read; nil between messages
	readEOF bool       // the peer closed normally: reads return io.EOF
	rd      opDeadline
	// closed is the peer's close frame, once a Read met it (PeerClose).
	closed atomic.Pointer[CloseError]

	writeMu sync.Mutex // held by Write for its whole call
	wd      opDeadline
}

// opDeadline is one direction's deadline: a timer that, when it fires,
// closes the connection if an operation holds mu, or else marks the
// direction expired.
type opDeadline struct {
	timer   *time.Timer
	expired atomic.Bool
	op      *sync.Mutex // the direction's operation lock (readMu, writeMu)
	abort   func()

	// mu orders fire against set; at is the deadline set (zero: none).
	// A firing can have started when set stops the timer (AfterFunc's
	// Stop cannot take it back): fire then finds the deadline cleared or
	// moved, and leaves it be. Without at, such a late firing marked a
	// cleared deadline expired, or closed the conn under a Read that
	// had a new deadline.
	mu sync.Mutex
	at time.Time
}

func (d *opDeadline) init(mu *sync.Mutex, abort func()) {
	d.op, d.abort = mu, abort
	d.timer = time.AfterFunc(math.MaxInt64, d.fire)
	d.timer.Stop()
}

// fire is the timer's function.
func (d *opDeadline) fire() {
	d.mu.Lock()
	if d.at.IsZero() {
		d.mu.Unlock()
		return
	}
	if wait := time.Until(d.at); wait > 0 {
		d.timer.Reset(wait)
		d.mu.Unlock()
		return
	}
	if !d.op.TryLock() {
		d.mu.Unlock()
		d.abort() // an operation is blocked: end it, as NetConn does
		return
	}
	d.expired.Store(true)
	d.op.Unlock()
	d.mu.Unlock()
}

func (d *opDeadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.at = t
	d.expired.Store(false)
	if t.IsZero() {
		d.timer.Stop()
		return
	}
	d.timer.Reset(max(time.Until(t), 1))
}

// newMsgConn wraps ws; cork, if known, is the TCP conn under it.
func newMsgConn(ws *websocket.Conn, cork *corkConn) *msgConn {
	c := &msgConn{ws: ws}
	if cork != nil {
		c.tcp = cork
	}
	abort := func() { _ = c.abort() }
	c.rd.init(&c.readMu, abort)
	c.wd.init(&c.writeMu, abort)
	return c
}

// abort closes the connection at once, without the close handshake: the
// TCP conn first, so that a write stuck on a dead peer ends now (see
// corkConn.closeNow), then the WebSocket.
func (c *msgConn) abort() error {
	if cc, ok := c.tcp.(*corkConn); ok {
		_ = cc.closeNow()
	}
	return c.ws.CloseNow()
}

func (c *msgConn) Read(p []byte) (int, error) {
	c.readMu.Lock()
	defer c.readMu.Unlock()
	for {
		if c.rd.expired.Load() {
			return 0, fmt.Errorf("bytestream: websocket read: %w", os.ErrDeadlineExceeded)
		}
		if c.readEOF {
			return 0, io.EOF
		}
		if c.reader == nil {
			typ, r, err := c.ws.Reader(context.Background())
			if err != nil {
				var ce websocket.CloseError
				if !errors.As(err, &ce) {
					return 0, err
				}
				closed := &CloseError{Code: int(ce.Code), Reason: textcut.Printable(ce.Reason), err: err}
				c.closed.CompareAndSwap(nil, closed)
				switch ce.Code {
				case websocket.StatusNormalClosure, websocket.StatusGoingAway:
					c.readEOF = true
					return 0, io.EOF
				}
				return 0, closed
			}
			if typ != websocket.MessageBinary {
				err := fmt.Errorf("bytestream: websocket: unexpected %v message, want binary", typ)
				_ = c.ws.Close(websocket.StatusUnsupportedData, err.Error())
				return 0, err
			}
			c.reader = r
		}
		n, err := c.reader.Read(p)
		if err == io.EOF {
			c.reader = nil
			err = nil
		}
		if err != nil {
			// coder/websocket returns what it read of a frame cut short
			// with the error, before unmasking it: bytes the peer never
			// sent, which yamux read as frames ("invalid protocol version"
			// in the log, a MAC error at the SSH client). The stream is
			// broken anyway.
			n = 0
		}
		if n > 0 || err != nil || len(p) == 0 {
			return n, err
		}
	}
}

func (c *msgConn) Write(p []byte) (int, error) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if c.wd.expired.Load() {
		return 0, fmt.Errorf("bytestream: websocket write: %w", os.ErrDeadlineExceeded)
	}
	if err := c.ws.Write(context.Background(), websocket.MessageBinary, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// closeReplyWait bounds how long Close waits for the peer to answer its
// close frame. coder/websocket waits up to 5 s, and with a Read blocked on
// the conn (a stream's reader nearly always is) NetConn's Close did not
// wait at all: cancelling the read closed the conn right after the close
// frame. A dead peer (a tunnel being replaced) must not hold Close for
// seconds; a live one answers within a round trip, and the peer has our
// close frame either way.
const closeReplyWait = 250 * time.Millisecond

// Close stops the deadlines and closes with the close handshake, waiting
// at most closeReplyWait for the peer's answer: past it, the TCP conn is
// closed under the handshake (coder/websocket's CloseNow cannot cut a
// Close under way). Without the TCP conn (a caller's HTTP client dialed)
// coder/websocket's own 5 s bound applies.
func (c *msgConn) Close() error { return c.closeWith(websocket.StatusNormalClosure, "") }

// closeWith is Close with the close frame's status code and reason.
func (c *msgConn) closeWith(code websocket.StatusCode, reason string) error {
	c.rd.timer.Stop()
	c.wd.timer.Stop()
	var cut atomic.Bool
	if c.tcp != nil {
		t := time.AfterFunc(closeReplyWait, func() {
			cut.Store(true)
			_ = c.tcp.Close()
		})
		defer t.Stop()
	}
	err := c.ws.Close(code, reason)
	if cut.Load() {
		return nil // our close frame went out; the answer did not come in time
	}
	return err
}

func (c *msgConn) SetDeadline(t time.Time) error {
	c.rd.set(t)
	c.wd.set(t)
	return nil
}

func (c *msgConn) SetReadDeadline(t time.Time) error  { c.rd.set(t); return nil }
func (c *msgConn) SetWriteDeadline(t time.Time) error { c.wd.set(t); return nil }

// LocalAddr is the TCP conn's local address where the conn under the
// WebSocket is known, dialed conns included: an agent's SSH server names
// it in SSH_CONNECTION as the address its host was reached at, as sshd
// names the address a caller reached (the remote end of a dialed conn may
// be a proxy; the local end is this machine's either way).
func (c *msgConn) LocalAddr() net.Addr {
	if c.tcp != nil {
		return c.tcp.LocalAddr()
	}
	return wsAddr{}
}

func (c *msgConn) RemoteAddr() net.Addr {
	if c.addrs {
		return c.tcp.RemoteAddr()
	}
	if c.peer != nil {
		return c.peer
	}
	return wsAddr{}
}

// wsAddr stands for an end whose TCP address is not given: the local end
// of a conn a caller's HTTP client dialed ("websocket/unknown-addr", as
// NetConn's), or the remote end of a dialed conn as the URL dialed. A dialed conn's TCP peer may be a proxy, and an
// agent counting handshakes per source address must not count every
// stream of its tunnel as one source, so a dialed conn never reports a
// *net.TCPAddr.
type wsAddr struct{ url string }

func (wsAddr) Network() string { return "websocket" }
func (a wsAddr) String() string {
	if a.url == "" {
		return "websocket/unknown-addr"
	}
	return a.url
}

// dialedAddr is the RemoteAddr of a conn dialed to u (a ws:// or wss://
// URL): u without its query, which may carry a secret.
func dialedAddr(u string) net.Addr {
	pu, err := url.Parse(u)
	if err != nil {
		return wsAddr{}
	}
	pu.User, pu.RawQuery, pu.ForceQuery, pu.Fragment, pu.RawFragment = nil, "", false, "", ""
	return wsAddr{url: pu.String()}
}
