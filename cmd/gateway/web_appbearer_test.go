package main

import (
	"net/http"
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
	g := startPreviewGateway(t)
	// fetch("/api/items", {headers: {Authorization: …}}) from the
	// preview's own page.
	page := http.Header{
		"Authorization":  {"Bearer eyJhbGciOiJIUzI1NiJ9.app.jwt"},
		"Sec-Fetch-Site": {"same-origin"},
		"Sec-Fetch-Mode": {"cors"},
		"Sec-Fetch-Dest": {"empty"},
	}
	for i := range 30 {
		if code := g.status(g.sub, "/api/items", page); code != http.StatusUnauthorized {
			t.Fatalf("request %d from the preview's page with the app's bearer token: %d, want 401", i, code)
		}
	}
	if code := g.status(g.host, "/v1/hosts", g.bearer()); code != http.StatusOK {
		t.Errorf("the admin token, from the same address, after the page's requests: %d, want 200", code)
	}
	// An API client's bearer token on a preview still authorizes: the
	// admin's reaches h1, which is not connected (404), not 401.
	if code := g.status(g.sub, "/", g.bearer()); code != http.StatusNotFound {
		t.Errorf("a preview with the admin's bearer token from an API client: %d, want 404 (no host h1)", code)
	}
}
