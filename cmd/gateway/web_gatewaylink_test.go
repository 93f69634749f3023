package main

import (
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestPreviewLinksReachGatewayListeningEverywhere: a gateway listening on
// every address (--listen :8080) without --public-url sends a subdomain
// preview's viewer to log in, and links its pages back to the host list,
// at the address the viewer reached it by. They led to http://[::]:PORT,
// which a browser takes for its own machine, or refuses: a viewer on
// another machine could neither log in to a subdomain preview nor get
// back to the gateway from one.
func TestPreviewLinksReachGatewayListeningEverywhere(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "state")
	base := startServe(t, dir, func(c *serveConfig) { c.Listen = ":0"; c.PreviewDomain = "preview.test" })
	_, port, err := net.SplitHostPort(strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := cli(t, ctx, "token", "create", "--state-dir", dir, "--role", "admin")
	if err != nil {
		t.Fatal(err)
	}
	gw := "http://" + net.JoinHostPort("127.0.0.1", port)
	get := func(h http.Header) (*http.Response, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, gw+"/app", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "3000--h1.preview.test:" + port
		req.Header = h
		res, err := noRedirectClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	res, _ := get(http.Header{"Accept": {"text/html"}})
	if loc := res.Header.Get("Location"); !strings.HasPrefix(loc, gw+"/preview-login?") {
		t.Errorf("a viewer not logged in is sent to log in at %q (%d), want %s/preview-login", loc, res.StatusCode, gw)
	}
	// h1 is no host: the page says so and links back to the host list.
	res, body := get(http.Header{"Accept": {"text/html"}, "Authorization": {"Bearer " + lastLine(out)}})
	if res.StatusCode != http.StatusNotFound || !strings.Contains(body, `href="`+gw+`/"`) {
		t.Errorf("the page for no such host (%d) links back to the host list at %s/ in no href:\n%s", res.StatusCode, gw, body)
	}
}
