package main

import (
	"net/http"
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
	g := startPreviewGateway(t)
	// A page's own top-level navigation, as a browser sends it, with the
	// cookie it planted.
	nav := http.Header{
		"Cookie":         {"hostgate_session=planted"},
		"Accept":         {"text/html"},
		"Sec-Fetch-Mode": {"navigate"},
		"Sec-Fetch-Dest": {"document"},
		"Sec-Fetch-Site": {"same-origin"},
	}
	for i := range 30 {
		// The subdomain preview's own page at /preview/h1/3000/: not
		// logged in there, so the preview's login redirect.
		if code := g.status(g.sub, "/preview/h1/3000/", nav); code != http.StatusFound {
			t.Fatalf("navigation %d to /preview/… on a subdomain preview with a planted session cookie: %d, want 302 (the preview's login)", i, code)
		}
	}
	if code := g.status(g.host, "/v1/hosts", g.bearer()); code != http.StatusOK {
		t.Errorf("the admin token, from the same address, after a planted cookie's navigations: %d, want 200", code)
	}
}
