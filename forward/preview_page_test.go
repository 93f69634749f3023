package forward

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestErrorPageScriptAllowed: the page's one script is the one its
// Content-Security-Policy allows by hash, as the template renders it (an
// escaping change would leave the page's wait blocked, and Chromium says
// so only on its console), and it is there only for a GET's 502 or 503.
func TestErrorPageScriptAllowed(t *testing.T) {
	p, err := NewPreview(func(ctx context.Context, hostID string, port int) (net.Conn, error) { return nil, ErrHostUnavailable }, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		method string
		status int
		script bool
	}{{http.MethodGet, http.StatusBadGateway, true}, {http.MethodGet, http.StatusServiceUnavailable, true}, {http.MethodHead, http.StatusBadGateway, false}, {http.MethodGet, http.StatusGatewayTimeout, false}, {http.MethodGet, http.StatusNotFound, false}, {http.MethodGet, http.StatusUnauthorized, false}} {
		r := httptest.NewRequest(c.method, "/preview/h/3000/", nil)
		r.Header.Set("Accept", "text/html")
		w := httptest.NewRecorder()
		p.writeError(w, r, c.status, "code_"+c.method, "Something.", "Do this.")
		body := w.Body.String()
		if got := w.Header().Get(errorHeader); got != "code_"+c.method {
			t.Errorf("%s %d: %s %q, want the code", c.method, c.status, errorHeader, got)
		}
		_, after, found := strings.Cut(body, "<script>")
		if found != c.script {
			t.Errorf("%s %d: script %v, want %v: %s", c.method, c.status, found, c.script, body)
			continue
		}
		if !found {
			continue
		}
		script, _, _ := strings.Cut(after, "</script>")
		sum := sha256.Sum256([]byte(script))
		if want := "script-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; !strings.Contains(w.Header().Get("Content-Security-Policy"), want) {
			t.Errorf("%s %d: CSP %q does not allow the script as rendered (%s)", c.method, c.status, w.Header().Get("Content-Security-Policy"), want)
		}
	}
}

// TestSharedPageLinksNoLogin: a viewer let in by a public share alone, who
// has no token, gets pages without the link to the gateway's host list,
// which led to a login they cannot pass, and a hint they can act on (it
// told them to start the dev server on the host); the host's own users
// keep both.
func TestSharedPageLinksNoLogin(t *testing.T) {
	ctx := testCtx(t)
	shares := NewMemoryShares(time.Now)
	e := newPreviewEnv(t, http.NotFoundHandler(), &PreviewConfig{
		Shares:  shares,
		HomeURL: func(*http.Request) string { return "http://gw.example/" },
		Authorize: func(r *http.Request, _ string, _ int) (bool, string, error) {
			return r.Header.Get("Authorization") == "Bearer owner", "", nil
		},
	})
	e.dev.Close() // nothing listens: the 502 page
	if err := shares.Put(ctx, Share{HostID: "dev", Port: e.devPort, Expires: time.Now().Add(time.Hour), By: "admin"}); err != nil {
		t.Fatal(err)
	}
	page := func(token string) string {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "GET", e.pathURL("/"), nil)
		req.Header.Set("Accept", "text/html")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, body := do(t, req)
		if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "Nothing answered") {
			t.Fatalf("token %q: %d %s, want the 502 page", token, resp.StatusCode, body)
		}
		return body
	}
	if body := page(""); strings.Contains(body, "gw.example") || !strings.Contains(body, "Reload this page") ||
		!strings.Contains(body, "whoever shared it can start it") || strings.Contains(body, "Start your dev server") {
		t.Errorf("a share's viewer: the page links the gateway's host list, or not the reload, or tells them to start the dev server: %s", body)
	}
	if body := page("owner"); !strings.Contains(body, `<a href="http://gw.example/">The gateway's host list</a>`) || !strings.Contains(body, "Start your dev server") {
		t.Errorf("the host's user: the page lacks the link to the gateway's host list or how to start the dev server: %s", body)
	}
}

// TestSharedPagesSpeakToTheViewer: a viewer whom a public share alone lets
// in reads, on the 504 of a dev server that took the page and never
// answered, the 502 of a port that answered but not with HTTP, and the
// 503 of a host gone mid-answer, what they can do (reload, or ask whoever
// shared the link), not the host owner's steps: they were told to check
// the dev server's terminal on the host, whether it is an HTTP server, or
// to start its agent, none of which they can. The owner keeps those.
func TestSharedPagesSpeakToTheViewer(t *testing.T) {
	ctx := testCtx(t)
	shares := NewMemoryShares(time.Now)
	var lost atomic.Pointer[error]
	e := newPreviewEnv(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			<-r.Context().Done()
			return
		}
		if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = c.Close() // no HTTP answer at all
		}
	}), &PreviewConfig{
		Shares:            shares,
		NavigationTimeout: 50 * time.Millisecond,
		HomeURL:           func(*http.Request) string { return "http://gw.example/" },
		Authorize: func(r *http.Request, _ string, _ int) (bool, string, error) {
			return r.Header.Get("Authorization") == "Bearer owner", "", nil
		},
		HostLost: func(context.Context, string) error {
			if err := lost.Load(); err != nil {
				return *err
			}
			return nil
		},
	})
	if err := shares.Put(ctx, Share{HostID: "dev", Port: e.devPort, Expires: time.Now().Add(time.Hour), By: "admin"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, path    string
		lost          error
		status        int
		owner, viewer string
	}{
		{"hung", "/hang", nil, http.StatusGatewayTimeout, "Check its terminal on the host", "whoever shared the link can look at the dev server"},
		{"not HTTP", "/bad", nil, http.StatusBadGateway, "Is it an HTTP server", "whoever shared it can check that it is the dev server"},
		{"host gone mid-answer", "/bad", ErrHostUnavailable, http.StatusServiceUnavailable, "start or reconnect it", "Whoever shared this link can reconnect it"},
	} {
		lost.Store(&c.lost)
		for _, who := range []string{"viewer", "owner"} {
			req := pageLoad(t, ctx, http.MethodGet, e.pathURL(c.path))
			want, not := c.viewer, c.owner
			if who == "owner" {
				req.Header.Set("Authorization", "Bearer owner")
				want, not = c.owner, c.viewer
			}
			resp, body := doBounded(t, req)
			if resp.StatusCode != c.status || !strings.Contains(body, want) || strings.Contains(body, not) {
				t.Errorf("%s, the %s: %d, want %d saying %q and not %q: %s", c.name, who, resp.StatusCode, c.status, want, not, body)
			}
		}
	}
}
