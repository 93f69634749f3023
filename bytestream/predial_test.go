package bytestream

import (
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// predialServer is a WebSocket echo server that counts the connections
// it accepted and those it saw closed; tls serves it over TLS, whose CA
// the returned options trust.
type predialServer struct {
	url            string
	opened, closed atomic.Int32
	opts           WebSocketOptions
}

func newPredialServer(t *testing.T, tls bool) *predialServer {
	t.Helper()
	ps := &predialServer{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := Accept(w, r, nil)
		if err != nil {
			return
		}
		_, _ = io.Copy(c, c)
		_ = c.Close()
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			ps.opened.Add(1)
		case http.StateClosed:
			ps.closed.Add(1)
		}
	}
	if tls {
		srv.StartTLS()
		ps.opts.RootCAs = x509.NewCertPool()
		ps.opts.RootCAs.AddCert(srv.Certificate())
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	ps.url = srv.URL
	return ps
}

// echo checks that c carries a message there and back.
func echo(t *testing.T, c net.Conn) {
	t.Helper()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "ping" {
		t.Fatalf("echo: %q, %v", b, err)
	}
}

// waitCount waits for n to reach want, for a state the server sees after
// the client's call returned.
func waitCount(t *testing.T, what string, n *atomic.Int32, want int32) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); n.Load() != want; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d, want %d", what, n.Load(), want)
		}
	}
}

// A predialed connection carries the WebSocket that is given it: the
// server accepts one connection for both, over TLS too.
func TestPredialCarriesTheHandshake(t *testing.T) {
	for _, tls := range []bool{false, true} {
		t.Run(map[bool]string{false: "ws", true: "wss"}[tls], func(t *testing.T) {
			ps := newPredialServer(t, tls)
			p, err := PredialWebSocket(testCtx(t), ps.url, &ps.opts)
			if err != nil {
				t.Fatal(err)
			}
			waitCount(t, "connections accepted after the predial", &ps.opened, 1)
			opts := ps.opts
			opts.Predialed = p
			c, err := WebSocket(testCtx(t), ps.url, &opts)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			echo(t, c)
			if err := p.Close(); err != nil {
				t.Fatalf("Close of a taken predial: %v", err)
			}
			echo(t, c) // the WebSocket's now, not closed by it
			if n := ps.opened.Load(); n != 1 {
				t.Fatalf("the server accepted %d connections, want 1: the dial dialed again", n)
			}
		})
	}
}

// A predial no dial takes is closed by Close; one too old for the server
// to still wait for its request (predialMaxAge), or to another address,
// is not used: the dial makes its own.
func TestPredialNotTaken(t *testing.T) {
	ps := newPredialServer(t, false)
	p, err := PredialWebSocket(testCtx(t), ps.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitCount(t, "connections accepted", &ps.opened, 1)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	waitCount(t, "connections closed after an unused predial's Close", &ps.closed, 1)

	stale, err := PredialWebSocket(testCtx(t), ps.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stale.Close()
	stale.at = stale.at.Add(-predialMaxAge - time.Second)
	c, err := WebSocket(testCtx(t), ps.url, &WebSocketOptions{Predialed: stale})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	echo(t, c)
	waitCount(t, "connections accepted with a stale predial", &ps.opened, 3)
	waitCount(t, "connections closed (the stale one)", &ps.closed, 2)

	other := newPredialServer(t, false)
	elsewhere, err := PredialWebSocket(testCtx(t), other.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := WebSocket(testCtx(t), ps.url, &WebSocketOptions{Predialed: elsewhere})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	echo(t, c2)
	if n := ps.opened.Load(); n != 4 {
		t.Fatalf("%d connections accepted, want 4: a dial took another server's predial", n)
	}
	if err := elsewhere.Close(); err != nil {
		t.Fatal(err)
	}
	waitCount(t, "the other server's connections closed", &other.closed, 1)
}

// With a caller's HTTPClient the dial is that client's: the predial dials
// nothing.
func TestPredialWithHTTPClientDialsNothing(t *testing.T) {
	ps := newPredialServer(t, false)
	p, err := PredialWebSocket(testCtx(t), ps.url, &WebSocketOptions{HTTPClient: http.DefaultClient})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := PredialWebSocket(testCtx(t), "ftp://example.com", nil); err == nil {
		t.Fatal("a predial of an ftp:// URL succeeded")
	}
	if n := ps.opened.Load(); n != 0 {
		t.Fatalf("%d connections accepted, want none", n)
	}
}
