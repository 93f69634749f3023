package main

import (
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
)

// TestPublicURLSchemeAnyCase: a URL's scheme is case-insensitive, and
// validate takes --public-url HTTPS://… as https; the gateway behind its
// TLS proxy then sets a Secure __Host- session cookie, as it does for
// https://…. It compared the scheme as given, and set a cookie browsers
// send over plain HTTP too.
func TestPublicURLSchemeAnyCase(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "state")
	c, err := parseServeFlags("serve", stdio{out: io.Discard, err: io.Discard}, []string{"--public-url", "HTTPS://gw.test"}, serveConfig{Listen: "127.0.0.1:0", StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	base := startServe(t, dir, func(s *serveConfig) { s.PublicURL = c.PublicURL })
	admin := lastLine(must(cli(t, ctx, "token", "create", "--role", "admin", "--state-dir", dir)))
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/login", strings.NewReader(url.Values{"token": {admin}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "gw.test"
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if sc := res.Header.Get("Set-Cookie"); res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(sc, "__Host-hostgate_session=") || !strings.Contains(sc, "; Secure") {
		t.Errorf("login with --public-url HTTPS://gw.test: %d, Set-Cookie %q, want a Secure __Host-hostgate_session", res.StatusCode, sc)
	}
}
