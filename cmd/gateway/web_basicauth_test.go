package main

import (
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
)

// TestPreviewCookieCheckNotSkippedForBasicAuth: the session cookie's
// check on path-form previews (cookieUseAllowed) is skipped only for a
// bearer token, which a browser never sends by itself. Any Authorization
// header skipped it, and browsers do send one by themselves: Basic
// credentials they cached for the origin, or put in a WebSocket URL's
// userinfo (new WebSocket("ws://x:y@gw/…")). A page on another host's
// preview subdomain, same-site with the gateway, then reached every host's
// previews, WebSockets included, with a logged-in admin's session.
func TestPreviewCookieCheckNotSkippedForBasicAuth(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "state")
	base := startServe(t, dir, func(c *serveConfig) { c.PreviewDomain = "preview.test" })
	out, err := cli(t, ctx, "token", "create", "--state-dir", dir, "--role", "admin")
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
	var cookie string
	for _, c := range res.Cookies() {
		if c.Name == "hostgate_session" {
			cookie = c.Name + "=" + c.Value
		}
	}
	if cookie == "" {
		t.Fatalf("login: %d, no session cookie", res.StatusCode)
	}
	for _, tc := range []struct {
		name string
		hdr  map[string]string
	}{
		{"image", map[string]string{"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image"}},
		{"socket", map[string]string{"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "websocket", "Upgrade": "websocket", "Connection": "Upgrade",
			"Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Origin": "http://3000--evil.preview.test"}},
	} {
		for _, auth := range []string{"", "Basic eDp5"} {
			req, err := http.NewRequestWithContext(ctx, "GET", base+"/preview/h1/3000/", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Cookie", cookie)
			req.Header.Set("Accept", "application/json")
			for k, v := range tc.hdr {
				req.Header.Set(k, v)
			}
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			res, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), `"unauthorized"`) {
				t.Errorf("%s from another host's preview, Authorization %q: %d %s, want 401 unauthorized", tc.name, auth, res.StatusCode, b)
			}
		}
	}
}
