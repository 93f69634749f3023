package main

import (
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
)

// TestPathFormNavigationGoesToSubdomain: a browser logged in on the
// gateway that opens a path-form preview goes on to the subdomain form
// through the login flow, path and query kept. In the path form the page
// runs sandboxed in an opaque origin, and none of its own requests
// (module scripts, styles, images) carry the session: a Vite page opened
// at /preview/{host}/{port}/ stayed blank (found playing a user of a real
// Vite dev server in Chromium). API clients, requests that are not
// top-level navigations and hosts no subdomain reaches keep the path form.
func TestPathFormNavigationGoesToSubdomain(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "state")
	base := startServe(t, dir, func(c *serveConfig) { c.PreviewDomain = "preview.test" })
	out, err := cli(t, ctx, "token", "create", "--role", "admin", "--state-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	admin := lastLine(out)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	t.Cleanup(client.CloseIdleConnections)

	res, err := client.PostForm(base+"/login", url.Values{"token": {admin}, "next": {"/"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	var session *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == "hostgate_session" {
			session = c
		}
	}
	if session == nil {
		t.Fatalf("login: %d, no session cookie in %v", res.StatusCode, res.Cookies())
	}

	navigate := map[string]string{"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}
	get := func(path string, hdr map[string]string, cookie bool) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, "GET", base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		if cookie {
			req.AddCookie(session)
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}

	res = get("/preview/h1/3000/app/page?tab=2", navigate, true)
	want := "/preview-login?host=h1&port=3000&next=" + url.QueryEscape("/app/page?tab=2")
	if loc := res.Header.Get("Location"); res.StatusCode != http.StatusFound || loc != want {
		t.Fatalf("path-form navigation: %d, Location %q, want 302 to %q", res.StatusCode, loc, want)
	}
	res = get(want, navigate, true)
	if loc := res.Header.Get("Location"); res.StatusCode != http.StatusFound ||
		!strings.HasPrefix(loc, "http://3000--h1.preview.test:") || !strings.Contains(loc, "&next="+url.QueryEscape("/app/page?tab=2")) {
		t.Fatalf("preview-login after the path form: %d, Location %q, want the subdomain's /.hostgate/auth with next=/app/page?tab=2", res.StatusCode, loc)
	}

	for _, tc := range []struct {
		name   string
		path   string
		hdr    map[string]string
		cookie bool
	}{
		{"bearer token", "/preview/h1/3000/", map[string]string{"Authorization": "Bearer " + admin, "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}, false},
		{"no fetch metadata (curl)", "/preview/h1/3000/", nil, true},
		{"the page's own fetch", "/preview/h1/3000/api", map[string]string{"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors", "Sec-Fetch-Dest": "empty"}, true},
		{"a frame", "/preview/h1/3000/", map[string]string{"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "iframe"}, true},
		{"an id no DNS label carries", "/preview/h_1/3000/", navigate, true},
		{"not logged in", "/preview/h1/3000/", navigate, false},
	} {
		res := get(tc.path, tc.hdr, tc.cookie)
		if loc := res.Header.Get("Location"); strings.HasPrefix(loc, "/preview-login") {
			t.Errorf("%s: %d, Location %q: want the path form served, not sent to the subdomain", tc.name, res.StatusCode, loc)
		}
	}
}

// The login page's form may lead to every preview subdomain, on any port;
// a domain that a CSP source cannot carry adds nothing.
func TestPreviewFormAction(t *testing.T) {
	for domain, want := range map[string]string{
		"":                   "",
		"localhost":          "*.localhost:*",
		"Preview.Example.":   "*.preview.example:*",
		"preview.test; x *":  "",
		"preview.test\tfoo":  "",
		"xn--bcher-kva.test": "*.xn--bcher-kva.test:*",
	} {
		if got := previewFormAction(domain); got != want {
			t.Errorf("previewFormAction(%q) = %q, want %q", domain, got, want)
		}
	}
}
