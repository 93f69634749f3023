package main

import (
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hostgate/hostgate/internal/gateway"
)

// TestStaleSessionCookieIsCleared: a browser whose session cookie the
// gateway no longer honours (logged out elsewhere, `gateway dev` restarted
// with fresh state) is sent to the login page with the cookie cleared, so
// reloading its terminal tabs does not use up its address's budget of
// failed authentications: each load counted one or two, and after ten the
// login that followed was refused as rate-limited.
func TestStaleSessionCookieIsCleared(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "state")
	base := startServe(t, dir)
	admin := tokenMaker(t, ctx, dir)("--role", "admin")

	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(base)
	jar.SetCookies(u, []*http.Cookie{{Name: gateway.SessionCookie, Value: "the-session-of-a-gateway-before-its-restart", Path: "/", HttpOnly: true}})
	browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(req *http.Request) *http.Response {
		t.Helper()
		res, err := browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	for i := range 15 {
		for _, p := range []string{"/hosts/box/terminal", "/"} {
			req, _ := http.NewRequestWithContext(ctx, "GET", base+p, nil)
			req.Header.Set("Sec-Fetch-Mode", "navigate")
			res := do(req)
			if res.StatusCode != http.StatusFound || !strings.HasPrefix(res.Header.Get("Location"), "/login?") {
				t.Fatalf("load %d of %s: %d to %q, want the login page", i, p, res.StatusCode, res.Header.Get("Location"))
			}
			if i > 0 {
				continue
			}
			var cleared bool
			for _, c := range res.Cookies() {
				if c.Name == gateway.SessionCookie && c.MaxAge < 0 && c.Path == "/" && c.Domain == "" && c.HttpOnly && c.SameSite == http.SameSiteLaxMode {
					cleared = true
				}
			}
			if p == "/hosts/box/terminal" && !cleared {
				t.Errorf("the redirect of the stale session's cookie does not clear it: Set-Cookie %q", res.Header.Values("Set-Cookie"))
			}
		}
	}
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/login", strings.NewReader(url.Values{"token": {admin}, "next": {"/hosts/box/terminal"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	res := do(req)
	if loc := res.Header.Get("Location"); res.StatusCode != http.StatusSeeOther || loc != "/hosts/box/terminal" {
		t.Fatalf("login after 30 page loads with a stale cookie: %d to %q, want 303 to the terminal", res.StatusCode, loc)
	}
}

// TestStaleSessionCookieClearedByMe: a terminal page asks GET /v1/me
// after its socket fails, so after a gateway restart every open tab asks
// it with a session cookie the gateway no longer honours. Each ask
// counted a failed authentication and left the cookie, so twenty tabs
// had the login that followed refused as rate-limited. The 401 clears
// the cookie as the login set it; a stale bearer token is the client's
// to drop, and gets no Set-Cookie.
func TestStaleSessionCookieClearedByMe(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "state")
	base := startServe(t, dir)
	admin := tokenMaker(t, ctx, dir)("--role", "admin")

	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/me", nil)
	req.Header.Set("Authorization", "Bearer the-token-of-a-gateway-before-its-restart")
	req.AddCookie(&http.Cookie{Name: gateway.SessionCookie, Value: "a-session-of-a-gateway-before-its-restart"})
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if sc := res.Header.Values("Set-Cookie"); res.StatusCode != http.StatusUnauthorized || len(sc) != 0 {
		t.Errorf("/v1/me with a stale bearer token: %d, Set-Cookie %q; want 401 leaving the cookie, which did not authenticate", res.StatusCode, sc)
	}

	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(base)
	jar.SetCookies(u, []*http.Cookie{{Name: gateway.SessionCookie, Value: "the-session-of-a-gateway-before-its-restart", Path: "/", HttpOnly: true}})
	browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for i := range 25 {
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/me", nil)
		req.Header.Set("Accept", "application/json")
		res, err := browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("tab %d's /v1/me: %d, want 401, which the terminal page takes for an ended login", i, res.StatusCode)
		}
		if i > 0 {
			continue
		}
		var cleared bool
		for _, c := range res.Cookies() {
			if c.Name == gateway.SessionCookie && c.MaxAge < 0 && c.Path == "/" && c.Domain == "" && c.HttpOnly && c.SameSite == http.SameSiteLaxMode {
				cleared = true
			}
		}
		if !cleared {
			t.Errorf("the 401 of /v1/me to a stale session cookie does not clear it: Set-Cookie %q", res.Header.Values("Set-Cookie"))
		}
	}
	req, _ = http.NewRequestWithContext(ctx, "POST", base+"/login", strings.NewReader(url.Values{"token": {admin}, "next": {"/hosts/box/terminal"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	res, err = browser.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if loc := res.Header.Get("Location"); res.StatusCode != http.StatusSeeOther || loc != "/hosts/box/terminal" {
		t.Fatalf("login after 25 tabs asked /v1/me with a stale cookie: %d to %q, want 303 to the terminal", res.StatusCode, loc)
	}
}

// TestRateLimitedPageSaysSo: a page loaded from an address the rate limit
// refuses goes to the login page saying so, and for how long; it said the
// login had ended, and the login that followed was refused too.
func TestRateLimitedPageSaysSo(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "state")
	base := startServe(t, dir)
	admin := tokenMaker(t, ctx, dir)("--role", "admin")
	for range 21 {
		apiDo(t, ctx, base, "GET", "/v1/me", "a-mistyped-token", "")
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/hosts/box/terminal", nil)
	req.AddCookie(&http.Cookie{Name: gateway.SessionCookie, Value: admin})
	browser := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := browser.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	loc, err := url.Parse(res.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	q := loc.Query()
	retry, _ := strconv.Atoi(q.Get("retry"))
	if res.StatusCode != http.StatusFound || loc.Path != "/login" || q.Get("error") != "rate_limited" || retry < 1 || retry > 60 || len(res.Cookies()) != 0 {
		t.Errorf("terminal page from a rate-limited address: %d to %q, Set-Cookie %q; want the login page saying rate_limited with retry=1..60, the cookie kept", res.StatusCode, loc, res.Header.Values("Set-Cookie"))
	}
}

// TestStaleSessionCookieClearedByEveryRoute: every route's 401 to a
// session cookie the gateway no longer honours clears it, as /v1/me's
// does: the terminal socket (on the HTTP answer, before any upgrade)
// and /v1/hosts (the hosts page's list). Only /v1/me cleared it, so
// after a gateway restart the tabs reconnecting their terminals each
// counted a failure with the cookie left in place, and the login that
// followed was refused as rate-limited.
func TestStaleSessionCookieClearedByEveryRoute(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "state")
	base := startServe(t, dir)
	admin := tokenMaker(t, ctx, dir)("--role", "admin")

	for _, route := range []string{"/v1/hosts/box/pty", "/v1/hosts"} {
		jar, err := cookiejar.New(nil)
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(base)
		jar.SetCookies(u, []*http.Cookie{{Name: gateway.SessionCookie, Value: "the-session-of-a-gateway-before-its-restart", Path: "/", HttpOnly: true}})
		browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		for i := range 25 {
			req, _ := http.NewRequestWithContext(ctx, "GET", base+route, nil)
			if strings.HasSuffix(route, "/pty") {
				req.Header.Set("Connection", "Upgrade")
				req.Header.Set("Upgrade", "websocket")
				req.Header.Set("Sec-WebSocket-Version", "13")
				req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
				req.Header.Set("Origin", base)
			}
			res, err := browser.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusUnauthorized {
				t.Fatalf("%s, tab %d: %d, want 401", route, i, res.StatusCode)
			}
			if i > 0 {
				continue
			}
			var cleared bool
			for _, c := range res.Cookies() {
				if c.Name == gateway.SessionCookie && c.MaxAge < 0 && c.Path == "/" && c.HttpOnly {
					cleared = true
				}
			}
			if !cleared {
				t.Errorf("%s's 401 to a stale session cookie does not clear it: Set-Cookie %q", route, res.Header.Values("Set-Cookie"))
			}
		}
		req, _ := http.NewRequestWithContext(ctx, "POST", base+"/login", strings.NewReader(url.Values{"token": {admin}, "next": {"/hosts/box/terminal"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", base)
		res, err := browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if loc := res.Header.Get("Location"); res.StatusCode != http.StatusSeeOther || loc != "/hosts/box/terminal" {
			t.Fatalf("login after 25 tabs asked %s with a stale cookie: %d to %q, want 303 to the terminal", route, res.StatusCode, loc)
		}
	}
}

// TestPageLoginRefusedSaysWhy: a page load whose session cookie is not
// stale but refused for another reason goes to the login page saying
// that reason, and the cookie is left. Two different session cookies (a
// page under a parent domain planted one) and an agent's token in the
// cookie both said error=session_ended, "your login ended: log in
// again", which for the first does not help (the planted cookie stays,
// and the next load says the same).
func TestPageLoginRefusedSaysWhy(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "state")
	base := startServe(t, dir)
	mk := tokenMaker(t, ctx, dir)
	admin, agent := mk("--role", "admin"), mk("--role", "agent", "--host", "box")
	browser := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range []struct {
		name    string
		cookies []string
		code    string
	}{
		{"two different session cookies", []string{admin, "a-cookie-a-preview-page-planted"}, "two_sessions"},
		{"an agent token in the cookie", []string{agent}, "agent_login"},
	} {
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/hosts/box/terminal", nil)
		for _, v := range tc.cookies {
			req.AddCookie(&http.Cookie{Name: gateway.SessionCookie, Value: v})
		}
		res, err := browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		loc, err := url.Parse(res.Header.Get("Location"))
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != http.StatusFound || loc.Path != "/login" || loc.Query().Get("error") != tc.code || len(res.Cookies()) != 0 {
			t.Errorf("%s: %d to %q, Set-Cookie %q; want the login page saying %s, the cookies kept", tc.name, res.StatusCode, loc, res.Header.Values("Set-Cookie"), tc.code)
		}
	}
}

// TestStaleSessionCookieClearedByPreviews: a preview's routes on the
// gateway's origin (the path form /preview/{host}/{port}/ and the
// subdomain form's login flow, /preview-login) clear a session cookie the
// gateway no longer honours and send the browser to the login page saying
// its login ended, as the UI's pages do. They left it: after a gateway
// restart each preview link followed counted one or two failures with the
// cookie, and the login that followed was refused as rate-limited.
func TestStaleSessionCookieClearedByPreviews(t *testing.T) {
	g := startPreviewGateway(t)
	for _, route := range []string{"/preview-login?host=h1&port=3000&next=/app", "/preview/h1/3000/app"} {
		jar, err := cookiejar.New(nil)
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(g.base)
		jar.SetCookies(u, []*http.Cookie{{Name: gateway.SessionCookie, Value: "the-session-of-a-gateway-before-its-restart", Path: "/", HttpOnly: true}})
		browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		for i := range 25 {
			req, _ := http.NewRequestWithContext(g.ctx, "GET", g.base+route, nil)
			req.Header.Set("Accept", "text/html")
			req.Header.Set("Sec-Fetch-Site", "none")
			req.Header.Set("Sec-Fetch-Mode", "navigate")
			req.Header.Set("Sec-Fetch-Dest", "document")
			res, err := browser.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			loc, _ := url.Parse(res.Header.Get("Location"))
			if res.StatusCode != http.StatusFound || loc == nil || loc.Path != "/login" {
				t.Fatalf("%s, load %d: %d to %q, want the login page", route, i, res.StatusCode, res.Header.Get("Location"))
			}
			if i > 0 {
				continue
			}
			var cleared bool
			for _, c := range res.Cookies() {
				if c.Name == gateway.SessionCookie && c.MaxAge < 0 && c.Path == "/" && c.Domain == "" && c.HttpOnly && c.SameSite == http.SameSiteLaxMode {
					cleared = true
				}
			}
			if !cleared || loc.Query().Get("error") != "session_ended" {
				t.Errorf("%s with a stale session cookie: to %q, Set-Cookie %q; want the login page saying session_ended, the cookie cleared", route, loc, res.Header.Values("Set-Cookie"))
			}
		}
		req, _ := http.NewRequestWithContext(g.ctx, "POST", g.base+"/login", strings.NewReader(url.Values{"token": {g.admin}, "next": {"/hosts/box/terminal"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", g.base)
		res, err := browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if loc := res.Header.Get("Location"); res.StatusCode != http.StatusSeeOther || loc != "/hosts/box/terminal" {
			t.Fatalf("login after 25 loads of %s with a stale cookie: %d to %q, want 303 to the terminal", route, res.StatusCode, loc)
		}
	}
}
