package bytestream

import (
	"fmt"
	"net"
	"unicode/utf8"

	"github.com/coder/websocket"
)

// CloseError is what a Read of a WebSocket stream returns once the peer
// closed it with a status other than normal closure or going away (which
// read as io.EOF): the peer's reason for ending the stream, such as the
// gateway's for a relay whose host was lost. It unwraps to
// coder/websocket's error, so websocket.CloseStatus reads it too.
type CloseError struct {
	Code   int    // the close frame's status code (RFC 6455 section 7.4)
	Reason string // the peer's reason, printable (see textcut.Printable); may be empty
	err    error
}

func (e *CloseError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("bytestream: websocket closed by the peer with status %d", e.Code)
	}
	return fmt.Sprintf("bytestream: websocket closed by the peer: %s (status %d)", e.Reason, e.Code)
}

func (e *CloseError) Unwrap() error { return e.err }

// Close status codes a peer may give CloseWithReason (RFC 6455 section
// 7.4.1, and the IANA registry for 1012-1014).
const (
	StatusGoingAway       = int(websocket.StatusGoingAway)       // 1001: the peer is stopping (reads as io.EOF; PeerClose says so)
	StatusPolicyViolation = int(websocket.StatusPolicyViolation) // 1008: e.g. the caller's token was revoked
	StatusServiceRestart  = int(websocket.StatusServiceRestart)  // 1012: the server is stopping
	StatusBadGateway      = int(websocket.StatusBadGateway)      // 1014: what the server relays to is gone
)

// maxCloseReason is the longest reason a close frame carries: a control
// frame's 125 bytes less the status code's 2.
const maxCloseReason = 123

// CloseWithReason closes c, a stream of Accept or DialWebSocket, with close
// status code and reason instead of a normal closure, so that the peer's
// reads fail with a *CloseError saying why rather than end as if the
// stream had simply ended. A reason longer than 123 bytes is cut. Any
// other conn is closed plainly.
func CloseWithReason(c net.Conn, code int, reason string) error {
	wc, ok := c.(*wsConn)
	if !ok {
		return c.Close()
	}
	if len(reason) > maxCloseReason {
		reason = reason[:maxCloseReason]
		for !utf8.ValidString(reason) {
			reason = reason[:len(reason)-1]
		}
	}
	if wc.wb != nil {
		wc.wb.drain()
	}
	return wc.Conn.(*msgConn).closeWith(websocket.StatusCode(code), reason)
}

// PeerClose is the close frame the peer ended c, a stream of Accept or
// DialWebSocket, with, once a Read of c has met it; nil before that, for
// a stream that ended without one (a peer killed, a dropped network) and
// for any other conn. Reads return io.EOF for a normal closure or going
// away (1000, 1001), which does not tell a peer that said it stops from
// one that closed plainly, nor its reason.
func PeerClose(c net.Conn) *CloseError {
	if wc, ok := c.(*wsConn); ok {
		return wc.Conn.(*msgConn).closed.Load()
	}
	return nil
}
