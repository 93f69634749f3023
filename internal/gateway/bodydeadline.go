package gateway

import (
	"io"
	"net/http"
	"time"
)

// bodyTimeout is how long a request body may go without bytes (a
// variable for tests).
var bodyTimeout = 30 * time.Second

// boundBodies gives every request with a body bodyTimeout to send its
// first bytes, and then each next bytes while a handler reads it: an idle
// limit, so that a large body on a slow link (an exec's 8 MiB of stdin at
// 400 kbit/s) arrives whole.
//
// The server sets no ReadTimeout: it would cut hijacked WebSockets and
// long executions. Without a bound, a handler that answers without
// reading the body (a 401, a 404) leaves net/http to drain it before the
// answer goes out, and a client that trickles a body holds the connection
// for as long as it likes, with no token. The deadline is set on the
// connection here, before any handler: net/http clears it once a handler
// reads the body to its end (the background read it starts then), so a
// command that runs for an hour after its JSON arrived is not cut. A
// handler that streams a body (the preview proxy, an upload to a dev
// server) has the same idle limit, from the start of each of its reads.
// Past the deadline the drain fails and net/http answers and closes the
// connection.
func boundBodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
			rc := http.NewResponseController(w)
			_ = rc.SetReadDeadline(time.Now().Add(bodyTimeout))
			// On a copy of r: net/http drains the body it holds, not this
			// one, so a drain after an answer gets no extension.
			r = r.WithContext(r.Context())
			r.Body = &idleBody{ReadCloser: r.Body, rc: rc}
		}
		next.ServeHTTP(w, r)
	})
}

// idleBody gives each read bodyTimeout to bring bytes, from when it
// starts: the time a handler spends between reads is not the client's
// (the preview proxy reads the next bytes of an upload only once the dev
// server took the last ones, and one that paused longer than the bound
// cut the upload). Not once a read ended the body: net/http clears the
// deadline there for its background read, and one set again would cut
// the request later.
type idleBody struct {
	io.ReadCloser
	rc    *http.ResponseController
	ended bool
}

func (b *idleBody) Read(p []byte) (int, error) {
	if b.ended {
		return b.ReadCloser.Read(p)
	}
	_ = b.rc.SetReadDeadline(time.Now().Add(bodyTimeout))
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.ended = true
	}
	return n, err
}
