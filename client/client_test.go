package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/sshlayer"
)

// A call that waits on work (exec) is bounded by the caller's ctx alone;
// one that answers at once by the API call timeout. A 30 s timeout on
// every call cut longer commands, and the gateway destroyed their
// execution.
func TestLongCallsNotCutByTheAPITimeout(t *testing.T) {
	defer func(d time.Duration) { apiCallTimeout = d }(apiCallTimeout)
	apiCallTimeout = 50 * time.Millisecond
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/exec") {
			_, _ = w.Write([]byte(`{"exitCode":0,"stdout":"done","stderr":"","durationMs":300}`))
			return
		}
		_, _ = w.Write([]byte(`[]`))
	}))
	defer srv.Close()
	c, err := New(srv.URL, "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := c.Exec(ctx, "e1", ExecRequest{Command: "sleep", TimeoutMs: 60000})
	if err != nil || res.Stdout != "done" {
		t.Fatalf("an exec longer than the API call timeout: %+v, %v", res, err)
	}
	if _, err := c.Hosts(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a listing slower than the API call timeout: %v, want its deadline", err)
	}
}

// The caller's HTTP client (a gateway behind a private CA) dials the
// WebSocket handshakes too, not only the API calls.
func TestHTTPClientDialsWebSockets(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := bytestream.Accept(w, r, nil)
		if err != nil {
			return
		}
		_ = conn.Close()
	}))
	defer srv.Close()
	hc := srv.Client()
	hc.Timeout = time.Minute
	c, err := New(srv.URL, "tok", &Options{HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := c.DialSSH(context.Background(), "h1")
	if err != nil {
		t.Fatalf("DialSSH through a private CA with the caller's client: %v", err)
	}
	_ = conn.Close()
}

// Only the gateway's host_offline is ErrOffline; another 503 (a full
// tunnel, a gateway stopping) says what it is.
func TestOnlyHostOfflineIsErrOffline(t *testing.T) {
	for code, offline := range map[string]bool{"host_offline": true, "too_many_streams": false, "shutting_down": false} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":"` + code + `","message":"no"}}`))
		}))
		c, err := New(srv.URL, "tok", nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.sshConnect(context.Background(), "h1", sshlayer.Auth{})
		srv.Close()
		if got := errors.Is(err, ErrOffline); got != offline {
			t.Errorf("503 %s: %v; ErrOffline %v, want %v", code, err, got, offline)
		}
	}
}

// A refused SSH stream says the gateway's error as the API's do, not its
// raw JSON body, and callers still find both the *APIError and the
// *bytestream.HandshakeError in it; a host_offline refusal is ErrOffline.
func TestRefusedSSHStreamSaysTheGatewaysError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":{"code":"host_offline","message":"host box is not connected to the gateway"}}`))
	}))
	defer srv.Close()
	c, err := New(srv.URL, "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	_, err = c.DialSSH(ctx, "box")
	want := "client: ssh stream to host box: gateway: host box is not connected to the gateway (503 host_offline)"
	if err == nil || err.Error() != want {
		t.Fatalf("DialSSH: %v\nwant %s", err, want)
	}
	var ae *APIError
	var he *bytestream.HandshakeError
	if !errors.As(err, &ae) || ae.Code != "host_offline" || !errors.As(err, &he) || he.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("DialSSH: %v; want an *APIError host_offline and a 503 *bytestream.HandshakeError in it", err)
	}
	_, err = c.sshConnect(ctx, "box", sshlayer.Auth{})
	if !errors.Is(err, ErrOffline) || strings.Contains(err.Error(), `{"error"`) {
		t.Fatalf("connect: %v; want ErrOffline, without the raw body", err)
	}
}
