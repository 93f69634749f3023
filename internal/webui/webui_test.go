package webui

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

func newTestUI() (*httptest.Server, *http.Client) {
	ui := New(Config{
		CheckToken: func(_ *http.Request, tok string) bool { return tok == "good" },
		Authenticated: func(r *http.Request) bool {
			c, err := r.Cookie(DefaultCookieName)
			return err == nil && c.Value == "good"
		},
	})
	mux := http.NewServeMux()
	ui.Register(mux)
	srv := httptest.NewServer(mux)
	c := srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return srv, c
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
	if !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Domain != "" || ck.Value != "good" {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Lax, host-only", ck)
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
		req.AddCookie(&http.Cookie{Name: DefaultCookieName, Value: "good"})
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
		CheckToken: func(_ *http.Request, tok string) bool { return tok == "good" },
		Authenticated: func(r *http.Request) bool {
			c, err := r.Cookie(DefaultCookieName)
			return err == nil && c.Value == "good"
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
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("terminal page of %s: %d, want %d", id, res.StatusCode, want)
		}
	}
}
