package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coder/websocket"
)

// serveBehindTLSProxy starts a gateway set up by opts behind a TLS proxy
// that sends it the Host host makes of the client's, and returns the proxy
// and an admin token.
func serveBehindTLSProxy(t *testing.T, ctx context.Context, host func(string) string, opts func(*serveConfig)) (*httptest.Server, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "state")
	base := startServe(t, dir, opts)
	enrollHost(t, ctx, dir, "h1")
	out, err := cli(t, ctx, "token", "create", "--role", "admin", "--state-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	back, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewTLSServer(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(back)
		pr.Out.Host = host(pr.In.Host)
	}})
	t.Cleanup(front.Close)
	return front, lastLine(out)
}

// TestPreviewBehindTLSProxy deploys as the README does: the gateway serves
// plain HTTP behind a TLS-terminating proxy that passes Host, with
// --public-url https://… and a preview domain. The subdomain login sends
// the browser to https://, the preview cookie is Secure, and a share's URL
// is https://. All three took their scheme from the request's TLS, which
// behind the proxy is nil: the ticket went to http:// on the proxy's TLS
// port, and the cookie was never Secure.
func TestPreviewBehindTLSProxy(t *testing.T) {
	ctx := testCtx(t)
	front, admin := serveBehindTLSProxy(t, ctx, func(in string) string { return in }, func(c *serveConfig) {
		c.PublicURL = "https://gw.test"
		c.PreviewDomain = "preview.test"
	})
	client := front.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	t.Cleanup(client.CloseIdleConnections)
	do := func(method, host, path, body string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, front.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Authorization", "Bearer "+admin)
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}

	res, _ := do("GET", "gw.test", "/preview-login?host=h1&port=3000&next=/app", "")
	loc := res.Header.Get("Location")
	if res.StatusCode != http.StatusFound || !strings.HasPrefix(loc, "https://3000--h1.preview.test/.hostgate/auth?ticket=") {
		t.Fatalf("preview-login: %d, Location %q, want https://3000--h1.preview.test/.hostgate/auth?ticket=…", res.StatusCode, loc)
	}
	u, err := url.Parse(loc)
	if err != nil {
		t.Fatal(err)
	}
	res, _ = do("GET", u.Host, u.RequestURI(), "")
	var cookie *http.Cookie
	for _, c := range res.Cookies() {
		// Behind https a __Host- cookie, which no page of another
		// preview can set for the whole preview domain.
		if c.Name == "__Host-hostgate_preview" && c.Path == "/" && c.Domain == "" {
			cookie = c
		}
	}
	if res.StatusCode != http.StatusSeeOther || cookie == nil {
		t.Fatalf("ticket redeemed: %d, cookies %v", res.StatusCode, res.Cookies())
	}
	if !cookie.Secure {
		t.Errorf("preview cookie %q: want Secure behind https", res.Header.Get("Set-Cookie"))
	}

	// The session cookie is a __Host- one too.
	req, err := http.NewRequestWithContext(ctx, "POST", front.URL+"/login", strings.NewReader(url.Values{"token": {admin}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "gw.test"
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if sc := res.Header.Get("Set-Cookie"); res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(sc, "__Host-hostgate_session=") ||
		!strings.Contains(sc, "; Path=/;") || !strings.Contains(sc, "; Secure") || strings.Contains(sc, "Domain") {
		t.Errorf("login behind https: %d, Set-Cookie %q, want a Secure __Host-hostgate_session for Path=/", res.StatusCode, sc)
	}

	res, body := do("POST", "gw.test", "/v1/hosts/h1/shares", `{"port":3000,"ttlSeconds":60}`)
	var share struct{ URL, PathURL string }
	if err := json.Unmarshal([]byte(body), &share); err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("share: %d %s", res.StatusCode, body)
	}
	if share.URL != "https://3000--h1.preview.test/" || share.PathURL != "https://gw.test/preview/h1/3000/" {
		t.Errorf("share URLs %q and %q, want https://3000--h1.preview.test/ and https://gw.test/preview/h1/3000/", share.URL, share.PathURL)
	}
}

// TestPreviewOriginPort: a subdomain preview's origin (the login ticket's
// target, a share's URL) is on the port the gateway was reached on. Behind
// a proxy that passes Host without its port (nginx's `proxy_set_header
// Host $host`, found by the README audit with --public-url
// https://localhost:25443), that is --public-url's port: the ticket went
// to https://3000--h1.preview.test/, port 443, where nothing listened.
func TestPreviewOriginPort(t *testing.T) {
	for _, tc := range []struct{ public, host, want string }{
		{"https://gw.test:8443", "gw.test", "https://3000--h1.preview.test:8443"},
		{"https://gw.test:8443", "gw.test:8443", "https://3000--h1.preview.test:8443"},
		{"https://gw.test", "gw.test", "https://3000--h1.preview.test"},
		{"http://127.0.0.1:8080", "127.0.0.1:8080", "http://3000--h1.preview.test:8080"},
		{"https://gw.test", "gw.test:9443", "https://3000--h1.preview.test:9443"},
	} {
		r := httptest.NewRequest("GET", "http://"+tc.host+"/preview-login", nil)
		if got := previewOriginFor(tc.public, r, "h1", 3000, "preview.test"); got != tc.want {
			t.Errorf("public URL %s, Host %s: preview origin %q, want %q", tc.public, tc.host, got, tc.want)
		}
	}
}

// TestTerminalBehindPortDroppingProxy: the web terminal opens behind a
// proxy that passes Host without its port (nginx's `proxy_set_header Host
// $host`, which the README gives) on a port of its own: the page's Origin,
// https://gw.test:8443, names a port the request's Host does not, and the
// socket was refused as cross-origin (403) while the rest of the UI worked.
// Another origin stays refused.
func TestTerminalBehindPortDroppingProxy(t *testing.T) {
	ctx := testCtx(t)
	// $host: the name, not the port.
	front, admin := serveBehindTLSProxy(t, ctx, func(string) string { return "gw.test" }, func(c *serveConfig) {
		c.PublicURL = "https://gw.test:8443"
	})
	client := front.Client()
	t.Cleanup(client.CloseIdleConnections)
	open := func(origin string) (*websocket.Conn, *http.Response, error) {
		h := http.Header{}
		h.Set("Origin", origin)
		h.Set("Authorization", "Bearer "+admin)
		return websocket.Dial(ctx, "wss"+strings.TrimPrefix(front.URL, "https")+"/v1/hosts/h1/pty", &websocket.DialOptions{HTTPClient: client, HTTPHeader: h})
	}
	ws, res, err := open("https://gw.test:8443")
	if err != nil {
		status := 0
		if res != nil {
			status = res.StatusCode
		}
		t.Fatalf("terminal socket from the gateway's own page, Origin https://gw.test:8443: %v (status %d), want it open", err, status)
	}
	defer ws.CloseNow()
	// No host h1: the terminal says so, which proves the socket got past
	// the origin check to the handler.
	if typ, b, err := ws.Read(ctx); err != nil || typ != websocket.MessageText || !strings.Contains(string(b), "cannot start a terminal on h1") {
		t.Fatalf("first message: %v %q %v, want the spawn error", typ, b, err)
	}
	if _, res, err := open("https://evil.test:8443"); err == nil || res == nil || res.StatusCode != http.StatusForbidden {
		t.Fatalf("terminal socket from https://evil.test:8443: %v, want 403", err)
	}
}

// TestPublicOriginPatterns: the pattern matches --public-url's host and
// port literally, an IPv6 literal's brackets included, and nothing else;
// the scheme's default port as browsers send it, without (--public-url
// https://gw.test:443's page sends Origin https://gw.test, and was
// refused its terminal behind a proxy passing Host with another port).
func TestPublicOriginPatterns(t *testing.T) {
	for _, tc := range []struct {
		public, origin string
		want           bool
	}{
		{"https://gw.test:8443", "gw.test:8443", true},
		{"https://gw.test:8443", "gw.test", false},
		{"https://GW.test", "gw.test", true},
		{"http://[::1]:8080", "[::1]:8080", true},
		{"http://[::1]:8080", ":", false},
		// A default port is not in a browser's Origin.
		{"https://gw.test:443", "gw.test", true},
		{"http://[::1]:80", "[::1]", true},
		{"https://gw.test:80", "gw.test", false},
	} {
		ps := publicOriginPatterns(tc.public)
		if len(ps) != 1 {
			t.Fatalf("%s: patterns %q", tc.public, ps)
		}
		got, err := path.Match(strings.ToLower(ps[0]), strings.ToLower(tc.origin))
		if err != nil || got != tc.want {
			t.Errorf("public URL %s, pattern %q, origin host %s: match %v %v, want %v", tc.public, ps[0], tc.origin, got, err, tc.want)
		}
	}
	if ps := publicOriginPatterns(""); ps != nil {
		t.Errorf("no public URL: patterns %q, want none", ps)
	}
}

// TestPathPreviewSocketBehindPortDroppingProxy: behind a proxy that passes
// Host without its port (the README's nginx block, `proxy_set_header Host
// $host`) on a port other than 443, a path-form preview's WebSocket from
// the gateway's own page (Origin https://gw.test:8443, the session cookie)
// gets past the cookie's origin check, which compared the Origin with the
// request's Host, gw.test, and refused it as another site's: a dev
// server's hot reload never connected. Another origin stays refused.
func TestPathPreviewSocketBehindPortDroppingProxy(t *testing.T) {
	ctx := testCtx(t)
	front, admin := serveBehindTLSProxy(t, ctx, func(string) string { return "gw.test" }, func(c *serveConfig) {
		c.PublicURL = "https://gw.test:8443"
	})
	client := front.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	t.Cleanup(client.CloseIdleConnections)
	req, err := http.NewRequestWithContext(ctx, "POST", front.URL+"/login", strings.NewReader(url.Values{"token": {admin}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	var session *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == "__Host-hostgate_session" {
			session = c
		}
	}
	if session == nil {
		t.Fatalf("login: %d, cookies %v", res.StatusCode, res.Cookies())
	}
	open := func(origin string) (int, string) {
		h := http.Header{}
		h.Set("Origin", origin)
		h.Set("Sec-Fetch-Site", "same-origin")
		h.Set("Sec-Fetch-Mode", "websocket")
		h.Set("Cookie", session.Name+"="+session.Value)
		ws, res, err := websocket.Dial(ctx, "wss"+strings.TrimPrefix(front.URL, "https")+"/preview/h1/3000/ws", &websocket.DialOptions{HTTPClient: client, HTTPHeader: h})
		if err == nil {
			ws.CloseNow()
			return http.StatusSwitchingProtocols, ""
		}
		if res == nil {
			t.Fatalf("preview socket from %s: %v", origin, err)
		}
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	// h1 has no agent: the answer that says so comes past the session
	// cookie's check.
	if code, body := open("https://gw.test:8443"); code != http.StatusServiceUnavailable || !strings.Contains(body, "host_offline") {
		t.Errorf("preview socket from the gateway's own page, Origin https://gw.test:8443: %d %q, want 503 host_offline, past the session's check", code, body)
	}
	if code, body := open("https://evil.test:8443"); code != http.StatusUnauthorized && code != http.StatusForbidden && code != http.StatusFound && code != http.StatusSeeOther {
		t.Errorf("preview socket from https://evil.test:8443: %d %q, want refused", code, body)
	}
}

// TestOldBrowserPostBehindPortDroppingProxy: a browser that sends no fetch
// metadata (Safari before 16.4, Firefox before 90) is checked by its
// Origin against cross-origin POSTs, and behind a proxy that passes Host
// without its port (the README's nginx block) on a port other than 443
// the gateway's own page's Origin, https://gw.test:8443, is not the Host,
// gw.test: its login form was refused 403, and so was a POST into a
// path-form preview with its session. --public-url's origin is the
// gateway's own; another stays refused.
func TestOldBrowserPostBehindPortDroppingProxy(t *testing.T) {
	ctx := testCtx(t)
	front, admin := serveBehindTLSProxy(t, ctx, func(string) string { return "gw.test" }, func(c *serveConfig) {
		c.PublicURL = "https://gw.test:8443"
	})
	client := front.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	t.Cleanup(client.CloseIdleConnections)
	post := func(path, origin, cookie, body string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, "POST", front.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", origin)
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	login := url.Values{"token": {admin}}.Encode()
	if res, body := post("/login", "https://evil.test:8443", "", login); res.StatusCode != http.StatusForbidden {
		t.Errorf("login posted from https://evil.test:8443: %d %q, want 403", res.StatusCode, body)
	}
	res, body := post("/login", "https://gw.test:8443", "", login)
	var session string
	for _, c := range res.Cookies() {
		if c.Name == "__Host-hostgate_session" {
			session = c.Name + "=" + c.Value
		}
	}
	if res.StatusCode != http.StatusSeeOther || session == "" {
		t.Fatalf("login posted from the gateway's page, Origin https://gw.test:8443: %d %q, want 303 and a session", res.StatusCode, body)
	}
	// h1 has no agent: the answer that says so comes past the session
	// cookie's checks.
	if res, body := post("/preview/h1/3000/api", "https://gw.test:8443", session, "x=1"); res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "host_offline") {
		t.Errorf("preview POST from the gateway's page: %d %q, want 503 host_offline", res.StatusCode, body)
	}
	if res, body := post("/preview/h1/3000/api", "https://evil.test:8443", session, "x=1"); res.StatusCode == http.StatusServiceUnavailable {
		t.Errorf("preview POST from https://evil.test:8443: %d %q, want refused", res.StatusCode, body)
	}
}
