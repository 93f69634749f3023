package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
)

// TestPreviewTokenForOtherHosts: an API client whose token is good but
// does not reach the preview's host gets 403 forbidden saying so and how
// to get one that does, in both forms, where it got 401 "Log in to see
// this preview" as if its token were missing or bad. Browsers keep their
// pages (the login page saying host_forbidden), and missing or bad
// credentials their 401.
func TestPreviewTokenForOtherHosts(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "state")
	base := startServe(t, dir, func(c *serveConfig) { c.PreviewDomain = "preview.test" })
	token := func(args ...string) string {
		out, err := cli(t, ctx, append([]string{"token", "create", "--state-dir", dir}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		return lastLine(out)
	}
	other, agent := token("--role", "client", "--host", "h2"), token("--role", "agent", "--host", "h1")
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	t.Cleanup(client.CloseIdleConnections)
	get := func(host, path string, hdr map[string]string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, "GET", base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	u, _ := url.Parse(base)
	sub := "3000--h1.preview.test:" + u.Port()
	for _, tc := range []struct {
		name, host, token, want string
	}{
		{"client token for h2, path form", "", other, "Host h1 is not among the hosts this token reaches. A client token reaches only the hosts it was created with; an admin makes one for h1 with gateway token create --role client --host h1."},
		{"client token for h2, subdomain", sub, other, "Host h1 is not among the hosts this token reaches."},
		{"agent token of h1", "", agent, "An agent's token cannot reach host h1. It is the token an agent connects with"},
	} {
		path := "/preview/h1/3000/"
		if tc.host != "" {
			path = "/"
		}
		res, body := get(tc.host, path, map[string]string{"Authorization": "Bearer " + tc.token, "Accept": "application/json"})
		var e struct {
			Error struct{ Code, Message string }
		}
		_ = json.Unmarshal([]byte(body), &e)
		if res.StatusCode != http.StatusForbidden || e.Error.Code != "forbidden" || !strings.HasPrefix(e.Error.Message, tc.want) {
			t.Errorf("%s: %d %s, want 403 forbidden %q", tc.name, res.StatusCode, body, tc.want)
		}
	}
	for _, tc := range []struct {
		name string
		hdr  map[string]string
	}{
		{"no token", map[string]string{"Accept": "application/json"}},
		{"a bad token", map[string]string{"Accept": "application/json", "Authorization": "Bearer hg_nope"}},
	} {
		if res, body := get("", "/preview/h1/3000/", tc.hdr); res.StatusCode != http.StatusUnauthorized || !strings.Contains(body, `"unauthorized"`) {
			t.Errorf("%s: %d %s, want 401 unauthorized", tc.name, res.StatusCode, body)
		}
	}

	// A browser logged in with the token for h2 keeps the login page that
	// says why.
	res, err := client.PostForm(base+"/login", url.Values{"token": {other}, "next": {"/"}})
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
	res, _ = get("", "/preview/h1/3000/", map[string]string{"Cookie": cookie, "Accept": "text/html", "Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"})
	if loc := res.Header.Get("Location"); res.StatusCode != http.StatusFound || !strings.HasPrefix(loc, "/login?error=host_forbidden&") {
		t.Errorf("a browser logged in for h2: %d, Location %q, want the login page saying host_forbidden", res.StatusCode, loc)
	}
}
