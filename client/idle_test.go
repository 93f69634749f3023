package client

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/goleak"
)

// idleStandIn is a gateway whose host box is offline: the client's API
// calls (the host's record, its certificate) answer, its SSH stream is
// refused.
func idleStandIn(t *testing.T) *httptest.Server { return offlineStandIn(t, nil, nil) }

// offlineStandIn is idleStandIn whose record's answer first waits for
// record (an error answers 500 with it) and whose certificate's first
// calls cert; nil: neither.
func offlineStandIn(t *testing.T, record func() error, cert func()) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/hosts", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"hosts":[{"id":"box","kind":"machine","hostKey":"SHA256:x"}]}`)
	})
	mux.HandleFunc("GET /v1/hosts/box", func(w http.ResponseWriter, r *http.Request) {
		if record != nil {
			if err := record(); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		_, _ = io.WriteString(w, `{"id":"box","kind":"machine","hostKey":"SHA256:x","connected":false}`)
	})
	mux.HandleFunc("POST /v1/hosts/box/certificates", func(w http.ResponseWriter, r *http.Request) {
		if cert != nil {
			cert()
		}
		_, _ = io.WriteString(w, `{"certificate":"x","validBefore":"2999-01-01T00:00:00Z","hostKey":"SHA256:x"}`)
	})
	mux.HandleFunc("GET /v1/hosts/box/ssh", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error":{"code":"host_offline","message":"host box: not connected to the gateway"}}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestDialLeavesNoConnections: the package's Dial makes a client the
// caller never sees, so it must not leave that client's keep-alive
// connections to the gateway (two goroutines each, until the transport's
// 90 s idle timeout) behind: a program whose tests check for leaked
// goroutines (goleak, as hostgate's own) found them after a failed Dial,
// with the gateway still running, and could release them only through
// http.DefaultTransport, which the client used.
func TestDialLeavesNoConnections(t *testing.T) {
	srv := idleStandIn(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	if _, err := Dial(t.Context(), srv.URL, "tok", "box"); !errors.Is(err, ErrOffline) {
		t.Fatalf("Dial of an offline host: %v, want ErrOffline", err)
	}
}

// TestCloseIdleConnections: a Client's API calls keep their connections
// to the gateway for the next call; CloseIdleConnections gives them back,
// and the client still works afterwards.
func TestCloseIdleConnections(t *testing.T) {
	srv := idleStandIn(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	c, err := New(srv.URL, "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := c.Hosts(t.Context()); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Dial(t.Context(), "box"); !errors.Is(err, ErrOffline) {
			t.Fatalf("Dial of an offline host: %v, want ErrOffline", err)
		}
		c.CloseIdleConnections()
	}
}
