package tlshint

import (
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
