package main

import (
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
)

// A page on one host's preview can plant a hostgate_preview cookie for the
// whole preview domain (document.cookie with Domain=, which no proxy sees)
// and with a longer path, so that browsers send it first on every other
// preview. The gateway took the first cookie of that name only: the
// viewer's own, valid cookie for another host's preview was never looked
// at, the preview sent them to log in, the login set the same cookie
// again, and the browser went round until it gave up (too many
// redirects). Every hostgate_preview cookie is tried; a planted one grants
// nothing, being signed for no host and port of the viewer's.
func TestTossedPreviewCookieDoesNotLockOut(t *testing.T) {
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
	get := func(host, path string, cookies ...string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, "GET", base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		if host == "" {
			req.Header.Set("Authorization", "Bearer "+admin)
		}
		for _, c := range cookies {
			req.Header.Add("Cookie", c)
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		return res
	}

	// The viewer's own preview cookie for h1:3000, through the login flow.
	res := get("", "/preview-login?host=h1&port=3000&next=/app")
	loc, err := url.Parse(res.Header.Get("Location"))
	if res.StatusCode != http.StatusFound || err != nil || !strings.HasPrefix(loc.Host, "3000--h1.preview.test") {
		t.Fatalf("preview-login: %d, Location %q", res.StatusCode, res.Header.Get("Location"))
	}
	res = get(loc.Host, loc.RequestURI())
	var own string
	for _, c := range res.Cookies() {
		if c.Name == "hostgate_preview" {
			own = c.Name + "=" + c.Value
		}
	}
	if own == "" {
		t.Fatalf("ticket redeemed: %d, no preview cookie in %v", res.StatusCode, res.Header["Set-Cookie"])
	}
	// Refused: told to log in (401; a browser's navigation is sent to
	// the login instead). Let in, the request goes on to h1, which
	// answers whatever it does (here, no agent: not a 401).
	loggingIn := func(res *http.Response) bool {
		return res.StatusCode == http.StatusUnauthorized ||
			res.StatusCode == http.StatusFound && strings.Contains(res.Header.Get("Location"), "/preview-login")
	}
	if res := get(loc.Host, "/app", own); loggingIn(res) {
		t.Fatalf("the viewer's own cookie alone: refused (%d)", res.StatusCode)
	}
	// The planted cookie comes first, as a browser sends the one of the
	// longer path first; in the same header or in two.
	planted := "hostgate_preview=planted-by-another-preview"
	if res := get(loc.Host, "/app", planted+"; "+own); loggingIn(res) {
		t.Fatalf("a planted preview cookie before the viewer's: refused (%d), where the viewer's own cookie lets them in", res.StatusCode)
	}
	if res := get(loc.Host, "/app", planted, own); loggingIn(res) {
		t.Fatalf("a planted preview cookie in a header before the viewer's: refused (%d)", res.StatusCode)
	}
	// Planted cookies alone still let nobody in.
	if res := get(loc.Host, "/app", planted); !loggingIn(res) {
		t.Fatalf("a planted preview cookie alone: %d, want refused", res.StatusCode)
	}
}
