package gateway

import (
	"errors"
	"io"
	"net/http"
)

// closeUnreadBodies answers a request whose body the handler left unread
// (a 401 before the body, a 404) with Connection: close. Without it
// net/http reads up to 256 KiB of that body before it sends the answer,
// with no deadline but the connection's: a caller with no token who sent
// headers and a trickle of body held a connection and a goroutine open
// indefinitely, and got no answer. Closing is what the server does anyway
// for a body too large to read.
func closeUnreadBodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 || r.Header.Get("Upgrade") != "" {
			next.ServeHTTP(w, r)
			return
		}
		b := &eofBody{ReadCloser: r.Body}
		r.Body = b
		next.ServeHTTP(&closeUnread{ResponseWriter: w, body: b}, r)
	})
}

// eofBody records whether its reader reached the end.
type eofBody struct {
	io.ReadCloser
	eof bool
}

func (b *eofBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.eof = true
	}
	return n, err
}

// closeUnread sets Connection: close on a response that starts before its
// request's body was read to the end.
type closeUnread struct {
	http.ResponseWriter
	body    *eofBody
	started bool
}

func (c *closeUnread) start() {
	if !c.started {
		c.started = true
		if !c.body.eof {
			c.ResponseWriter.Header().Set("Connection", "close")
		}
	}
}

func (c *closeUnread) WriteHeader(code int) {
	if code >= 200 {
		c.start()
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *closeUnread) Write(p []byte) (int, error) {
	c.start()
	return c.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection's writer
// (flushes, deadlines).
func (c *closeUnread) Unwrap() http.ResponseWriter { return c.ResponseWriter }
