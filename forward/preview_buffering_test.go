package forward

import (
	"io"
	"net/http"
	"strconv"
	"testing"
)

// TestPreviewStreamsSayNoBuffering: nginx buffers a proxied response by
// default, so a preview's event stream (a dev server's live reload)
// reached the browser all at once when it ended (audit42). A response
// that streams, an event stream or one of unknown length, carries
// X-Accel-Buffering: no, which nginx obeys; a whole file does not, and a
// dev server's own value is kept.
func TestPreviewStreamsSayNoBuffering(t *testing.T) {
	ctx := testCtx(t)
	e := newPreviewEnv(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if ct := q.Get("type"); ct != "" {
			w.Header().Set("Content-Type", ct)
		}
		if v := q.Get("accel"); v != "" {
			w.Header().Set("X-Accel-Buffering", v)
		}
		body := "data: one\n\n"
		if q.Get("length") != "" {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		}
		if s, _ := strconv.Atoi(q.Get("status")); s != 0 {
			w.WriteHeader(s)
		}
		_, _ = io.WriteString(w, body)
		w.(http.Flusher).Flush() // no Content-Length of Go's own
	}), nil)
	for _, c := range []struct {
		method, query, want string
	}{
		{"GET", "type=text/event-stream", "no"},
		{"GET", "type=text/event-stream%3B+charset=utf-8&length=1", "no"},
		{"GET", "type=+Text/Event-Stream+%3B+charset=utf-8&length=1", "no"}, // as mime.ParseMediaType reads it
		{"GET", "type=text/event-streams&length=1", ""},
		{"GET", "type=application/x-ndjson", "no"},                       // chunked: of unknown length
		{"GET", "type=text/event-stream&accel=yes", "yes"},               // the dev server's choice
		{"GET", "type=text/html&length=1", ""},                           // a whole file
		{"GET", "type=text/event-stream&status=204", ""},                 // no body
		{"HEAD", "type=application/x-ndjson", ""},                        // no body
		{"GET", "type=application/x-ndjson&status=500", "no"},            // an error page streamed
		{"GET", "type=application/octet-stream&accel=no&length=1", "no"}, // kept
	} {
		for _, form := range []string{"path", "subdomain"} {
			req := e.subReq(t, ctx, c.method, "/x?"+c.query, nil)
			if form == "path" {
				req, _ = http.NewRequestWithContext(ctx, c.method, e.pathURL("/x?"+c.query), nil)
			}
			resp, _ := do(t, req)
			if got := resp.Header.Get("X-Accel-Buffering"); got != c.want || len(resp.Header.Values("X-Accel-Buffering")) > 1 {
				t.Errorf("%s %s (%s form): X-Accel-Buffering %q, want %q", c.method, c.query, form, resp.Header.Values("X-Accel-Buffering"), c.want)
			}
		}
	}
}
