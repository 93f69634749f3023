package gateway

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// lockedBuffer is a log destination written by the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A handler's panic, which net/http recovers and reports on the server's
// error log, is a bug the gateway's operator must hear of: it was logged
// at WARN with every other line of that log, below an alert on ERROR.
// A failed TLS handshake, a caller's doing, stays at DEBUG.
func TestServerPanicLoggedAsError(t *testing.T) {
	e := newEnv(t, nil)
	var logs lockedBuffer
	e.srv.logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.srv.Mux().HandleFunc("GET /test-panic", func(http.ResponseWriter, *http.Request) {
		panic("a handler's bug")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.srv.Serve(ln) }()
	tr := &http.Transport{}
	req, err := http.NewRequestWithContext(e.ctx, "GET", "http://"+ln.Addr().String()+"/test-panic", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := tr.RoundTrip(req); err == nil {
		_ = res.Body.Close()
		t.Errorf("a panicking handler answered %d, want the connection closed", res.StatusCode)
	}
	tr.CloseIdleConnections()
	// The panic is logged before the connection closes, which ended the
	// round trip; Close waits for nothing more of it.
	_ = e.srv.Close()
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve: %v", err)
	}
	var line string
	for l := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(l, "panic serving") {
			line = l
			break
		}
	}
	if !strings.Contains(line, "level=ERROR") || !strings.Contains(line, "a handler's bug") {
		t.Errorf("the panic logged as %q, want at ERROR with its value; log:\n%s", line, logs.String())
	}
}
