package e2e

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// formLogin posts the login form with token, as the login page does, and
// returns the session cookie it sets.
func formLogin(t *testing.T, g *gw, token string) *http.Cookie {
	t.Helper()
	res := formPost(t, g, "/login", url.Values{"token": {token}, "next": {"/"}}, nil)
	for _, c := range res.Cookies() {
		if c.Name == "hostgate_session" && c.MaxAge > 0 {
			return c
		}
	}
	t.Fatalf("login: %d %q, no session cookie in %v", res.StatusCode, res.Header.Get("Location"), res.Cookies())
	return nil
}

// formPost posts form to path, as the gateway's own pages do, with cookie
// when set, and returns the answer unfollowed.
func formPost(t *testing.T, g *gw, path string, form url.Values, cookie *http.Cookie) *http.Response {
	t.Helper()
	req, err := http.NewRequest("POST", g.url+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if cookie != nil {
		req.AddCookie(cookie)
	}
	return noFollowDo(t, req)
}

func noFollowDo(t *testing.T, req *http.Request) *http.Response {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 30 * time.Second}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}

// withCookie is GET path with cookie, unfollowed; host, when set, is the
// Host header (a preview subdomain).
func withCookie(t *testing.T, g *gw, path, host string, cookie *http.Cookie) *http.Response {
	t.Helper()
	req, err := http.NewRequest("GET", g.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	req.AddCookie(cookie)
	return noFollowDo(t, req)
}

// openTerminal opens /v1/hosts/alpha/pty as the browser does, with the
// session cookie, and waits until its shell answers.
func openTerminal(t *testing.T, ctx context.Context, g *gw, cookie *http.Cookie) *websocket.Conn {
	t.Helper()
	hdr := http.Header{}
	hdr.Set("Cookie", cookie.String())
	return dialTerminal(t, ctx, g, "alpha", hdr)
}

// dialTerminal opens host id's web terminal with hdr's credentials and
// waits until its shell answers: the answer, not the echo of what was
// typed, proves the shell runs.
func dialTerminal(t *testing.T, ctx context.Context, g *gw, id string, hdr http.Header) *websocket.Conn {
	t.Helper()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(g.url, "http")+"/v1/hosts/"+id+"/pty", &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.CloseNow() })
	if err := ws.Write(ctx, websocket.MessageBinary, []byte("echo $((6*7))\n")); err != nil {
		t.Fatal(err)
	}
	if err := readUntil(ctx, ws, "42"); err != nil {
		t.Fatalf("terminal: %v", err)
	}
	return ws
}

// terminalEnds waits until the terminal says its token was revoked and
// closes.
func terminalEnds(t *testing.T, ctx context.Context, ws *websocket.Conn) {
	t.Helper()
	if err := readUntil(ctx, ws, "revoked"); err != nil {
		t.Fatalf("terminal after its session ended: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		if _, _, err := ws.Read(ctx); err != nil {
			if ctx.Err() != nil {
				t.Fatal("the terminal of an ended session stays open")
			}
			return
		}
	}
}

// TestLogoutEndsLoginSession: the login form gives the browser a session
// token of its own, not the token typed; logging out revokes it on the
// gateway. The cookie's value, copied before the logout, then gets 401
// from the API and the login page from the UI, the web terminal it opened
// is closed and the preview cookie it led to stops, at once: the token
// recheck is an hour away. The token typed at login still works.
func TestLogoutEndsLoginSession(t *testing.T) {
	g := startGateway(t, "", "--preview-domain", "preview.test", "--token-recheck", "1h")
	g.startAgent("alpha", "")
	port := devServer(t)
	ctx := testCtx(t, 2*time.Minute)
	client := g.token("client", "alpha")

	cookie := formLogin(t, g, client)
	if cookie.Value == client || !cookie.HttpOnly {
		t.Fatalf("session cookie %v: want HttpOnly and not the token typed", cookie)
	}
	if res := withCookie(t, g, "/v1/hosts", "", cookie); res.StatusCode != http.StatusOK {
		t.Fatalf("/v1/hosts with the session cookie: %d", res.StatusCode)
	}
	ws := openTerminal(t, ctx, g, cookie)

	// A subdomain preview's own cookie, minted from the session.
	res := withCookie(t, g, "/preview-login?host=alpha&port="+strconv.Itoa(port)+"&next=/", "", cookie)
	loc, err := url.Parse(res.Header.Get("Location"))
	if res.StatusCode != http.StatusFound || err != nil {
		t.Fatalf("preview-login: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	req, _ := http.NewRequest("GET", g.url+loc.RequestURI(), nil)
	req.Host = loc.Host
	var preview *http.Cookie
	for _, c := range noFollowDo(t, req).Cookies() {
		if c.Name == "hostgate_preview" {
			preview = c
		}
	}
	if preview == nil {
		t.Fatal("no preview cookie")
	}
	if res := withCookie(t, g, "/", loc.Host, preview); res.StatusCode != http.StatusOK {
		t.Fatalf("the preview with its cookie: %d", res.StatusCode)
	}

	// The session's own secret, lifted from the cookie, logs nobody in.
	res = formPost(t, g, "/login", url.Values{"token": {cookie.Value}}, nil)
	if len(res.Cookies()) != 0 || !strings.Contains(res.Header.Get("Location"), "error=session_token") {
		t.Fatalf("login with the session's secret: %d %q %v", res.StatusCode, res.Header.Get("Location"), res.Cookies())
	}

	res = formPost(t, g, "/logout", nil, cookie)
	if res.StatusCode != http.StatusSeeOther || len(res.Cookies()) != 1 || res.Cookies()[0].MaxAge >= 0 {
		t.Fatalf("logout: %d %v", res.StatusCode, res.Cookies())
	}
	if res := withCookie(t, g, "/v1/hosts", "", cookie); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/v1/hosts with the logged-out cookie: %d, want 401", res.StatusCode)
	}
	if res := withCookie(t, g, "/", "", cookie); res.StatusCode != http.StatusFound || !strings.HasPrefix(res.Header.Get("Location"), "/login") {
		t.Fatalf("the hosts page with the logged-out cookie: %d %q, want the login page", res.StatusCode, res.Header.Get("Location"))
	}
	if res := withCookie(t, g, "/", loc.Host, preview); res.StatusCode == http.StatusOK {
		t.Fatal("the preview cookie of the logged-out session still opens the preview")
	}
	terminalEnds(t, ctx, ws)
	if st, body := g.api("GET", "/v1/hosts", client, nil); st != http.StatusOK {
		t.Fatalf("the token typed at login, after the logout: %d %s", st, body)
	}
}

// TestRevokedTokenEndsLoginSession: `gateway token revoke` of the token
// someone logged in with ends their browser session too: its web
// terminal is cut at the recheck and its cookie gets 401.
func TestRevokedTokenEndsLoginSession(t *testing.T) {
	g := startGateway(t, "", "--token-recheck", "200ms")
	g.startAgent("alpha", "")
	ctx := testCtx(t, 2*time.Minute)
	out, err := exec.Command(bin.gateway, "token", "create", "--role", "client", "--host", "alpha", "--name", "doomed", "--state-dir", g.stateDir).Output()
	if err != nil {
		t.Fatal(err)
	}
	m := tokenIDRE.FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("no token id in %q", out)
	}
	cookie := formLogin(t, g, lastLine(string(out)))
	ws := openTerminal(t, ctx, g, cookie)

	list, err := exec.Command(bin.gateway, "token", "list", "--sessions", "--state-dir", g.stateDir).Output()
	if err != nil || !strings.Contains(string(list), "doomed/session-") {
		t.Fatalf("token list --sessions: %v\n%s", err, list)
	}
	if out, err := exec.Command(bin.gateway, "token", "revoke", m[1], "--state-dir", g.stateDir).CombinedOutput(); err != nil || !strings.Contains(string(out), "login session") {
		t.Fatalf("revoke: %v: %s", err, out)
	}
	terminalEnds(t, ctx, ws)
	if res := withCookie(t, g, "/v1/hosts", "", cookie); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/v1/hosts with a session cookie of the revoked token: %d, want 401", res.StatusCode)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// TestTerminalNamesTheBrowser: the web terminal's shell, whose SSH client
// is the gateway, is told the browser's address as its caller, as a
// command through `gateway proxy` is told ssh's.
func TestTerminalNamesTheBrowser(t *testing.T) {
	g := startGateway(t, "")
	g.startAgent("alpha", "")
	ctx := testCtx(t, 2*time.Minute)
	ws := openTerminal(t, ctx, g, formLogin(t, g, g.token("client", "alpha")))
	if err := ws.Write(ctx, websocket.MessageBinary, []byte(`echo "c=[$SSH_CONNECTION]"`+"\n")); err != nil {
		t.Fatal(err)
	}
	if err := readUntil(ctx, ws, "c=[127.0.0.1 "); err != nil {
		t.Fatalf("terminal: %v, want SSH_CONNECTION naming the browser's 127.0.0.1", err)
	}
}
