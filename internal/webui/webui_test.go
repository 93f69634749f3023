package webui

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeSessions is the gateway's side of logins: token "good" logs in,
// each login a session of its own that Logout ends.
type fakeSessions struct {
	mu      sync.Mutex
	n       int
	live    map[string]bool
	expires time.Time // of the sessions it starts; zero: in an hour
	failOut bool      // Logout fails (a store outage)
}

func (f *fakeSessions) config() Config {
	f.live = map[string]bool{}
	return Config{
		Login: func(_ *http.Request, tok string, ttl time.Duration) (string, time.Time, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			switch {
			case f.live[tok]:
				return "", time.Time{}, fmt.Errorf("%w: mint one from a session", ErrSessionToken)
			case tok == "down":
				return "", time.Time{}, errors.New("database is locked")
			case tok == "old":
				return "", time.Time{}, fmt.Errorf("%w: expired yesterday", ErrExpiredToken)
			case tok == "limited":
				return "", time.Time{}, fmt.Errorf("%w: 20 in a minute", ErrTooManyLogins)
			case tok != "good":
				return "", time.Time{}, ErrInvalidToken
			}
			f.n++
			sess := fmt.Sprint("session-", f.n)
			f.live[sess] = true
			exp := f.expires
			if exp.IsZero() {
				exp = time.Now().Add(min(ttl, time.Hour))
			}
			return sess, exp, nil
		},
		Logout: func(_ *http.Request, sess string) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.failOut {
				return errors.New("database is locked")
			}
			delete(f.live, sess)
			return nil
		},
		Authenticated: func(r *http.Request) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			c, err := r.Cookie(DefaultCookieName)
			switch {
			case err != nil:
				return err
			case !f.live[c.Value]:
				return ErrSessionEnded
			}
			return nil
		},
	}
}

// set changes f under its lock: the handlers read it on the server's
// goroutines.
func (f *fakeSessions) set(change func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change()
}

func newTestUI() (*httptest.Server, *http.Client) {
	srv, c, _ := newTestUISessions()
	return srv, c
}

func newTestUISessions() (*httptest.Server, *http.Client, *fakeSessions) {
	f := &fakeSessions{}
	ui := New(f.config())
	mux := http.NewServeMux()
	ui.Register(mux)
	srv := httptest.NewServer(mux)
	c := srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return srv, c, f
}

func TestPagesNeedLogin(t *testing.T) {
	srv, c := newTestUI()
	defer srv.Close()
	for _, p := range []string{"/", "/hosts/local/terminal"} {
		res, err := c.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusFound || !strings.HasPrefix(res.Header.Get("Location"), "/login?next=") {
			t.Errorf("%s: got %d %q, want a redirect to /login", p, res.StatusCode, res.Header.Get("Location"))
		}
	}
}

func TestLoginSetsHostOnlyHttpOnlyCookie(t *testing.T) {
	srv, c := newTestUI()
	defer srv.Close()
	res, err := c.PostForm(srv.URL+"/login", url.Values{"token": {"good"}, "next": {"/hosts/local/terminal"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/hosts/local/terminal" {
		t.Fatalf("got %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	cookies := res.Cookies()
	if len(cookies) != 1 {
		t.Fatalf("cookies: %v", cookies)
	}
	ck := cookies[0]
	if !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Domain != "" {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Lax, host-only", ck)
	}
	if ck.Value != "session-1" {
		t.Errorf("cookie value %q: want the session's secret, not the token typed", ck.Value)
	}
	// The cookie opens the pages.
	req, _ := http.NewRequest("GET", srv.URL+"/hosts/local/terminal", nil)
	req.AddCookie(ck)
	res, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(body), "xterm.js") {
		t.Errorf("terminal page: %d", res.StatusCode)
	}
	if !strings.Contains(res.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Error("terminal page can be framed")
	}
}

func TestLoginRefusesBadTokenAndOpenRedirect(t *testing.T) {
	srv, c := newTestUI()
	defer srv.Close()
	res, err := c.PostForm(srv.URL+"/login", url.Values{"token": {"bad"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if len(res.Cookies()) != 0 || !strings.HasPrefix(res.Header.Get("Location"), "/login?error=invalid_token&") {
		t.Errorf("bad token: %d %q %v", res.StatusCode, res.Header.Get("Location"), res.Cookies())
	}
	for _, next := range []string{"//evil.example/", "https://evil.example/", "/\\evil.example", "/\t/evil.example", "/\n/evil.example"} {
		res, err := c.PostForm(srv.URL+"/login", url.Values{"token": {"good"}, "next": {next}})
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.Header.Get("Location") != "/" {
			t.Errorf("next=%q redirected to %q", next, res.Header.Get("Location"))
		}
	}
}

// TestLogoutRefusesCrossOrigin: another site's form, or a preview
// subdomain's fetch, cannot log the browser out; the gateway's own page
// and clients without fetch metadata can. Any page could before.
func TestLogoutRefusesCrossOrigin(t *testing.T) {
	srv, c := newTestUI()
	defer srv.Close()
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"another site's form", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "http://evil.example"}, http.StatusForbidden},
		{"a preview subdomain's fetch", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "http://3000--a.preview.localhost"}, http.StatusForbidden},
		{"another site, old browser", map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden},
		{"the gateway's own page", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": srv.URL}, http.StatusSeeOther},
		{"no fetch metadata (curl)", nil, http.StatusSeeOther},
	} {
		req, _ := http.NewRequest("POST", srv.URL+"/logout", nil)
		req.AddCookie(&http.Cookie{Name: DefaultCookieName, Value: "session-1"})
		for k, v := range tc.hdr {
			req.Header.Set(k, v)
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		cleared := len(res.Cookies()) == 1 && res.Cookies()[0].MaxAge < 0
		if res.StatusCode != tc.want || cleared != (tc.want == http.StatusSeeOther) {
			t.Errorf("%s: %d, cookies %v; want %d and the cookie cleared only when allowed", tc.name, res.StatusCode, res.Cookies(), tc.want)
		}
	}
}

func TestVendoredAssetsServed(t *testing.T) {
	srv, c := newTestUI()
	defer srv.Close()
	for _, p := range []string{"/static/vendor/xterm.js", "/static/vendor/addon-fit.js", "/static/vendor/xterm.css", "/static/terminal.js", "/static/hosts.js", "/static/style.css"} {
		res, err := c.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || n == 0 {
			t.Errorf("%s: %d, %d bytes", p, res.StatusCode, n)
		}
	}
}

// Every asset a page names is served, its icon included: without one a
// browser asked for /favicon.ico on every page and the gateway logged a
// 404 for each.
func TestPagesAssetsServed(t *testing.T) {
	srv, c := newTestUI()
	defer srv.Close()
	ref := regexp.MustCompile(`(?:href|src)="(/static/[^"]+)"`)
	for _, page := range []string{"index.html", "login.html", "terminal.html", "notfound.html"} {
		b, err := static.ReadFile("static/" + page)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `rel="icon"`) {
			t.Errorf("%s names no icon", page)
		}
		for _, m := range ref.FindAllStringSubmatch(string(b), -1) {
			res, err := c.Get(srv.URL + m[1])
			if err != nil {
				t.Fatal(err)
			}
			n, _ := io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != 200 || n == 0 {
				t.Errorf("%s names %s: %d, %d bytes", page, m[1], res.StatusCode, n)
			}
		}
	}
}

// A login form trickled in, or never finished, must not hold the
// connection: the server bounds only headers, for its WebSockets' sake.
func TestLoginBodyDeadline(t *testing.T) {
	defer func(d time.Duration) { loginReadTimeout = d }(loginReadTimeout)
	loginReadTimeout = 200 * time.Millisecond
	srv, _ := newTestUI()
	defer srv.Close()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\ntoken=go"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("a login body that never ends: %v, want the server to answer and close", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("a login body that never ends: %d, want 400", res.StatusCode)
	}
}

// The terminal page of a host the session cannot reach, or that does not
// exist, is a 404, not a page that fails once it connects.
func TestTerminalPageOfUnknownHost(t *testing.T) {
	ui := New(Config{
		Authenticated: func(r *http.Request) error {
			if c, err := r.Cookie(DefaultCookieName); err != nil || c.Value != "good" {
				return ErrSessionEnded
			}
			return nil
		},
		Reaches: func(_ *http.Request, id string) bool { return id == "local" },
	})
	mux := http.NewServeMux()
	ui.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for id, want := range map[string]int{"local": 200, "nosuch": 404} {
		req, _ := http.NewRequest("GET", srv.URL+"/hosts/"+id+"/terminal", nil)
		req.AddCookie(&http.Cookie{Name: DefaultCookieName, Value: "good"})
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("terminal page of %s: %d, want %d", id, res.StatusCode, want)
		}
		// The 404 names where to go: it said "no such host" alone, and
		// then in plain text, with no link there.
		if want == 404 && (!strings.Contains(string(body), "the hosts list at / shows those you can open") || !strings.Contains(string(body), `href="/">Go to the hosts list</a>`)) {
			t.Errorf("terminal page of %s says %q", id, body)
		}
	}
}

// TestLogoutEndsSession: a logout ends the session on the server, not only
// in the browser: the cookie's value, copied before, opens nothing after.
// When the gateway cannot end it, the logout says so and keeps the cookie.
// Logging in again ends the session the browser's cookie held: the new
// cookie overwrites it, and a logout would end only the new one.
func TestLoginAgainEndsOldSession(t *testing.T) {
	srv, c, _ := newTestUISessions()
	defer srv.Close()
	post := func(old *http.Cookie) *http.Cookie {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL+"/login", strings.NewReader(url.Values{"token": {"good"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if old != nil {
			req.AddCookie(old)
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if len(res.Cookies()) != 1 {
			t.Fatalf("login: %d, cookies %v", res.StatusCode, res.Cookies())
		}
		return res.Cookies()[0]
	}
	get := func(ck *http.Cookie) int {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+"/", nil)
		req.AddCookie(ck)
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	first := post(nil)
	second := post(first)
	if first.Value == second.Value {
		t.Fatal("the second login kept the first session")
	}
	if code := get(first); code != http.StatusFound {
		t.Errorf("the first session after a second login: %d, want a redirect to /login", code)
	}
	if code := get(second); code != http.StatusOK {
		t.Errorf("the second session: %d, want 200", code)
	}
}

func TestLogoutEndsSession(t *testing.T) {
	srv, c, f := newTestUISessions()
	defer srv.Close()
	login := func() *http.Cookie {
		t.Helper()
		res, err := c.PostForm(srv.URL+"/login", url.Values{"token": {"good"}})
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if len(res.Cookies()) != 1 {
			t.Fatalf("login: %d, cookies %v", res.StatusCode, res.Cookies())
		}
		return res.Cookies()[0]
	}
	do := func(method, path string, ck *http.Cookie) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		req.AddCookie(ck)
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	ck, other := login(), login()
	if res := do("GET", "/", ck); res.StatusCode != 200 {
		t.Fatalf("the hosts page with the session cookie: %d", res.StatusCode)
	}

	f.set(func() { f.failOut = true })
	if res := do("POST", "/logout", ck); res.StatusCode != http.StatusServiceUnavailable || len(res.Cookies()) != 0 {
		t.Fatalf("a logout the gateway could not do: %d, cookies %v; want 503 and the cookie kept", res.StatusCode, res.Cookies())
	}
	f.set(func() { f.failOut = false })
	if res := do("POST", "/logout", ck); res.StatusCode != http.StatusSeeOther || len(res.Cookies()) != 1 || res.Cookies()[0].MaxAge >= 0 {
		t.Fatalf("logout: %d, cookies %v; want 303 and the cookie cleared", res.StatusCode, res.Cookies())
	}
	if res := do("GET", "/", ck); res.StatusCode != http.StatusFound {
		t.Fatalf("the hosts page with the logged-out cookie's value: %d, want a redirect to /login", res.StatusCode)
	}
	if res := do("GET", "/", other); res.StatusCode != 200 {
		t.Fatalf("another session after the logout: %d, want 200", res.StatusCode)
	}
}

// TestLoginErrors: a session's secret typed as a token is named as such;
// a gateway that cannot start a session answers 503, not "invalid token".
// The cookie lives no longer than its session.
func TestLoginErrors(t *testing.T) {
	srv, c, f := newTestUISessions()
	defer srv.Close()
	post := func(tok string) *http.Response {
		t.Helper()
		res, err := c.PostForm(srv.URL+"/login", url.Values{"token": {tok}})
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	sess := post("good").Cookies()[0].Value
	if res := post(sess); len(res.Cookies()) != 0 || !strings.HasPrefix(res.Header.Get("Location"), "/login?error=session_token&") {
		t.Errorf("login with a session's secret: %d %q %v", res.StatusCode, res.Header.Get("Location"), res.Cookies())
	}
	// Each refusal has a code of its own, which the login page has words
	// for: a good token refused by the rate limit was "not valid", and
	// the person went looking for another.
	page := assetText(t, "login.js")
	for tok, code := range map[string]string{"wrong": "invalid_token", "old": "expired_token", "limited": "rate_limited"} {
		res := post(tok)
		if len(res.Cookies()) != 0 || !strings.HasPrefix(res.Header.Get("Location"), "/login?error="+code+"&") {
			t.Errorf("login with %q: %d %q, want error=%s", tok, res.StatusCode, res.Header.Get("Location"), code)
		}
		if !strings.Contains(page, "\n    "+code+": \"") {
			t.Errorf("login.js has no message for %s", code)
		}
	}
	if res := post("down"); res.StatusCode != http.StatusServiceUnavailable || len(res.Cookies()) != 0 {
		t.Errorf("login while the gateway cannot start sessions: %d %v, want 503", res.StatusCode, res.Cookies())
	}
	f.set(func() { f.expires = time.Now().Add(10 * time.Minute) })
	if ck := post("good").Cookies()[0]; ck.MaxAge > 600 || ck.MaxAge < 500 {
		t.Errorf("cookie of a session that ends in 10 minutes: max-age %d", ck.MaxAge)
	}
}

// The login page lets its form's redirects end on the FormActions sources
// (the preview subdomains the login flow leads to) besides its own origin:
// browsers hold those redirects to form-action, and with 'self' alone the
// one to a subdomain preview was blocked after a good login.
func TestLoginPageFormAction(t *testing.T) {
	for _, tc := range []struct {
		actions []string
		want    string
	}{
		{nil, "form-action 'self'"},
		{[]string{"*.preview.test:*"}, "form-action 'self' *.preview.test:*"},
	} {
		ui := New(Config{FormActions: tc.actions})
		mux := http.NewServeMux()
		ui.Register(mux)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", "/login", nil))
		csp := rec.Header().Get("Content-Security-Policy")
		if !strings.HasSuffix(csp, "; "+tc.want) {
			t.Errorf("FormActions %q: CSP %q, want it to end with %q", tc.actions, csp, tc.want)
		}
	}
}

// assetText is an embedded file's text.
func assetText(t *testing.T, name string) string {
	t.Helper()
	b, err := static.ReadFile("static/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPagesForScreenReaders: each page names its language and title, and
// what changes without a page load is announced: the login and hosts
// pages' errors (role=alert) and the terminal's connection state
// (role=status), which a screen reader otherwise never reads out. The
// hosts table's last column has a name.
func TestPagesForScreenReaders(t *testing.T) {
	for page, want := range map[string][]string{
		"login.html":    {`<html lang="en">`, `<title>hostgate · log in</title>`, `<label for="gateway">`, `<label for="token">`, `id="error" role="alert"`},
		"index.html":    {`<html lang="en">`, `<title>hostgate · hosts</title>`, `id="progress" role="status"`, `id="error" role="alert"`, `<th><span class="sr">Actions</span></th>`},
		"terminal.html": {`<html lang="en">`, `<title>hostgate · terminal</title>`, `id="status" role="status"`, `id="held" role="status"`, `<p id="keys">Ctrl+Shift+L leaves the terminal`, `id="reader" class="toggle" aria-pressed="false"`},
		"notfound.html": {`<html lang="en">`, `<title>hostgate · page not found</title>`},
	} {
		text := assetText(t, page)
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Errorf("%s lacks %s", page, w)
			}
		}
	}
}

// TestUnknownPathNotFoundPage: a browser at a path of the UI that does not
// exist (a stale link, a typo) gets a 404 page in the UI's style with the
// way back to the hosts list; it got Go's plain "404 page not found". Other
// methods keep the mux's answers: 404 for a path nothing serves, 405 with
// Allow for one served by another method.
func TestUnknownPathNotFoundPage(t *testing.T) {
	srv, c := newTestUI()
	defer srv.Close()
	for _, p := range []string{"/nosuch", "/hosts/local", "/hosts/local/terminal/x", "/login/x"} {
		for _, method := range []string{"GET", "HEAD"} {
			req, _ := http.NewRequest(method, srv.URL+p, nil)
			res, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusNotFound || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") ||
				res.Header.Get("Content-Security-Policy") == "" {
				t.Errorf("%s %s: %d %q, want 404 text/html with the pages' CSP", method, p, res.StatusCode, res.Header.Get("Content-Type"))
			}
			if method == "HEAD" {
				continue
			}
			for _, want := range []string{`<title>hostgate · page not found</title>`, `href="/static/style.css"`, `href="/">Go to the hosts list</a>`, noSuchPage} {
				if !strings.Contains(string(body), want) {
					t.Errorf("GET %s: the page lacks %s:\n%s", p, want, body)
				}
			}
		}
	}
	for _, tc := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{"POST", "/nosuch", 404, ""},
		{"DELETE", "/nosuch", 404, ""},
		{"POST", "/", 405, "GET, HEAD"},
		{"DELETE", "/login", 405, "GET, HEAD, POST"},
		{"GET", "/logout", 405, "POST"},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != tc.status || res.Header.Get("Allow") != tc.allow || strings.Contains(string(body), "<html") {
			t.Errorf("%s %s: %d, Allow %q, %q; want %d, Allow %q, no page", tc.method, tc.path, res.StatusCode, res.Header.Get("Allow"), body, tc.status, tc.allow)
		}
	}
}

// TestStaticMisses: under /static/ a browser navigating to a file that is
// not there gets the UI's 404 page, and a script or fetch a plain-text 404,
// both nosniff; no directory is listed and no page is served without its
// headers. http.FileServer gave its plain "404 page not found" to all, and
// listed /static/ and /static/vendor/.
func TestStaticMisses(t *testing.T) {
	srv, c := newTestUI()
	defer srv.Close()
	get := func(p, mode string) (*http.Response, string) {
		req, _ := http.NewRequest("GET", srv.URL+p, nil)
		if mode != "" {
			req.Header.Set("Sec-Fetch-Mode", mode)
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return res, string(b)
	}
	for _, p := range []string{"/static/nosuch.js", "/static/", "/static/vendor/", "/static/vendor", "/static/vendor/nosuch.css", "/static/index.html", "/static/login.html"} {
		res, body := get(p, "navigate")
		if res.StatusCode != 404 || res.Header.Get("Content-Type") != "text/html; charset=utf-8" || res.Header.Get("X-Content-Type-Options") != "nosniff" ||
			res.Header.Get("Content-Security-Policy") == "" || !strings.Contains(body, noSuchPage) {
			t.Errorf("a browser navigating to %s: %d %q nosniff %q:\n%s\nwant the UI's 404 page", p, res.StatusCode, res.Header.Get("Content-Type"), res.Header.Get("X-Content-Type-Options"), body)
		}
		res, body = get(p, "no-cors")
		if res.StatusCode != 404 || res.Header.Get("Content-Type") != "text/plain; charset=utf-8" || res.Header.Get("X-Content-Type-Options") != "nosniff" || strings.Contains(body, "<") {
			t.Errorf("a script loading %s: %d %q nosniff %q: %q; want a plain 404", p, res.StatusCode, res.Header.Get("Content-Type"), res.Header.Get("X-Content-Type-Options"), body)
		}
	}
	for p, typ := range map[string]string{"/static/style.css": "text/css; charset=utf-8", "/static/vendor/xterm.js": "text/javascript; charset=utf-8", "/static/favicon.svg": "image/svg+xml"} {
		res, body := get(p, "no-cors")
		if res.StatusCode != 200 || res.Header.Get("Content-Type") != typ || res.Header.Get("X-Content-Type-Options") != "nosniff" || body == "" {
			t.Errorf("%s: %d %q nosniff %q, %d bytes; want 200 %s", p, res.StatusCode, res.Header.Get("Content-Type"), res.Header.Get("X-Content-Type-Options"), len(body), typ)
		}
	}
}

// TestPagesOfEndedLogin: a page asked for with a session cookie the
// gateway no longer honours (revoked, logged out elsewhere) is sent to the
// login page saying the login ended; it said nothing, as to a first visit.
func TestPagesOfEndedLogin(t *testing.T) {
	srv, c := newTestUI()
	defer srv.Close()
	for _, p := range []string{"/", "/hosts/local/terminal"} {
		req, _ := http.NewRequest("GET", srv.URL+p, nil)
		req.AddCookie(&http.Cookie{Name: DefaultCookieName, Value: "session-revoked"})
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if want := "/login?error=session_ended&next=" + url.QueryEscape(p); res.StatusCode != http.StatusFound || res.Header.Get("Location") != want {
			t.Errorf("%s with an ended session's cookie: %d %q, want a redirect to %s", p, res.StatusCode, res.Header.Get("Location"), want)
		}
	}
}

// TestLoginEndsSessionOfOldCookieName: a gateway whose session cookie took
// a new name (__Host- behind https) ends, at the next login, the session
// the browser held under the old name, and clears that cookie. It lived on,
// unused, until it expired.
func TestLoginEndsSessionOfOldCookieName(t *testing.T) {
	f := &fakeSessions{}
	cfg := f.config()
	cfg.CookieName, cfg.OldCookieNames, cfg.SecureCookie = "__Host-hostgate_session", []string{DefaultCookieName}, true
	mux := http.NewServeMux()
	New(cfg).Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	f.set(func() { f.live["session-old"] = true })
	req, _ := http.NewRequest("POST", srv.URL+"/login", strings.NewReader(url.Values{"token": {"good"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: DefaultCookieName, Value: "session-old"})
	c := srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	got := map[string]*http.Cookie{}
	for _, ck := range res.Cookies() {
		got[ck.Name] = ck
	}
	if ck := got["__Host-hostgate_session"]; ck == nil || ck.Value == "" || !ck.Secure {
		t.Errorf("login: cookies %v, want a Secure __Host-hostgate_session", res.Cookies())
	}
	if ck := got[DefaultCookieName]; ck == nil || ck.MaxAge >= 0 || ck.Path != "/" {
		t.Errorf("login: cookies %v, want %s cleared", res.Cookies(), DefaultCookieName)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.live["session-old"] {
		t.Error("the session held under the old cookie name lives on after the login")
	}
}

// A logout ends each distinct session value once, and refuses a Cookie
// header with more than maxSessionCookies of them whole: each is a store
// lookup, and a Cookie header of 3,000 of them (what net/http parses at
// most) cost the gateway about 0.17 s of CPU for one request no token
// authenticated.
func TestLogoutBoundsSessionCookies(t *testing.T) {
	var ended []string
	cfg := Config{Logout: func(_ *http.Request, sess string) error { ended = append(ended, sess); return nil }}
	ui := New(cfg)
	mux := http.NewServeMux()
	ui.Register(mux)
	logout := func(vals ...string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/logout", nil)
		for _, v := range vals {
			req.AddCookie(&http.Cookie{Name: DefaultCookieName, Value: v})
		}
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		return w
	}
	if w := logout("a", "b", "a", "", "c", "b"); w.Code != http.StatusSeeOther || !slices.Equal(ended, []string{"a", "b", "c"}) {
		t.Errorf("logout of a, b, c with repeats: %d, ended %q; want 303 and each once", w.Code, ended)
	}
	ended = nil
	many := make([]string, 0, 3000) // net/http parses no more

	for i := range cap(many) {
		many = append(many, fmt.Sprint("hg_", i))
	}
	w := logout(many...)
	if w.Code != http.StatusBadRequest || len(ended) != 0 || !strings.Contains(w.Body.String(), "clear this site's cookies") {
		t.Errorf("logout with 3000 session cookies: %d %q, ended %d; want 400 naming the fix, none ended", w.Code, w.Body.String(), len(ended))
	}
	if w := logout(many[:maxSessionCookies]...); w.Code != http.StatusSeeOther || len(ended) != maxSessionCookies {
		t.Errorf("logout with %d session cookies: %d, ended %d; want all ended", maxSessionCookies, w.Code, len(ended))
	}
}

// A session the gateway no longer honours has its cookies cleared on the
// way to the login page, as they were set (behind https the __Host- one,
// Secure, and the plain one of before); one the gateway cannot judge now
// (its store, a rate limit) keeps them, and one counts once per load.
func TestStaleSessionCookiesCleared(t *testing.T) {
	var calls int
	undecided := errors.New("state store unavailable")
	ui := New(Config{
		CookieName:     "__Host-hostgate_session",
		OldCookieNames: []string{DefaultCookieName},
		SecureCookie:   true,
		Authenticated: func(r *http.Request) error {
			calls++
			if c, err := r.Cookie("__Host-hostgate_session"); err == nil && c.Value == "busy" {
				return undecided
			}
			return fmt.Errorf("%w: no such session", ErrSessionEnded)
		},
		Reaches: func(*http.Request, string) bool { return true },
	})
	mux := http.NewServeMux()
	ui.Register(mux)
	for _, p := range []string{"/", "/hosts/box/terminal"} {
		calls = 0
		req := httptest.NewRequest("GET", p, nil)
		req.AddCookie(&http.Cookie{Name: "__Host-hostgate_session", Value: "stale"})
		req.AddCookie(&http.Cookie{Name: DefaultCookieName, Value: "older"})
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		if calls != 1 {
			t.Errorf("%s: authenticated %d times, want 1", p, calls)
		}
		cleared := map[string]bool{}
		for _, c := range w.Result().Cookies() {
			if c.MaxAge < 0 && c.Path == "/" && c.Domain == "" && c.Secure && c.HttpOnly && c.SameSite == http.SameSiteLaxMode {
				cleared[c.Name] = true
			}
		}
		if w.Code != http.StatusFound || !cleared["__Host-hostgate_session"] || !cleared[DefaultCookieName] {
			t.Errorf("%s: %d, Set-Cookie %q, want a redirect clearing both cookies", p, w.Code, w.Header().Values("Set-Cookie"))
		}

		req = httptest.NewRequest("GET", p, nil)
		req.AddCookie(&http.Cookie{Name: "__Host-hostgate_session", Value: "busy"})
		w = httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		if sc := w.Header().Values("Set-Cookie"); w.Code != http.StatusFound || len(sc) != 0 {
			t.Errorf("%s with the store unavailable: %d, Set-Cookie %q, want a redirect leaving the cookie", p, w.Code, sc)
		}
	}
}

type retryAfterError time.Duration

func (e retryAfterError) Error() string             { return "refused for a while" }
func (e retryAfterError) RetryAfter() time.Duration { return time.Duration(e) }

// TestPagesOfUndecidedLogin: a page load the gateway cannot judge now is
// sent to the login page saying why, not that the login ended: the person
// logged in again only to be refused as rate-limited, or to find that the
// session had been good all along. The rate limit says how long it holds.
func TestPagesOfUndecidedLogin(t *testing.T) {
	var answer error
	ui := New(Config{
		Authenticated: func(*http.Request) error { return answer },
		Reaches:       func(*http.Request, string) bool { return true },
	})
	mux := http.NewServeMux()
	ui.Register(mux)
	page := assetText(t, "login.js")
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: %w", ErrTooManyLogins, retryAfterError(37*time.Second+time.Millisecond)), "/login?error=rate_limited&next=%2Fhosts%2Fbox%2Fterminal&retry=38"},
		{fmt.Errorf("%w: state store unavailable", ErrUnavailable), "/login?error=unavailable&next=%2Fhosts%2Fbox%2Fterminal"},
	} {
		answer = tc.err
		for _, cookie := range []bool{true, false} {
			req := httptest.NewRequest("GET", "/hosts/box/terminal", nil)
			if cookie {
				req.AddCookie(&http.Cookie{Name: DefaultCookieName, Value: "good-but-unchecked"})
			}
			w := httptest.NewRecorder()
			mux.ServeHTTP(w, req)
			if loc := w.Header().Get("Location"); w.Code != http.StatusFound || loc != tc.want {
				t.Errorf("%v, cookie %v: %d to %q, want a redirect to %s", tc.err, cookie, w.Code, loc, tc.want)
			}
		}
		code := strings.TrimPrefix(strings.Split(tc.want, "&")[0], "/login?error=")
		if !strings.Contains(page, "\n    "+code+": \"") {
			t.Errorf("login.js has no message for %s", code)
		}
	}
}

// TestPagesOfRefusedCookie: a page whose session cookie is refused for
// carrying two different session cookies, or an agent's token, goes to
// the login page saying so, with words for it in login.js, and keeps the
// cookie; both said error=session_ended.
func TestPagesOfRefusedCookie(t *testing.T) {
	var answer error
	ui := New(Config{
		Authenticated: func(*http.Request) error { return answer },
		Reaches:       func(*http.Request, string) bool { return true },
	})
	mux := http.NewServeMux()
	ui.Register(mux)
	page := assetText(t, "login.js")
	for _, tc := range []struct {
		err  error
		code string
	}{
		{fmt.Errorf("%w: two different session cookies", ErrTwoSessions), "two_sessions"},
		{fmt.Errorf("%w: an agent token cannot use the web UI", ErrAgentLogin), "agent_login"},
	} {
		answer = tc.err
		req := httptest.NewRequest("GET", "/hosts/box/terminal", nil)
		req.AddCookie(&http.Cookie{Name: DefaultCookieName, Value: "refused"})
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		want := "/login?error=" + tc.code + "&next=%2Fhosts%2Fbox%2Fterminal"
		if loc := w.Header().Get("Location"); w.Code != http.StatusFound || loc != want || len(w.Result().Cookies()) != 0 {
			t.Errorf("%v: %d to %q, Set-Cookie %q; want a redirect to %s keeping the cookie", tc.err, w.Code, loc, w.Header().Values("Set-Cookie"), want)
		}
		if !strings.Contains(page, "\n    "+tc.code+": \"") {
			t.Errorf("login.js has no message for %s", tc.code)
		}
	}
}

// TestSessionEndedAfterClear: once a stale session cookie is cleared (by a
// page, or by the API's /v1/me, which the terminal page asks), the next
// page load still says the login ended, from the mark the clear leaves,
// which a login removes. With the cookie gone, a reload of a revoked
// terminal sent the browser to the login page saying nothing, as to a first
// visit.
func TestSessionEndedAfterClear(t *testing.T) {
	ui := New(Config{
		CookieName: DefaultCookieName,
		Authenticated: func(r *http.Request) error {
			if c, err := r.Cookie(DefaultCookieName); err == nil && c.Value != "" {
				return fmt.Errorf("%w: no such session", ErrSessionEnded)
			}
			return errors.New("missing credentials")
		},
		Login: func(*http.Request, string, time.Duration) (string, time.Time, error) {
			return "fresh", time.Time{}, nil
		},
	})
	mux := http.NewServeMux()
	ui.Register(mux)
	// The API's clear, as /v1/me does it.
	req := httptest.NewRequest("GET", "/v1/me", nil)
	req.AddCookie(&http.Cookie{Name: DefaultCookieName, Value: "revoked"})
	w := httptest.NewRecorder()
	ui.ClearSession(w, req)
	var mark *http.Cookie
	for _, c := range w.Result().Cookies() {
		if c.Name != DefaultCookieName && c.MaxAge > 0 {
			mark = c
		}
	}
	if mark == nil {
		t.Fatalf("ClearSession set %q, want the cookie cleared and a mark left", w.Header().Values("Set-Cookie"))
	}
	// The reload, with the mark and without the cookie.
	req = httptest.NewRequest("GET", "/hosts/box/terminal", nil)
	req.AddCookie(mark)
	w = httptest.NewRecorder()
	mux.ServeHTTP(w, req)
	if loc := w.Header().Get("Location"); w.Code != http.StatusFound || !strings.Contains(loc, "error=session_ended") {
		t.Errorf("a reload after the clear: %d to %q, want the login page saying the login ended", w.Code, loc)
	}
	// A login removes the mark.
	req = httptest.NewRequest("POST", "/login", strings.NewReader(url.Values{"token": {"tok"}, "next": {"/"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://example.com")
	req.Host = "example.com"
	req.AddCookie(mark)
	w = httptest.NewRecorder()
	mux.ServeHTTP(w, req)
	removed := false
	for _, c := range w.Result().Cookies() {
		if c.Name == mark.Name && c.MaxAge < 0 {
			removed = true
		}
	}
	if !removed {
		t.Errorf("a login: %d, Set-Cookie %q, want the mark removed", w.Code, w.Header().Values("Set-Cookie"))
	}
}
