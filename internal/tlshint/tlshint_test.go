package tlshint

import (
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
)

func TestWrapNamesTheFix(t *testing.T) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	resp, err := http.Get(srv.URL) // the test server's CA is no system root
	if err == nil {
		resp.Body.Close()
		t.Fatal("a TLS server signed by no trusted CA answered")
	}
	got := Wrap(err)
	if !strings.Contains(got.Error(), fix(runtime.GOOS)) || !strings.Contains(got.Error(), "unknown authority") {
		t.Errorf("Wrap(%v) = %v, want the error and how to trust a private CA", err, got)
	}
	if f := fix("linux"); !strings.Contains(f, "SSL_CERT_FILE") {
		t.Errorf("fix(linux) = %q, want SSL_CERT_FILE", f)
	}
	if !errors.Is(got, err) {
		t.Errorf("Wrap's error does not wrap the original")
	}
	other := errors.New("connection refused")
	if Wrap(other) != other || Wrap(nil) != nil {
		t.Error("Wrap changed an error not of an unknown authority")
	}
	for _, goos := range []string{"darwin", "windows"} {
		if f := fix(goos); strings.Contains(f, "SSL_CERT_FILE") {
			t.Errorf("fix(%s) = %q: Go on %s does not read SSL_CERT_FILE", goos, f, goos)
		}
	}
}

// An https:// URL naming a port that answers without TLS (the gateway's
// own plain --listen) says to use http:// or the TLS proxy's URL, where it
// said only "tls: first record does not look like a TLS handshake" (found
// by the audit30 audit).
func TestWrapNamesPlainPort(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	// As bytestream dials a WebSocket: its own TLS handshake, whose
	// error net/http would have turned into a string.
	conn, err := tls.Dial("tcp", srv.Listener.Addr().String(), &tls.Config{ServerName: "gw.example.com"})
	if err == nil {
		conn.Close()
		t.Fatal("a plain HTTP server finished a TLS handshake")
	}
	got := Wrap(err)
	if !strings.Contains(got.Error(), "that port does not speak TLS: use an http:// URL") || !errors.Is(got, err) {
		t.Errorf("Wrap(%v) = %v, want the error and to use http:// or the proxy", err, got)
	}
}
