package tlshint

import (
	"crypto/tls"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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

// CAFile trusts the file's certificates beside the system's, and a file
// that holds none is an error naming it, not a pool that adds nothing.
func TestCAFile(t *testing.T) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	dir := t.TempDir()
	good := filepath.Join(dir, "ca.pem")
	// A key before the certificate, as a combined file has it: skipped.
	pemData := append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("x")}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})...)
	if err := os.WriteFile(good, pemData, 0o600); err != nil {
		t.Fatal(err)
	}
	pool, err := CAFile(good)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer hc.CloseIdleConnections()
	res, err := hc.Get(srv.URL)
	if err != nil {
		t.Fatalf("a server whose certificate is in --ca-file: %v", err)
	}
	res.Body.Close()

	empty := filepath.Join(dir, "key.pem")
	if err := os.WriteFile(empty, []byte("-----BEGIN PRIVATE KEY-----\neA==\n-----END PRIVATE KEY-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := CAFile(empty); err == nil || !strings.Contains(err.Error(), empty) || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("a file without a certificate: %v", err)
	}
	if _, err := CAFile(filepath.Join(dir, "missing.pem")); err == nil || !strings.Contains(err.Error(), "--ca-file") {
		t.Errorf("a missing file: %v", err)
	}
}
