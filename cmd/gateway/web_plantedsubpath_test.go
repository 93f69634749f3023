package main

import (
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"testing"
)

// TestPlantedSessionCookieOnSubdomainPreviewPathCountsNoFailures: a
// subdomain preview's request whose path starts with /preview/ reached the
// path form's handler first, which looked the session cookie up to send a
// logged-in viewer on to the subdomain form. On a preview origin that
// cookie was planted (a page there sets it for its own origin), so a page
// that navigated itself to /preview/… twenty times locked the viewer's
// address out: every request from it, valid tokens too, refused 429.
func TestPlantedSessionCookieOnSubdomainPreviewPathCountsNoFailures(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "state")
	base := startServe(t, dir, func(c *serveConfig) { c.PreviewDomain = "preview.test" })
	out, err := cli(t, ctx, "token", "create", "--state-dir", dir, "--role", "admin")
	if err != nil {
		t.Fatal(err)
	}
	admin := lastLine(out)
	u, _ := url.Parse(base)
	get := func(host, path, cookie, token string, nav bool) int {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, "GET", base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		if nav {
			// A page's own top-level navigation, as a browser sends it.
			req.Header.Set("Accept", "text/html")
			req.Header.Set("Sec-Fetch-Mode", "navigate")
			req.Header.Set("Sec-Fetch-Dest", "document")
			req.Header.Set("Sec-Fetch-Site", "same-origin")
		} else {
			req.Header.Set("Accept", "application/json")
		}
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := noRedirectClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	sub := "3000--h1.preview.test:" + u.Port()
	for i := range 30 {
		// The subdomain preview's own page at /preview/h1/3000/: not
		// logged in there, so the preview's login redirect.
		if code := get(sub, "/preview/h1/3000/", "hostgate_session=planted", "", true); code != http.StatusFound {
			t.Fatalf("navigation %d to /preview/… on a subdomain preview with a planted session cookie: %d, want 302 (the preview's login)", i, code)
		}
	}
	if code := get(u.Host, "/v1/hosts", "", admin, false); code != http.StatusOK {
		t.Errorf("the admin token, from the same address, after a planted cookie's navigations: %d, want 200", code)
	}
}

var noRedirectClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
