package main

import (
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"testing"
)

// TestPlantedSessionCookieOnPreviewsCountsNoFailures: the gateway's
// session cookie is host-only on the gateway's own name, so one a
// subdomain preview receives was planted there, by a page on any preview
// (document.cookie with the preview domain as Domain). Each preview
// request looked its value up, and counted the miss against the viewer's
// address: after the limit's 20, every request from that address, valid
// tokens too, was refused 429 for the window. The previews do not take a
// session cookie; a bearer token they still do.
func TestPlantedSessionCookieOnPreviewsCountsNoFailures(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "state")
	base := startServe(t, dir, func(c *serveConfig) { c.PreviewDomain = "preview.test" })
	out, err := cli(t, ctx, "token", "create", "--state-dir", dir, "--role", "admin")
	if err != nil {
		t.Fatal(err)
	}
	admin := lastLine(out)
	u, _ := url.Parse(base)
	get := func(host, path, cookie, token string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, "GET", base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Accept", "application/json")
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	sub := "3000--h1.preview.test:" + u.Port()
	for i := range 30 {
		if code := get(sub, "/", "hostgate_session=planted", ""); code != http.StatusUnauthorized {
			t.Fatalf("request %d with a planted session cookie: %d, want 401", i, code)
		}
	}
	// The admin's own token, from the same address, still works.
	if code := get(u.Host, "/v1/hosts", "", admin); code != http.StatusOK {
		t.Errorf("the admin token, from the same address, after a planted cookie's requests: %d, want 200", code)
	}
	// A bearer token on a preview still authorizes: an admin's reaches h1,
	// which is not connected (404), not 401.
	if code := get(sub, "/", "hostgate_session=planted", admin); code != http.StatusNotFound {
		t.Errorf("a preview with the admin's bearer token: %d, want 404 (no host h1)", code)
	}
}
