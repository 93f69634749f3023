package bytestream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
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

// maxErrorBody bounds the response body a HandshakeError keeps.
const maxErrorBody = 512

// WebSocketOptions configures DialWebSocket; nil means defaults.
type WebSocketOptions struct {
	Header     http.Header  // request headers (e.g. Authorization)
	HTTPClient *http.Client // optional; http.DefaultClient's transport otherwise
	ReadLimit  int64        // max message size accepted; 0 = DefaultReadLimit
}

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
	Body       string // the start of the response body, at most 512 bytes
	err        error
}

func (e *HandshakeError) Error() string {
	if e.Body == "" {
		return fmt.Sprintf("bytestream: websocket handshake: status %d", e.StatusCode)
	}
	return fmt.Sprintf("bytestream: websocket handshake: status %d: %s", e.StatusCode, e.Body)
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
// enrollment results; its body is already consumed). ctx bounds the dial
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
	c, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{
		HTTPClient: o.HTTPClient,
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
		return nil, resp, fmt.Errorf("bytestream: dial websocket: %w", err)
	}
	return newWSConn(c, o.ReadLimit), resp, nil
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
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		OriginPatterns: o.OriginPatterns,
		Subprotocols:   o.Subprotocols,
	})
	if err != nil {
		return nil, fmt.Errorf("bytestream: accept websocket: %w", err)
	}
	return newWSConn(c, o.ReadLimit), nil
}

// wsConn is coder/websocket's NetConn with a read limit, bounded message
// size, and deadline errors that say so.
type wsConn struct {
	net.Conn // websocket.NetConn: deadlines, Read, Close
	ws       *websocket.Conn

	readDeadline  atomic.Pointer[time.Time]
	writeDeadline atomic.Pointer[time.Time]
}

// NetConn reports an expired deadline as a cancelled context; callers
// (net/http, x/crypto/ssh, bicopy) test for os.ErrDeadlineExceeded.
func deadlineErr(err error, d *atomic.Pointer[time.Time]) error {
	if t := d.Load(); t != nil && !t.IsZero() && !time.Now().Before(*t) {
		return fmt.Errorf("bytestream: websocket: %w (%w)", os.ErrDeadlineExceeded, err)
	}
	return err
}

func (c *wsConn) Read(p []byte) (int, error) {
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

func newWSConn(c *websocket.Conn, limit int64) *wsConn {
	if limit <= 0 {
		limit = DefaultReadLimit
	}
	// NetConn's ctx bounds the conn's lifetime; the conn must live until
	// Close, which cancels NetConn's own derived contexts.
	nc := websocket.NetConn(context.Background(), c, websocket.MessageBinary)
	c.SetReadLimit(limit) // after NetConn, which disables the limit
	return &wsConn{Conn: nc, ws: c}
}

// abort closes the connection without the close handshake, which would
// wait up to 5 s for a peer already known to be dead (mux timeouts).
func (c *wsConn) abort() error { return c.ws.CloseNow() }

// Write sends p as binary messages of at most MaxMessageSize bytes.
func (c *wsConn) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), MaxMessageSize)]
		m, err := c.Conn.Write(chunk)
		n += m
		if err != nil {
			return n, deadlineErr(err, &c.writeDeadline)
		}
		p = p[len(chunk):]
	}
	return n, nil
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
