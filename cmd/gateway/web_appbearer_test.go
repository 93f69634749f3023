package main

import (
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"testing"
)

// TestAppBearerOnSubdomainPreviewCountsNoFailures: a page on a subdomain
// preview that sends an Authorization: Bearer header of its own (an app's
// JWT for its API, or a hostile page's junk, same-origin there so no
// preflight stops it) had each request's header looked up as a gateway
// token, and each miss counted against the viewer's address: after the
// limit's 20, every request from it to the gateway, valid tokens too, was
// refused 429 for the window. A browser's request (fetch metadata) is not
// authorized by a bearer token on a subdomain preview; an API client's
// still is.
func TestAppBearerOnSubdomainPreviewCountsNoFailures(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "state")
	base := startServe(t, dir, func(c *serveConfig) { c.PreviewDomain = "preview.test" })
	out, err := cli(t, ctx, "token", "create", "--state-dir", dir, "--role", "admin")
	if err != nil {
		t.Fatal(err)
	}
	admin := lastLine(out)
	u, _ := url.Parse(base)
	get := func(host, path, token string, page bool) int {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, "GET", base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Accept", "application/json")
		if page {
			// fetch("/api/items", {headers: {Authorization: …}}) from the
			// preview's own page.
			req.Header.Set("Sec-Fetch-Site", "same-origin")
			req.Header.Set("Sec-Fetch-Mode", "cors")
			req.Header.Set("Sec-Fetch-Dest", "empty")
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
		if code := get(sub, "/api/items", "eyJhbGciOiJIUzI1NiJ9.app.jwt", true); code != http.StatusUnauthorized {
			t.Fatalf("request %d from the preview's page with the app's bearer token: %d, want 401", i, code)
		}
	}
	if code := get(u.Host, "/v1/hosts", admin, false); code != http.StatusOK {
		t.Errorf("the admin token, from the same address, after the page's requests: %d, want 200", code)
	}
	// An API client's bearer token on a preview still authorizes: the
	// admin's reaches h1, which is not connected (404), not 401.
	if code := get(sub, "/", admin, false); code != http.StatusNotFound {
		t.Errorf("a preview with the admin's bearer token from an API client: %d, want 404 (no host h1)", code)
	}
}
