package webterm

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/hostgate/hostgate"
)

// hungHost serves terminals whose start never finishes, as a host that
// completed the SSH handshake but never confirms the session channel, pty
// or shell: Spawn waits for its context, and says why that ended on
// ended.
func hungHost(t *testing.T, cfg Config) (*httptest.Server, <-chan error) {
	ended := make(chan error, 1)
	cfg.Authorize = func(w http.ResponseWriter, r *http.Request, id string) (Caller, bool) {
		return Caller{ID: "tester", Name: "tester"}, true
	}
	cfg.Spawn = func(ctx context.Context, id, name string, argv []string, pty *hostgate.PTY) (hostgate.Process, func(), error) {
		<-ctx.Done()
		ended <- context.Cause(ctx)
		return nil, nil, ctx.Err()
	}
	h := Handler(cfg)
	mux := http.NewServeMux()
	mux.Handle("GET /v1/hosts/{id}/pty", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { srv.Close(); h.Close() })
	return srv, ended
}

func setStartTimeout(t *testing.T, d time.Duration) {
	old := startTimeout
	startTimeout = d
	t.Cleanup(func() { startTimeout = old })
}

// A host that never starts the shell: the page hears from the gateway
// while it waits (it took the silence for a lost connection after 20 s),
// then is told the host did not answer the terminal's start, and the
// start is given up.
func TestHungStartTellsThePage(t *testing.T) {
	ctx := testCtx(t)
	setStartTimeout(t, 300*time.Millisecond)
	srv, ended := hungHost(t, Config{Ping: 100 * time.Millisecond})
	ws := open(ctx, t, srv, "local", "", keepQuery())
	starting := false
	for {
		typ, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("the socket ended without the reason: %v", err)
		}
		var c control
		if typ != websocket.MessageText || json.Unmarshal(b, &c) != nil {
			t.Fatalf("got %v %q, want control messages", typ, b)
		}
		if c.Type == "starting" {
			starting = true
			continue
		}
		if c.Type != "error" || !strings.Contains(c.Message, "cannot start a terminal on local: the host did not answer the terminal's start") {
			t.Fatalf("got %+v, want the error that the host did not answer the start", c)
		}
		break
	}
	if !starting {
		t.Error("the page heard nothing from the gateway while the start waited")
	}
	select {
	case <-ended:
	case <-ctx.Done():
		t.Fatal("the start was not given up")
	}
}

// A page that goes while the host has not started its shell ends the
// start: the gateway does not wait on for the host until the token ends.
func TestHungStartEndsWithItsPage(t *testing.T) {
	ctx := testCtx(t)
	setStartTimeout(t, time.Hour)
	srv, ended := hungHost(t, Config{Ping: 100 * time.Millisecond})
	ws := open(ctx, t, srv, "local", "", keepQuery())
	_ = ws.CloseNow()
	select {
	case err := <-ended:
		if err == nil || !strings.Contains(err.Error(), "the page went away") {
			t.Errorf("start ended by %v, want the page gone", err)
		}
	case <-ctx.Done():
		t.Fatal("the start went on after its page went")
	}
}
