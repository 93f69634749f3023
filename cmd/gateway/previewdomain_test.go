package main

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestPreviewDomainAnyCase: DNS names are case-insensitive and may be
// written fully qualified; --preview-domain Preview.Test or preview.test.
// serves previews as preview.test does. The preview proxy normalized the
// domain, the gateway's own checks did not: a browser not logged in on a
// preview's subdomain was sent to /login on that subdomain (the previewed
// app's path, not the gateway's preview login), and the login's link
// named the subdomain with capitals or a trailing dot.
func TestPreviewDomainAnyCase(t *testing.T) {
	ctx := testCtx(t)
	for _, domain := range []string{"preview.test", "Preview.Test", "preview.test."} {
		dir := filepath.Join(t.TempDir(), "state")
		c, err := parseServeFlags("serve", stdio{out: io.Discard, err: io.Discard}, []string{"--preview-domain", domain}, serveConfig{Listen: "127.0.0.1:0", StateDir: dir})
		if err != nil {
			t.Fatalf("--preview-domain %q: %v", domain, err)
		}
		base := startServe(t, dir, func(s *serveConfig) { s.PreviewDomain = c.PreviewDomain })
		enrollHost(t, ctx, dir, "h1")
		admin := lastLine(must(cli(t, ctx, "token", "create", "--role", "admin", "--state-dir", dir)))
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		get := func(host, path string, auth bool) *http.Response {
			t.Helper()
			req, err := http.NewRequestWithContext(ctx, "GET", base+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = host
			req.Header.Set("Accept", "text/html")
			req.Header.Set("Sec-Fetch-Site", "none")
			req.Header.Set("Sec-Fetch-Mode", "navigate")
			req.Header.Set("Sec-Fetch-Dest", "document")
			if auth {
				req.Header.Set("Authorization", "Bearer "+admin)
			}
			res, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			return res
		}
		res := get("3000--h1.preview.test", "/app", false)
		if loc := res.Header.Get("Location"); !strings.Contains(loc, "/preview-login?host=h1&port=3000") {
			t.Errorf("--preview-domain %q: a subdomain not logged in: %d, Location %q, want the gateway's /preview-login", domain, res.StatusCode, loc)
		}
		res = get("gw.test", "/preview-login?host=h1&port=3000&next=/app", true)
		if loc := res.Header.Get("Location"); !strings.HasPrefix(loc, "http://3000--h1.preview.test/") && !strings.HasPrefix(loc, "http://3000--h1.preview.test:") {
			t.Errorf("--preview-domain %q: preview-login: %d, Location %q, want http://3000--h1.preview.test…", domain, res.StatusCode, loc)
		}
	}
}

func must(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}
