package bytestream

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/coder/websocket"

	"github.com/hostgate/hostgate/internal/textcut"
)

// DefaultReadLimit bounds one WebSocket message when the options leave
// ReadLimit at 0.
const DefaultReadLimit = 1 << 20

// MaxMessageSize is the largest WebSocket message this package writes: a
// Write is split into messages of at most this size (a single yamux frame
// can carry a whole 4 MiB window; as one message it would trip the peer's
// read limit and close the connection). A ReadLimit below it can break a
// stream whose peer is this package.
const MaxMessageSize = 64 << 10

// maxErrorBody bounds the response body a HandshakeError keeps: the
// 1 KiB coder/websocket reads of it (its Dial's doc), so that a gateway's
// answer of a host's direct addresses (wire.MaxDirectAnswerLen) comes
// whole. Its Error shows at most maxErrorText of it.
const (
	maxErrorBody = 1 << 10
	maxErrorText = 512
)

// WebSocketOptions configures DialWebSocket; nil means defaults.
type WebSocketOptions struct {
	Header http.Header // request headers (e.g. Authorization)
	// HTTPClient dials the handshake. Optional: nil uses this package's
	// own transport (http.DefaultTransport's settings), whose TCP conns it
	// can cork and whose client frames it writes itself (ws:// and wss://,
	// direct or through an HTTP(S) proxy, but not inside a CONNECT tunnel
	// or SOCKS5); a caller's client gets neither, and its WebSocket costs
	// more CPU per byte.
	HTTPClient *http.Client
	// RootCAs, with this package's own transport (HTTPClient nil), are
	// the CAs a wss:// server's certificate (and an https:// proxy's) is
	// checked against instead of the system's: a gateway with a
	// certificate from a private CA, or a self-signed one. nil: the
	// system's.
	RootCAs   *x509.CertPool
	ReadLimit int64 // max message size accepted; 0 = DefaultReadLimit
	// HandshakeTimeout bounds the opening handshake, from the dial to the
	// server's answer, within ctx; 0 = DefaultHandshakeTimeout, negative
	// = ctx alone.
	HandshakeTimeout time.Duration
	// WriteThrough: each Write sends its frames before it returns, in the
	// caller, where a dialed conn otherwise holds them for a flusher
	// goroutine (writeBehind) and returns. Write-behind pays for an SSH
	// client, whose writes are single packets with encryption between
	// them; a caller that copies a stream in large reads has nothing to
	// overlap, and the hand-off costs a thread wake-up and a copy per
	// write: `gateway proxy`, copying ssh's pipe, spent a fifth to a
	// quarter less CPU per MiB uploaded without it (bench/HISTORY.md,
	// round 48). A failed write is then that Write's error, not the next
	// one's.
	WriteThrough bool
	// Predialed is the connection PredialWebSocket made for this dial
	// (with the same url and RootCAs): the handshake goes out on it, not
	// on one dialed now, where it is still fresh. Optional; the dial
	// takes it at most once, and ignores it with a caller's HTTPClient.
	Predialed *Predialed
}

// DefaultHandshakeTimeout bounds DialWebSocket's opening handshake. A
// path that stalled once the TCP connection was made (a NAT that lost its
// state, a laptop's network gone) held a dial whose ctx had no deadline
// for ever: a Go client's host reconnecting on its first use after a lost
// connection waited out its caller's ctx, however long.
const DefaultHandshakeTimeout = 30 * time.Second

// handshakeTimeoutError is a DialWebSocket whose server did not answer
// within the handshake timeout: a net.Error whose Timeout is true,
// matching context.DeadlineExceeded.
type handshakeTimeoutError struct{ d time.Duration }

func (e *handshakeTimeoutError) Error() string {
	return fmt.Sprintf("no answer to the WebSocket handshake within %v (the path to the server stalled, or the server is overloaded)", e.d)
}
func (e *handshakeTimeoutError) Timeout() bool   { return true }
func (e *handshakeTimeoutError) Temporary() bool { return true }
func (e *handshakeTimeoutError) Unwrap() error   { return context.DeadlineExceeded }

// AcceptOptions configures Accept; nil means defaults.
type AcceptOptions struct {
	OriginPatterns []string // cross-origin hosts allowed (coder/websocket patterns); nil = same-origin only
	ReadLimit      int64    // max message size accepted; 0 = DefaultReadLimit
	Subprotocols   []string // offered subprotocols, in preference order
}

// HandshakeError is returned when the server answers the upgrade request
// with something other than 101 Switching Protocols.
type HandshakeError struct {
	StatusCode int    // the HTTP status the server answered
	Body       string // the start of the response body, at most 1 KiB, as sent (valid UTF-8); Error shows it printable
	err        error
}

func (e *HandshakeError) Error() string {
	if e.Body == "" {
		return fmt.Sprintf("bytestream: websocket handshake: status %d", e.StatusCode)
	}
	return fmt.Sprintf("bytestream: websocket handshake: status %d: %s", e.StatusCode, textcut.PrintableLine(textcut.Cut(e.Body, maxErrorText)))
}

func (e *HandshakeError) Unwrap() error { return e.err }

// WebSocket is DialWebSocket without the handshake response.
func WebSocket(ctx context.Context, url string, opts *WebSocketOptions) (net.Conn, error) {
	c, _, err := DialWebSocket(ctx, url, opts)
	return c, err
}

// DialWebSocket dials url (ws://, wss://, http:// or https://; http(s) is
// mapped to ws(s)) and returns a stream whose bytes travel as binary
// messages, with the handshake response (its headers carry data such as
// enrollment results; its body is already consumed; its TLS field is nil
// where this package made the TLS conn). ctx bounds the dial
// only; the conn lives until Close. A non-101 answer is a *HandshakeError.
//
// The conn supports deadlines; when one expires during a Read or Write the
// whole connection is closed (coder/websocket semantics). It does not offer
// CloseWrite: WebSocket has no half-close, so Close ends both directions.
// Each Write becomes one or more messages of at most MaxMessageSize. Messages larger
// than the read limit close the connection with status 1009.
func DialWebSocket(ctx context.Context, url string, opts *WebSocketOptions) (net.Conn, *http.Response, error) {
	var o WebSocketOptions
	if opts != nil {
		o = *opts
	}
	u, err := websocketURL(url)
	if err != nil {
		return nil, nil, err
	}
	if o.HandshakeTimeout == 0 {
		o.HandshakeTimeout = DefaultHandshakeTimeout
	}
	hctx := ctx
	if o.HandshakeTimeout > 0 {
		var cancel context.CancelFunc
		hctx, cancel = context.WithTimeoutCause(ctx, o.HandshakeTimeout, &handshakeTimeoutError{o.HandshakeTimeout})
		defer cancel()
		ctx = hctx
	}
	hc, cork := o.HTTPClient, (*corkSlot)(nil)
	if hc == nil {
		// Our own transport, so the dialed conn can be corked (see corkConn).
		cork = &corkSlot{pre: o.Predialed}
		ctx = context.WithValue(ctx, corkSlotKey{}, cork)
		hc = corkClient()
		if o.RootCAs != nil {
			// A client of its own: the transport keeps no conns, so it
			// holds nothing once this dial is done.
			hc = newCorkClient(o.RootCAs)
		}
	}
	c, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{
		HTTPClient: noDowngrade(hc),
		HTTPHeader: o.Header,
	})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			he := &HandshakeError{StatusCode: resp.StatusCode, err: err}
			if resp.Body != nil {
				b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
				he.Body = strings.ToValidUTF8(string(b), "\uFFFD")
			}
			return nil, resp, he
		}
		if cause := context.Cause(hctx); errors.Is(err, context.DeadlineExceeded) && errors.As(cause, new(*handshakeTimeoutError)) {
			// Ours, not the caller's ctx: say so, where the error read
			// "context deadline exceeded" alone.
			err = cause
		}
		return nil, resp, fmt.Errorf("bytestream: dial websocket: %w", err)
	}
	var (
		cc *corkConn
		tf *tlsFrames
	)
	if cork != nil {
		cc, tf = cork.c.Load(), cork.t.Load()
	}
	wc := newWSConn(c, o.ReadLimit, cc, false)
	// An agent's SSH sessions come through its tunnel, whose streams
	// report this conn's RemoteAddr: its logs say remote=URL of the
	// gateway, not websocket/unknown-addr.
	wc.Conn.(*msgConn).peer = dialedAddr(u)
	switch {
	case cc != nil && cc.writeFramesHere():
	case cc != nil && tf != nil && tf.tcp == cc && tf.writeFramesHere():
		wc.tlsf = tf
	default:
		cc = nil
	}
	write := wc.writeMessages
	if cc != nil {
		wc.keys = newMaskKeys()
		write = func(p []byte) (int, error) { return wc.writeFrames(p, false) }
	}
	if o.WriteThrough {
		wc.write = write
		return wc, resp, nil
	}
	// Dialed conns carry a client's SSH (or an agent's yamux) writes.
	wc.wb = newWriteBehind(write, wc.abort)
	if cc != nil {
		wc.wb.writeOwn = func(p []byte) (int, error) { return wc.writeFrames(p, true) }
	}
	return wc, resp, nil
}

// noDowngrade is hc refusing a redirect from https:// to http://.
// net/http copies Authorization (a bearer token) to a redirect whose host
// is the same or a subdomain, whatever its scheme, so following one sent
// the token, and then the stream, unencrypted to whoever answers the
// plain port. A redirect the other way, or between plain URLs, is
// followed as before (hc's own policy, else net/http's ten).
func noDowngrade(hc *http.Client) *http.Client {
	c := *hc
	next := hc.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if !isTLSScheme(req.URL.Scheme) {
			for _, v := range via {
				if isTLSScheme(v.URL.Scheme) {
					return fmt.Errorf("%s redirected to %s, which would send its credentials unencrypted: refused; give the https:// (or wss://) URL of the server itself, not one that redirects", v.URL.Redacted(), req.URL.Redacted())
				}
			}
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &c
}

func isTLSScheme(s string) bool { return s == "https" || s == "wss" }

// CheckOrigin applies Accept's Origin rule to r without answering it: nil
// when r has no Origin (a program, which no page can make send a cookie or
// a bearer token it does not hold), when its Origin's host is r's Host, or
// when it matches one of patterns (AcceptOptions.OriginPatterns:
// path.Match, case-insensitive, against the host, or against
// scheme://host for a pattern holding "://"). It is coder/websocket's own
// check, which Accept runs only once the handler has done its work: an
// endpoint whose work comes first (opening a stream to a host) checks here
// before it.
func CheckOrigin(r *http.Request, patterns []string) error {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	u, err := url.Parse(origin)
	if err != nil {
		// url.Error quotes the whole input again, and its own error may
		// quote a part (a port): a peer's Origin of up to the server's
		// header limit (1 MiB) went whole into the 403's body and the log.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("origin %q is not a URL: %s", textcut.Cut(origin, maxErrorText), textcut.Cut(err.Error(), maxErrorText))
	}
	if strings.EqualFold(r.Host, u.Host) {
		return nil
	}
	for _, p := range patterns {
		target := u.Host
		if strings.Contains(p, "://") {
			target = u.Scheme + "://" + u.Host
		}
		if ok, _ := path.Match(strings.ToLower(p), strings.ToLower(target)); ok {
			return nil
		}
	}
	if u.Host == "" {
		return fmt.Errorf("origin %q names no host", textcut.Cut(origin, maxErrorText))
	}
	return fmt.Errorf("origin %q is not this server's (%q)", textcut.Cut(u.Host, maxErrorText), textcut.Cut(r.Host, maxErrorText))
}

// Accept upgrades an HTTP request to a WebSocket and returns it as a stream
// (the server side of DialWebSocket). On failure a response has already been
// written to w. The connection is hijacked: it does not depend on the
// handler, which may return while the conn is in use, and it is not bound to
// r.Context() — the caller owns the conn and must Close it.
func Accept(w http.ResponseWriter, r *http.Request, opts *AcceptOptions) (net.Conn, error) {
	var o AcceptOptions
	if opts != nil {
		o = *opts
	}
	cork := &corkHijacker{ResponseWriter: w}
	c, err := websocket.Accept(cork, r, &websocket.AcceptOptions{
		OriginPatterns: o.OriginPatterns,
		Subprotocols:   o.Subprotocols,
	})
	if err != nil {
		return nil, fmt.Errorf("bytestream: accept websocket: %w", err)
	}
	wc := newWSConn(c, o.ReadLimit, cork.conn, true)
	return wc, nil
}

// corkHijacker hands coder/websocket a corked conn at Hijack: its write
// buffer splits every message into a buffer-full write and the rest, two
// syscalls and two wakeups of the peer; corked, a Write of up to four
// messages is one write, and the buffer that collects it is held only
// while it is written (so 10,000 idle tunnels hold none).
type corkHijacker struct {
	http.ResponseWriter
	conn *corkConn
}

func (h *corkHijacker) Unwrap() http.ResponseWriter { return h.ResponseWriter }

func (h *corkHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if err := brw.Writer.Flush(); err != nil {
		return nil, nil, err
	}
	// Bytes the client sent right after its request sit in brw.Reader:
	// the read-ahead serves them first.
	left, _ := brw.Reader.Peek(brw.Reader.Buffered())
	_, tcp := conn.(*net.TCPConn)
	h.conn = &corkConn{Conn: conn, ra: newReadAhead(conn, bytes.Clone(left)), rw: newRawWriter(conn), refs: tcp}
	// coder/websocket keeps the buffers it is handed for the conn's life:
	// net/http's 4 KiB pair held 8 KiB of every idle agent tunnel. Small
	// ones do the same work here: the read-ahead under them makes the
	// reads' syscalls, and the cork the writes', taking its buffer only
	// while a call writes; a payload larger than these goes past them
	// straight to the cork (bufio's own rule), as one past 4 KiB did.
	return h.conn, bufio.NewReadWriter(bufio.NewReaderSize(h.conn, acceptBufSize), bufio.NewWriterSize(h.conn, acceptBufSize)), nil
}

// acceptBufSize is the read and write buffer an accepted WebSocket keeps:
// room for a frame header and a small control frame (a ping's, a close's),
// which a write then sends in one piece.
const acceptBufSize = 256

// wsConn is a WebSocket as a stream (msgConn) with a read limit, bounded
// message size, and deadline errors that say so.
type wsConn struct {
	net.Conn // *msgConn: deadlines, Read, Close
	ws       *websocket.Conn
	cork     *corkConn                 // the TCP conn; nil with a caller's HTTPClient
	wb       *writeBehind              // dialed conns write behind (see writeBehind); nil on the server side and with WriteThrough
	keys     *rand.ChaCha8             // mask keys where this package writes the client frames (clientframes.go)
	tlsf     *tlsFrames                // the TLS conn those frames go to; nil: straight to cork
	write    func([]byte) (int, error) // a WriteThrough conn's writer; nil: writeMessages (or wb)

	readDeadline  atomic.Pointer[time.Time]
	writeDeadline atomic.Pointer[time.Time]
}

// A deadline that passes during an operation closes the conn, and the
// operation fails with whatever the close caused; callers (net/http,
// x/crypto/ssh, bicopy) test for os.ErrDeadlineExceeded.
func deadlineErr(err error, d *atomic.Pointer[time.Time]) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return err // already says so (wrapped by an earlier call)
	}
	if t := d.Load(); t != nil && !t.IsZero() && !time.Now().Before(*t) {
		return fmt.Errorf("bytestream: websocket: %w (%w)", os.ErrDeadlineExceeded, err)
	}
	return err
}

func (c *wsConn) Read(p []byte) (int, error) {
	if t := c.readDeadline.Load(); t != nil && !t.IsZero() && !time.Now().Before(*t) {
		// Refused before it starts, as pastWriteDeadline says why: the
		// deadline's timer, marking it late, closed the conn under a
		// Read that came first.
		return 0, fmt.Errorf("bytestream: websocket read: %w", os.ErrDeadlineExceeded)
	}
	n, err := c.Conn.Read(p)
	if err != nil {
		err = deadlineErr(err, &c.readDeadline)
	}
	return n, err
}

func (c *wsConn) SetDeadline(t time.Time) error {
	c.readDeadline.Store(&t)
	c.writeDeadline.Store(&t)
	return c.Conn.SetDeadline(t)
}

func (c *wsConn) SetReadDeadline(t time.Time) error {
	c.readDeadline.Store(&t)
	return c.Conn.SetReadDeadline(t)
}

func (c *wsConn) SetWriteDeadline(t time.Time) error {
	c.writeDeadline.Store(&t)
	return c.Conn.SetWriteDeadline(t)
}

// newWSConn wraps c; cork, if known (nil: a caller's HTTPClient dialed),
// is the TCP conn under it, whose local address the conn reports, and its
// remote one if addrs.
func newWSConn(c *websocket.Conn, limit int64, cork *corkConn, addrs bool) *wsConn {
	if limit <= 0 {
		limit = DefaultReadLimit
	}
	c.SetReadLimit(limit)
	mc := newMsgConn(c, cork)
	mc.addrs = cork != nil && addrs
	return &wsConn{Conn: mc, ws: c, cork: cork}
}

// readsBuffered: coder/websocket reads through a buffer (bufferedReader).
func (c *wsConn) readsBuffered() bool { return true }

// abort closes the connection without the close handshake, which would
// wait up to 5 s for a peer already known to be dead (mux timeouts, a
// write-behind drain that ran out of time).
func (c *wsConn) abort() error { return c.Conn.(*msgConn).abort() }

// Write sends p as binary messages of at most MaxMessageSize bytes.
func (c *wsConn) Write(p []byte) (int, error) {
	if err := c.pastWriteDeadline(); err != nil {
		return 0, err
	}
	if c.wb != nil {
		return c.writeJoined(p, nil)
	}
	if c.write != nil {
		return c.write(p)
	}
	return c.writeMessages(p)
}

// writeJoined writes a then b as one Write of both would, without joining
// them first; only where joinsWrites.
func (c *wsConn) writeJoined(a, b []byte) (int, error) {
	if err := c.pastWriteDeadline(); err != nil {
		return 0, err
	}
	if c.wb == nil {
		return c.writeParts(a, b)
	}
	n, err := c.wb.writeJoined(a, b)
	if err != nil {
		err = deadlineErr(err, &c.writeDeadline)
	}
	return n, err
}

// pastWriteDeadline refuses a write once the write deadline has passed,
// before it starts: msgConn's own refusal waits for the deadline's timer
// to mark it, and a write that came first was cut by the deadline (a
// corked flush given the passed deadline, the timer's abort of a write
// under way) and closed the conn; a write-behind conn held the bytes, and
// its flusher's failure with the deadline failed every later Write, the
// deadline cleared or not. Refused, the conn writes again once the
// deadline is moved, as a TCP conn does.
func (c *wsConn) pastWriteDeadline() error {
	if t := c.writeDeadline.Load(); t != nil && !t.IsZero() && !time.Now().Before(*t) {
		return fmt.Errorf("bytestream: websocket write: %w", os.ErrDeadlineExceeded)
	}
	return nil
}

// joinsWrites reports whether writeJoined may be used: the conn holds
// writes behind, so two parts meet in its buffer at no extra cost; or its
// cork holds payloads by reference (an accepted TCP conn), so a small
// first part goes out as a message of its own in the same writev as the
// second, which is not copied at all.
func (c *wsConn) joinsWrites() bool { return c.wb != nil || (c.cork != nil && c.cork.refs) }

// joinRange is the sizes of a second part to hand to writeJoined. A
// write-behind conn takes any that fits its buffer with the first. A corked
// one takes 4 KiB (below that, one copy into a single message costs less
// than a second message for the peer to parse) to MaxMessageSize: it
// writes in the caller, and muxConn's watchdog allows one message's worth
// per arming (MuxConfig.WriteTimeout).
func (c *wsConn) joinRange() (lo, hi int) {
	if c.wb != nil {
		return 0, wbMax - hdrSize - 1
	}
	return 4 << 10, MaxMessageSize
}

// Close closes the conn, first letting held write-behind bytes out.
func (c *wsConn) Close() error {
	if c.wb != nil {
		c.wb.drain()
	}
	return c.Conn.Close()
}

// writeMessages writes p as messages of at most MaxMessageSize bytes
// through coder/websocket, as the server side and a dialed conn under TLS
// (or over a caller's HTTP client) write them, corking the TCP conn, if
// known, for all of them: coder/websocket masks client
// frames through its 4 KiB write buffer and flushes each 4 KiB, so a 32 KiB
// SSH packet was nine write syscalls and as many wakeups of the reader;
// corked, a call of up to four messages (a write-behind batch, the
// gateway relay's 256 KiB copies) is one. (Server frames are not masked
// but still cost two writes each through the write buffer.) A longer call
// goes out in a few larger writes, in order (see corkConn.Write).
func (c *wsConn) writeMessages(p []byte) (int, error) { return c.writeParts(nil, p) }

// writeParts is writeMessages of p with head, if any, first as a message of
// its own, in the same corked call. On the gateway, muxConn hands a yamux
// data frame's 12-byte header as head and the body as p: joining them in
// one message took a copy of the body, and a body of a whole message
// (64 KiB, what a caller's write-behind sends) then left 12 bytes over for
// a message, and a write syscall, of their own.
func (c *wsConn) writeParts(head, p []byte) (int, error) {
	if c.cork != nil {
		c.cork.corkOn(p)
	}
	n := 0
	var err error
	if len(head) > 0 {
		n, err = c.Conn.Write(head)
	}
	for len(p) > 0 && err == nil {
		chunk := p[:min(len(p), MaxMessageSize)]
		var m int
		m, err = c.Conn.Write(chunk)
		n += m
		p = p[len(chunk):]
	}
	if c.cork != nil {
		var d time.Time
		if t := c.writeDeadline.Load(); t != nil {
			d = *t
		}
		if ferr := c.cork.uncork(d); ferr != nil {
			// Frames are half sent: the stream cannot continue.
			_ = c.ws.CloseNow()
			if err == nil {
				err = fmt.Errorf("bytestream: websocket write: %w", ferr)
			}
			n = 0
		}
	}
	if err != nil {
		return n, deadlineErr(err, &c.writeDeadline)
	}
	return n, nil
}

// Cork buffers hold what one call writes, its frame headers, and room for
// a control frame written meanwhile: one message (most calls: a gateway's
// writes to an agent are cut to messages by muxConn) or a write-behind
// batch of four (wbMax). They come from pools between calls, so an idle
// conn (10,000 agent tunnels) holds none, and a small write never pins a
// big buffer.
const (
	corkSmall = MaxMessageSize + 4<<10
	corkBig   = wbMax + 4<<10
)

var (
	corkSmallBufs = sync.Pool{New: func() any { b := make([]byte, 0, corkSmall); return &b }}
	corkBigBufs   = sync.Pool{New: func() any { b := make([]byte, 0, corkBig); return &b }}
)

// corkConn is a conn whose writes, while corked, collect in a buffer
// that uncork writes in one call. A write that does not fit flushes what
// is held and goes out on its own, and corking goes on (order is kept).
// Writes are serialized by its mutex, so frames written by other
// goroutines (pongs, close) stay in order.
//
// On an accepted TCP conn (refs), a write that lies inside the payload
// the corked call was given is held by reference instead of copied:
// coder/websocket writes a server frame's payload past its small buffer
// (acceptBufSize) straight from the caller's slice, which stays unchanged until the call
// returns, and the call uncorks before it returns. uncork then hands the
// pieces to one writev. On the gateway's writes to callers that was a
// copy of every byte. A dialed conn carrying ws:// (plain) gets its data
// frames from appendFrame instead (clientframes.go), also by reference.
type corkConn struct {
	net.Conn
	ra      *readAhead // nil: reads go straight to Conn
	rw      *rawWriter // nil, or made for another Conn (a test's wrapper): flushes go through Conn (rawio_linux.go)
	refs    bool       // payload writes may be held by reference (see above)
	mu      sync.Mutex
	corked  bool
	buf     *[]byte
	payload []byte      // the corked call's payload (refs)
	vec     net.Buffers // what is held, in order: pieces of buf and of payload
	wv      net.Buffers // vec as handed to WriteTo, which consumes it (a field: no allocation)
	open    int         // where in buf vec's last piece starts, -1 if it is a reference (with vec non-empty)

	watch frameWatch // what coder/websocket writes (clientframes.go)
}

// writeFramesHere reports whether the WebSocket's frames are this conn's
// bytes (see frameWatch): appendFrame may write the data frames.
func (c *corkConn) writeFramesHere() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.watch.plain
}

// vecWriter is a conn wrapper that passes a vectored write through in
// one call (net.Buffers.WriteTo uses writev only on net's own conns);
// tests wrap the TCP conn to count its writes.
type vecWriter interface {
	writeVec(v net.Buffers) (int64, error)
}

// maxCorkPieces bounds the pieces one flush hands to writev (IOV_MAX is
// 1024): a corked call of four messages holds about a dozen.
const maxCorkPieces = 64

func (c *corkConn) Read(p []byte) (int, error) {
	if c.ra == nil {
		return c.Conn.Read(p)
	}
	return c.ra.Read(p)
}

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.watch.saw(p)
	if c.corked && c.buf != nil && len(c.vec) < maxCorkPieces {
		if c.refs && inside(p, c.payload) {
			c.vec = append(c.vec, p)
			c.open = -1
			return len(p), nil
		}
		if len(*c.buf)+len(p) <= cap(*c.buf) {
			start := len(*c.buf)
			*c.buf = append(*c.buf, p...)
			if c.open >= 0 && len(c.vec) > 0 {
				c.vec[len(c.vec)-1] = (*c.buf)[c.open:] // contiguous with the last copy
			} else {
				c.vec = append(c.vec, (*c.buf)[start:])
				c.open = start
			}
			return len(p), nil
		}
	}
	if err := c.flushLocked(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

// inside reports whether p is a non-empty part of s.
func inside(p, s []byte) bool {
	if len(p) == 0 || len(p) > len(s) {
		return false
	}
	ps := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
	ss := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	return ps >= ss && ps-ss <= uintptr(len(s)-len(p))
}

// corkOn corks the conn for a call that writes payload (framed): writes
// of parts of payload are held by reference until uncork.
func (c *corkConn) corkOn(payload []byte) { c.corkFor(payload, len(payload)) }

// corkFor corks the conn for a call that copies about n bytes into the
// cork, holding parts of payload (if refs) by reference.
func (c *corkConn) corkFor(payload []byte, n int) {
	c.mu.Lock()
	c.corked = true
	if c.refs {
		c.payload = payload
	}
	if c.buf == nil {
		if n <= MaxMessageSize || c.refs {
			c.buf = corkSmallBufs.Get().(*[]byte)
		} else {
			c.buf = corkBigBufs.Get().(*[]byte)
		}
	}
	c.mu.Unlock()
}

// uncork writes what the cork holds, bounded by deadline (zero: none): the
// flush happens outside coder/websocket's own write timeout.
func (c *corkConn) uncork(deadline time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	if c.buf == nil {
		return nil
	}
	var err error
	if len(c.vec) > 0 {
		if !deadline.IsZero() {
			_ = c.Conn.SetWriteDeadline(deadline)
		}
		err = c.flushLocked()
		if !deadline.IsZero() {
			_ = c.Conn.SetWriteDeadline(time.Time{})
		}
	}
	*c.buf = (*c.buf)[:0]
	if cap(*c.buf) == corkBig {
		corkBigBufs.Put(c.buf)
	} else {
		corkSmallBufs.Put(c.buf)
	}
	c.buf = nil
	c.payload = nil
	return err
}

// Close lets out what the cork holds, then closes the conn. coder/websocket
// answers a peer's close frame and then closes the conn; while a write call
// has the conn corked, that answer is still held here (or in the flush the
// write call is making), and dropping it would fail the peer's close
// handshake. Close waits for a flush under way and flushes what is left,
// all within closeFlushTimeout: the deadline also ends a write stuck on a
// peer that does not read, so a watchdog's Close still ends it.
func (c *corkConn) Close() error {
	_ = c.Conn.SetWriteDeadline(time.Now().Add(closeFlushTimeout))
	c.mu.Lock()
	if len(c.vec) > 0 {
		// uncork may have cleared the deadline after its own flush.
		_ = c.Conn.SetWriteDeadline(time.Now().Add(closeFlushTimeout))
		_ = c.flushLocked()
	}
	c.mu.Unlock()
	return c.Conn.Close()
}

// closeNow closes the TCP conn at once. A write stuck on a dead peer holds
// the cork's mutex until it fails; Close would wait for it (up to
// closeFlushTimeout), and under TLS crypto/tls's Close, finding no write
// of its own under way, queues its close_notify behind it for up to 5 s
// (its own write deadline): on a wss:// tunnel a mux timeout took 5 s
// more to end the session, and a stalled peer's Close 10 s.
func (c *corkConn) closeNow() error { return c.Conn.Close() }

// closeFlushTimeout bounds the write of held bytes at Close.
const closeFlushTimeout = time.Second

func (c *corkConn) flushLocked() error {
	if len(c.vec) == 0 {
		return nil
	}
	var err error
	if c.rw != nil && c.rw.conn == c.Conn && len(c.vec) <= maxCorkPieces {
		_, err = c.rw.writev(c.vec)
	} else if len(c.vec) == 1 {
		_, err = c.Conn.Write(c.vec[0])
	} else if vw, ok := c.Conn.(vecWriter); ok {
		_, err = vw.writeVec(c.vec)
	} else {
		c.wv = c.vec
		_, err = c.wv.WriteTo(c.Conn)
		c.wv = nil
	}
	clear(c.vec) // drop the references to the caller's payload
	c.vec = c.vec[:0]
	*c.buf = (*c.buf)[:0]
	return err
}

// tlsHandshakeTimeout is the error of a TLS dial whose handshake outlasted
// the transport's TLSHandshakeTimeout: a net.Error whose Timeout is true,
// as net/http's own is, so callers that retry timeouts still do.
type tlsHandshakeTimeout struct {
	addr string
	d    time.Duration
}

func (e *tlsHandshakeTimeout) Error() string {
	return fmt.Sprintf("bytestream: TLS handshake with %s: no answer within %v", e.addr, e.d)
}
func (e *tlsHandshakeTimeout) Timeout() bool   { return true }
func (e *tlsHandshakeTimeout) Temporary() bool { return true }
func (e *tlsHandshakeTimeout) Unwrap() error   { return os.ErrDeadlineExceeded }

// corkSlot carries the conn a dial made back to DialWebSocket (through the
// request context), and over TLS the TLS conn on it. It keeps the last
// one: a handshake the server redirects dials again for the next request
// (the transport keeps no idle conns), and the WebSocket is on the last
// conn, never on an earlier one.
type corkSlot struct {
	c   atomic.Pointer[corkConn]
	t   atomic.Pointer[tlsFrames]
	pre *Predialed // WebSocketOptions.Predialed; nil: none
}

type corkSlotKey struct{}

// corkClient is the HTTP client DialWebSocket uses when the caller gives
// none: http.DefaultTransport's settings, its dialed conns wrapped in
// corkConn.
var corkClient = sync.OnceValue(func() *http.Client { return defaultCork().client() })

// defaultCork is corkClient's dialer, which PredialWebSocket dials with
// when its caller gives no RootCAs.
var defaultCork = sync.OnceValue(func() *corkDialer { return newCorkDialer(nil) })

// newCorkClient is corkClient's making, with roots (nil: the system's)
// as the CAs its TLS trusts.
func newCorkClient(roots *x509.CertPool) *http.Client { return newCorkDialer(roots).client() }

// corkDialer dials the conns of this package's transport tr: TCP conns
// wrapped in corkConn, and over TLS (to a wss:// gateway, or to an
// https:// proxy) TLS conns on them whose frames it writes (tlsFrames).
type corkDialer struct {
	tr *http.Transport
	d  *net.Dialer
}

func newCorkDialer(roots *x509.CertPool) *corkDialer {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if roots != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: roots}
	}
	// A conn is never reused: a handshake's conn is hijacked or, refused,
	// closed. Without idle conns the transport gives every request the
	// conn its own dial made, so the cork slot a dial fills is that
	// request's (an idle conn taken instead would have left the request's
	// own dial to another request, and its slot pointing at that one).
	tr.DisableKeepAlives = true
	return &corkDialer{tr: tr, d: &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}}
}

// client is the HTTP client on cd's transport. A dial fills the cork slot
// in its request's context, and takes the slot's predialed conn where
// there is one for its address.
func (cd *corkDialer) client() *http.Client {
	cd.tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		s, _ := ctx.Value(corkSlotKey{}).(*corkSlot)
		cc, _ := s.predialed(addr, false).(*corkConn)
		if cc == nil {
			var err error
			if cc, err = cd.dialTCP(ctx, network, addr); err != nil {
				return nil, err
			}
		}
		if s != nil {
			s.c.Store(cc)
		}
		return cc, nil
	}
	cd.tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		s, _ := ctx.Value(corkSlotKey{}).(*corkSlot)
		tf, _ := s.predialed(addr, true).(*tlsFrames)
		if tf == nil {
			var err error
			if tf, err = cd.dialTLS(ctx, network, addr); err != nil {
				return nil, err
			}
		}
		if s != nil {
			s.c.Store(tf.tcp)
			s.t.Store(tf)
		}
		return tf, nil
	}
	return &http.Client{Transport: cd.tr}
}

func (cd *corkDialer) dialTCP(ctx context.Context, network, addr string) (*corkConn, error) {
	conn, err := cd.d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &corkConn{Conn: conn, ra: newReadAhead(conn, nil), rw: newRawWriter(conn)}, nil
}

// dialTLS makes the first TLS on a conn the transport dialed, which is
// ours too: to a wss:// gateway, or to an https:// proxy (HTTPS_PROXY).
// The frames go to it in large writes where the WebSocket is its
// plaintext (tlsFrames: a wss:// gateway, or a ws:// one sent to the
// proxy). TLS inside a proxy's CONNECT tunnel or SOCKS5 stays the
// transport's, and the frames coder/websocket's. The dial does what the
// transport's would: its TLSClientConfig, the host as server name, no
// ALPN (the transport offers none for a WebSocket request, which is
// HTTP/1.1 only; its own config offers h2 once it has made a request),
// its handshake timeout, an error that is a timeout. What the transport
// no longer does for these conns: httptrace's TLS hooks do not fire, and
// the handshake response's TLS field is nil.
func (cd *corkDialer) dialTLS(ctx context.Context, network, addr string) (*tlsFrames, error) {
	tr := cd.tr
	cc, err := cd.dialTCP(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{}
	if tr.TLSClientConfig != nil {
		cfg = tr.TLSClientConfig.Clone()
	}
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		cfg.ServerName = host
	}
	cfg.NextProtos = nil
	hctx := ctx
	if tr.TLSHandshakeTimeout > 0 {
		var cancel context.CancelFunc
		hctx, cancel = context.WithTimeout(ctx, tr.TLSHandshakeTimeout)
		defer cancel()
	}
	tc := tls.Client(cc, cfg)
	if err := tc.HandshakeContext(hctx); err != nil {
		_ = cc.Close()
		if ctx.Err() == nil && hctx.Err() != nil {
			return nil, &tlsHandshakeTimeout{addr, tr.TLSHandshakeTimeout}
		}
		return nil, fmt.Errorf("bytestream: TLS handshake with %s: %w", addr, err)
	}
	return &tlsFrames{Conn: tc, tcp: cc}, nil
}

// websocketURL checks raw and maps http(s) to ws(s). It accepts only
// absolute ws, wss, http and https URLs with a host.
func websocketURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("bytestream: websocket url: %w", err)
	}
	switch strings.ToLower(u.Scheme) {
	case "ws", "http":
		u.Scheme = "ws"
	case "wss", "https":
		u.Scheme = "wss"
	default:
		return "", fmt.Errorf("bytestream: websocket url %q: %w", raw, errScheme)
	}
	if u.Host == "" {
		return "", fmt.Errorf("bytestream: websocket url %q: no host", raw)
	}
	if u.User != nil {
		return "", fmt.Errorf("bytestream: websocket url: credentials in the url are not sent; use a header")
	}
	u.Fragment = ""
	u.RawFragment = ""
	return u.String(), nil
}

var errScheme = errors.New("scheme must be ws, wss, http or https")
