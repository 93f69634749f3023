package main

import (
	"context"
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
	g := startPreviewGateway(t)
	planted := http.Header{"Cookie": {"hostgate_session=planted"}}
	for i := range 30 {
		if code := g.status(g.sub, "/", planted); code != http.StatusUnauthorized {
			t.Fatalf("request %d with a planted session cookie: %d, want 401", i, code)
		}
	}
	// The admin's own token, from the same address, still works.
	if code := g.status(g.host, "/v1/hosts", g.bearer()); code != http.StatusOK {
		t.Errorf("the admin token, from the same address, after a planted cookie's requests: %d, want 200", code)
	}
	// A bearer token on a preview still authorizes: an admin's reaches h1,
	// which is not connected (404), not 401.
	both := g.bearer()
	both.Set("Cookie", "hostgate_session=planted")
	if code := g.status(g.sub, "/", both); code != http.StatusNotFound {
		t.Errorf("a preview with the admin's bearer token: %d, want 404 (no host h1)", code)
	}
}

// previewGateway is a gateway serving previews under preview.test, for
// the tests of what a preview's page can make the viewer's address count
// as failed authentications (20 lock it out, valid tokens too).
type previewGateway struct {
	t                *testing.T
	ctx              context.Context
	base             string
	host, sub, admin string // the gateway's host, h1's port-3000 preview host, an admin token
}

func startPreviewGateway(t *testing.T) *previewGateway {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "state")
	base := startServe(t, dir, func(c *serveConfig) { c.PreviewDomain = "preview.test" })
	out, err := cli(t, ctx, "token", "create", "--state-dir", dir, "--role", "admin")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(base)
	return &previewGateway{t: t, ctx: ctx, base: base, host: u.Host, sub: "3000--h1.preview.test:" + u.Port(), admin: lastLine(out)}
}

// bearer is the headers of a request with the admin token.
func (g *previewGateway) bearer() http.Header {
	return http.Header{"Authorization": {"Bearer " + g.admin}}
}

// status sends GET path to host with h (JSON wanted unless h says what
// it accepts) and returns the answer's status, following no redirect.
func (g *previewGateway) status(host, path string, h http.Header) int {
	g.t.Helper()
	req, err := http.NewRequestWithContext(g.ctx, "GET", g.base+path, nil)
	if err != nil {
		g.t.Fatal(err)
	}
	req.Host = host
	req.Header = h.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json")
	}
	res, err := noRedirectClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

var noRedirectClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// TestPathFormPreviewSaysTwoSessions: a path-form preview loaded with two
// different session cookies (a page under a parent domain planted one)
// sends the browser to the login page saying so, as the UI's pages do,
// and keeps the cookies. It said nothing: the person logged in, which
// leaves the planted cookie, and was led back to the same login page.
func TestPathFormPreviewSaysTwoSessions(t *testing.T) {
	g := startPreviewGateway(t)
	h := http.Header{
		"Cookie":         {"hostgate_session=" + g.admin + "; hostgate_session=planted"},
		"Accept":         {"text/html"},
		"Sec-Fetch-Site": {"none"},
		"Sec-Fetch-Mode": {"navigate"},
		"Sec-Fetch-Dest": {"document"},
	}
	req, err := http.NewRequestWithContext(g.ctx, "GET", g.base+"/preview/h1/3000/app", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	res, err := noRedirectClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	loc, err := url.Parse(res.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusFound || loc.Path != "/login" || loc.Query().Get("error") != "two_sessions" || loc.Query().Get("next") != "/preview/h1/3000/app" || len(res.Cookies()) != 0 {
		t.Errorf("path-form preview with two session cookies: %d to %q, Set-Cookie %q; want the login page saying two_sessions, leading back, the cookies kept", res.StatusCode, loc, res.Header.Values("Set-Cookie"))
	}
}
