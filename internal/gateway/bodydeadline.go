package gateway

import (
	"net/http"
	"time"
)

// bodyTimeout bounds the arrival of a request body (a variable for tests).
var bodyTimeout = 30 * time.Second

// boundBodies gives every request with a body bodyTimeout to send it.
//
// The server sets no ReadTimeout: it would cut hijacked WebSockets and
// long executions. Without a bound, a handler that answers without
// reading the body (a 401, a 404) leaves net/http to drain it before the
// answer goes out, and a client that trickles a body holds the connection
// for as long as it likes, with no token. The deadline is set on the
// connection here, before any handler: net/http clears it once a handler
// reads the body to its end (the background read it starts then), so a
// command that runs for an hour after its JSON arrived is not cut, and a
// handler that streams a body for longer (the preview proxy) clears it
// itself. Past the deadline the drain fails and net/http answers and
// closes the connection.
func boundBodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(bodyTimeout))
		}
		next.ServeHTTP(w, r)
	})
}
