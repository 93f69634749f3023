package forward

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/hostgate/hostgate/internal/testenv"
)

const testDomain = "preview.localhost"

// loopDial is the fake tunnel: host "dev" is this machine's loopback, host
// "nobody" does not exist, and other hosts are offline.
func loopDial(ctx context.Context, hostID string, port int) (net.Conn, error) {
	if hostID == "nobody" {
		return nil, fmt.Errorf("host %s: %w", hostID, ErrUnknownHost)
	}
	if hostID != "dev" {
		return nil, fmt.Errorf("host %s: %w", hostID, ErrHostUnavailable)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
}

func allowAll(*http.Request, string, int) (bool, string, error) { return true, "", nil }

type previewEnv struct {
	dev     *httptest.Server // the dev server on the "host"
	devPort int
	gw      *httptest.Server // the gateway serving the preview
	p       *Preview
}

func newPreviewEnv(t testing.TB, dev http.Handler, cfg *PreviewConfig) *previewEnv {
	t.Helper()
	e := &previewEnv{dev: httptest.NewServer(dev)}
	t.Cleanup(e.dev.Close)
	e.devPort = int(echoPort(t, e.dev.Listener.Addr().String()))
	if cfg == nil {
		cfg = &PreviewConfig{Authorize: allowAll}
	}
	if cfg.Domain == "" {
		cfg.Domain = testDomain
	}
	p, err := NewPreview(loopDial, cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.p = p
	e.gw = httptest.NewServer(p)
	t.Cleanup(func() { e.gw.Close(); p.Close() })
	return e
}

// pathURL is the path-form URL of path on the dev server.
func (e *previewEnv) pathURL(path string) string {
	return fmt.Sprintf("%s/preview/dev/%d%s", e.gw.URL, e.devPort, path)
}

// subReq is a subdomain-form request: sent to the gateway's address, with
// the preview host name in Host.
func (e *previewEnv) subReq(t testing.TB, ctx context.Context, method, path string, body io.Reader) *http.Request {
	req, err := http.NewRequestWithContext(ctx, method, e.gw.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = e.subHost()
	return req
}

func (e *previewEnv) subHost() string {
	_, gwPort, _ := net.SplitHostPort(e.gw.Listener.Addr().String())
	return SubdomainHost("dev", e.devPort, testDomain) + ":" + gwPort
}

func do(t testing.TB, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func get(t testing.TB, ctx context.Context, url string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return do(t, req)
}

// TestPreviewSSEIsNotBuffered: the dev server sends the second event only
// after the client read the first through the proxy; a buffering proxy
// would hang here until the deadline.
func TestPreviewSSEIsNotBuffered(t *testing.T) {
	ctx := testCtx(t)
	next := make(chan struct{})
	e := newPreviewEnv(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-next:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "data: two\n\n")
	}), nil)
	for _, form := range []string{"path", "subdomain"} {
		t.Run(form, func(t *testing.T) {
			next = make(chan struct{})
			req := e.subReq(t, ctx, http.MethodGet, "/events", nil)
			if form == "path" {
				req, _ = http.NewRequestWithContext(ctx, http.MethodGet, e.pathURL("/events"), nil)
			}
			req.Header.Set("Accept", "text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			line, err := br.ReadString('\n')
			if err != nil || line != "data: one\n" {
				t.Fatalf("first event: %q, %v", line, err)
			}
			close(next)
			rest, err := io.ReadAll(br)
			if err != nil || string(rest) != "\ndata: two\n\n" {
				t.Fatalf("second event: %q, %v", rest, err)
			}
		})
	}
}

// TestPreviewLargeUploadStreams sends 100 MiB; the client holds back all but
// the first MiB until the dev server has read that MiB, so a proxy that
// buffered the body would hang.
func TestPreviewLargeUploadStreams(t *testing.T) {
	ctx := testCtx(t)
	const total = 100 << 20
	gotFirst := make(chan struct{})
	e := newPreviewEnv(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.CopyN(h, r.Body, 1<<20)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		close(gotFirst)
		m, err := io.Copy(h, r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		fmt.Fprintf(w, "%d %x", n+m, h.Sum(nil))
	}), nil)

	pr, pw := io.Pipe()
	sent := sha256.New()
	go func() {
		rng := rand.New(rand.NewPCG(1, 2))
		data := rand.NewChaCha8([32]byte{1})
		buf := make([]byte, 64<<10)
		for written := 0; written < total; {
			if written == 1<<20 {
				select {
				case <-gotFirst:
				case <-ctx.Done():
					pw.CloseWithError(errors.New("dev server never saw the first MiB: the proxy buffers uploads"))
					return
				}
			}
			// Random chunk sizes exercise short writes.
			n := min(1+rng.IntN(len(buf)), total-written, (1<<20)-written%(1<<20))
			_, _ = data.Read(buf[:n])
			sent.Write(buf[:n])
			if _, err := pw.Write(buf[:n]); err != nil {
				return
			}
			written += n
		}
		pw.Close()
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, e.pathURL("/upload"), pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = total
	resp, body := do(t, req)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if want := fmt.Sprintf("%d %x", total, sent.Sum(nil)); body != want {
		t.Fatalf("dev server got %q, want %q", body, want)
	}
}

// echoHeaders answers with what the dev server saw.
func echoHeaders(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	http.SetCookie(w, &http.Cookie{Name: "hostgate_session", Value: "planted"})
	http.SetCookie(w, &http.Cookie{Name: "app", Value: "ok"})
	http.SetCookie(w, &http.Cookie{Name: "wide", Value: "1", Domain: testDomain}) // for every preview
	if r.URL.Path == "/redirect" {
		http.Redirect(w, r, "/landing", http.StatusFound)
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]string{
		"host": r.Host, "uri": r.RequestURI, "xff": r.Header.Get("X-Forwarded-For"),
		"xfh": r.Header.Get("X-Forwarded-Host"), "xfp": r.Header.Get("X-Forwarded-Proto"),
		"prefix": r.Header.Get("X-Forwarded-Prefix"), "cookie": r.Header.Get("Cookie"),
		"auth": r.Header.Get("Authorization"), "origin": r.Header.Get("Origin"),
	})
}

func TestPreviewUpstreamRequest(t *testing.T) {
	ctx := testCtx(t)
	e := newPreviewEnv(t, http.HandlerFunc(echoHeaders), nil)
	devHost := "localhost:" + strconv.Itoa(e.devPort)
	gwHost := e.gw.Listener.Addr().String()
	for _, tc := range []struct {
		form           string
		req            *http.Request
		uri, xfh, pref string
	}{
		{"path", mustReq(t, ctx, e.pathURL("/a%2Fb/c?x=1&y=%20")), "/a%2Fb/c?x=1&y=%20", gwHost, fmt.Sprintf("/preview/dev/%d", e.devPort)},
		{"subdomain", e.subReq(t, ctx, http.MethodGet, "/a%2Fb/c?x=1", nil), "/a%2Fb/c?x=1", e.subHost(), ""},
	} {
		t.Run(tc.form, func(t *testing.T) {
			tc.req.Header.Set("Cookie", "a=1; hostgate_session=SECRET; hostgate_preview=P")
			tc.req.Header.Add("Cookie", "b=2")
			tc.req.Header.Set("Authorization", "Bearer gateway-token")
			tc.req.Header.Set("X-Forwarded-For", "6.6.6.6") // a client must not forge this
			resp, body := do(t, tc.req)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			var got map[string]string
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{
				"host": devHost, "uri": tc.uri, "xff": "127.0.0.1", "xfh": tc.xfh, "xfp": "http",
				"prefix": tc.pref, "cookie": "a=1; b=2", "auth": "", "origin": "",
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
			// hostgate_session dropped; no cookie for a parent domain.
			wantCookies := []string{"app=ok", "wide=1"}
			if tc.form == "path" {
				wantCookies = []string{"app=ok; Path=" + tc.pref + "/", "wide=1; Path=" + tc.pref + "/"}
			}
			if sc := resp.Header.Values("Set-Cookie"); !slices.Equal(sc, wantCookies) {
				t.Errorf("Set-Cookie = %q, want %q", sc, wantCookies)
			}
			csp := resp.Header.Get("Content-Security-Policy")
			if sandboxed := strings.HasPrefix(csp, "sandbox"); sandboxed != (tc.form == "path") {
				t.Errorf("CSP %q: path form must be sandboxed, subdomain form not", csp)
			}
		})
	}

	// Path form: absolute redirects stay inside the preview.
	resp, _ := get(t, ctx, e.pathURL("/redirect"))
	if loc, want := resp.Header.Get("Location"), fmt.Sprintf("/preview/dev/%d/landing", e.devPort); loc != want {
		t.Errorf("Location = %q, want %q", loc, want)
	}
	// And the bare prefix gets its slash.
	resp, _ = get(t, ctx, strings.TrimSuffix(e.pathURL("/"), "/")+"?q=1")
	if loc, want := resp.Header.Get("Location"), fmt.Sprintf("/preview/dev/%d/?q=1", e.devPort); resp.StatusCode != http.StatusPermanentRedirect || loc != want {
		t.Errorf("bare prefix: %d %q, want 308 %q", resp.StatusCode, loc, want)
	}
}

func mustReq(t testing.TB, ctx context.Context, url string) *http.Request {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestPreviewClosedPortAndOfflineHost(t *testing.T) {
	ctx := testCtx(t)
	e := newPreviewEnv(t, http.NotFoundHandler(), nil)
	dead := echoPort(t, testenv.RefusedAddr(t))
	deadURL := fmt.Sprintf("%s/preview/dev/%d/", e.gw.URL, dead)

	resp, body := get(t, ctx, deadURL)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, `"code":"upstream_unavailable"`) ||
		!strings.Contains(body, fmt.Sprintf("port %d", dead)) {
		t.Fatalf("API client: %d %s", resp.StatusCode, body)
	}
	resp, body = get(t, ctx, deadURL, "Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
	if resp.StatusCode != http.StatusBadGateway || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(body, fmt.Sprintf("Nothing answered on port %d of host dev.", dead)) {
		t.Fatalf("browser: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	// A port that answers, but not with HTTP (an SSH server), is not
	// "nothing answered".
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "SSH-2.0-OpenSSH_9.2\r\n")
			_ = c.Close()
		}
	}()
	sshPort := echoPort(t, ln.Addr().String())
	resp, body = get(t, ctx, fmt.Sprintf("%s/preview/dev/%d/", e.gw.URL, sshPort))
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, `"code":"upstream_bad_response"`) || !strings.Contains(body, "answered, but not with an HTTP response") {
		t.Fatalf("a port that answers SSH: %d %s", resp.StatusCode, body)
	}
	resp, body = get(t, ctx, fmt.Sprintf("%s/preview/gone/%d/", e.gw.URL, e.devPort))
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, `"code":"host_offline"`) {
		t.Fatalf("offline host: %d %s", resp.StatusCode, body)
	}
	resp, body = get(t, ctx, fmt.Sprintf("%s/preview/nobody/%d/", e.gw.URL, e.devPort))
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, `"code":"not_found"`) || !strings.Contains(body, "no host nobody") {
		t.Fatalf("unknown host: %d %s", resp.StatusCode, body)
	}
	for _, p := range []string{"/preview/dev/0/", "/preview/dev/65536/", "/preview/dev/080/", "/preview/d%20v/80/", "/elsewhere"} {
		if resp, body := get(t, ctx, e.gw.URL+p); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d %s, want 404", p, resp.StatusCode, body)
		}
	}
}

func TestPreviewIsPrivateByDefault(t *testing.T) {
	ctx := testCtx(t)
	dev := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "secret page") })
	e := newPreviewEnv(t, dev, &PreviewConfig{})
	resp, body := get(t, ctx, e.pathURL("/"))
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, `"code":"unauthorized"`) {
		t.Fatalf("nil Authorize: %d %s, want 401 JSON", resp.StatusCode, body)
	}

	login := "http://gw.example/login?next=x"
	e = newPreviewEnv(t, dev, &PreviewConfig{Authorize: func(r *http.Request, host string, port int) (bool, string, error) {
		c, err := r.Cookie("hostgate_session")
		return err == nil && c.Value == "alice", login, nil
	}})
	browser := "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
	for _, tc := range []struct {
		name, accept string
		status       int
	}{
		{"browser", browser, http.StatusFound},
		{"fetch", "*/*", http.StatusUnauthorized},
		{"json", "application/json, text/html", http.StatusUnauthorized},
		{"curl", "", http.StatusUnauthorized},
	} {
		resp, body := get(t, ctx, e.pathURL("/"), "Accept", tc.accept)
		if resp.StatusCode != tc.status || strings.Contains(body, "secret") {
			t.Errorf("%s: %d %s, want %d", tc.name, resp.StatusCode, body, tc.status)
		}
		if tc.status == http.StatusFound && resp.Header.Get("Location") != login {
			t.Errorf("%s: Location %q, want %q", tc.name, resp.Header.Get("Location"), login)
		}
		if tc.status == http.StatusUnauthorized && !strings.Contains(body, `"code":"unauthorized"`) {
			t.Errorf("%s: body %s", tc.name, body)
		}
	}
	resp, body = get(t, ctx, e.pathURL("/"), "Cookie", "hostgate_session=alice")
	if resp.StatusCode != 200 || body != "secret page" {
		t.Fatalf("authorized: %d %s", resp.StatusCode, body)
	}
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestPreviewPublicShareExpires(t *testing.T) {
	ctx := testCtx(t)
	clock := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	shares := NewMemoryShares(clock.now)
	dev := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "shared page") })
	e := newPreviewEnv(t, dev, &PreviewConfig{Shares: shares})

	if resp, _ := get(t, ctx, e.pathURL("/")); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("before sharing: %d, want 401", resp.StatusCode)
	}
	if err := shares.Put(ctx, Share{HostID: "dev", Port: e.devPort, Expires: clock.now().Add(time.Hour), By: "admin"}); err != nil {
		t.Fatal(err)
	}
	if resp, body := get(t, ctx, e.pathURL("/")); resp.StatusCode != 200 || body != "shared page" {
		t.Fatalf("shared: %d %s", resp.StatusCode, body)
	}
	if resp, body := do(t, e.subReq(t, ctx, http.MethodGet, "/", nil)); resp.StatusCode != 200 || body != "shared page" {
		t.Fatalf("shared, subdomain: %d %s", resp.StatusCode, body)
	}
	if resp, _ := get(t, ctx, fmt.Sprintf("%s/preview/dev/%d/", e.gw.URL, e.devPort+1)); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("another port: %d, want 401", resp.StatusCode)
	}
	if l, _ := shares.List(ctx); len(l) != 1 {
		t.Fatalf("List = %v", l)
	}
	clock.add(time.Hour - time.Second)
	if resp, _ := get(t, ctx, e.pathURL("/")); resp.StatusCode != 200 {
		t.Fatalf("a second before expiry: %d", resp.StatusCode)
	}
	clock.add(time.Second)
	if resp, body := get(t, ctx, e.pathURL("/")); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("expired: %d %s, want 401", resp.StatusCode, body)
	}
	if l, _ := shares.List(ctx); len(l) != 0 {
		t.Fatalf("List after expiry = %v", l)
	}
	if err := shares.Put(ctx, Share{HostID: "dev", Port: 1, Expires: clock.now()}); err == nil {
		t.Fatal("Put accepted an expiry that is not in the future")
	}
}

// failingShares is a share store that cannot answer.
type failingShares struct{}

func (failingShares) Lookup(context.Context, string, int) (Share, bool, error) {
	return Share{}, false, errors.New("database is locked")
}

// A request the proxy cannot decide on (the share store fails, the
// gateway says its token state is unknown, a ticket cannot be checked)
// is answered 503 store_unavailable, not 401: a 401 told the visitor of a
// public share that the port was private, and sent a browser whose
// preview cookie was good to log in again.
func TestPreviewUnavailableFailsClosed(t *testing.T) {
	ctx := testCtx(t)
	dev := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "page") })
	var unknown atomic.Bool
	unknown.Store(true)
	e := newPreviewEnv(t, dev, &PreviewConfig{
		Shares: failingShares{},
		Redeem: func(context.Context, string, string, int) (string, time.Time, error) {
			return "", time.Time{}, fmt.Errorf("checking the ticket: %w", ErrUnavailable)
		},
	})
	resp, body := get(t, ctx, e.pathURL("/"))
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, `"code":"store_unavailable"`) {
		t.Fatalf("share store failing: %d %s, want 503 store_unavailable", resp.StatusCode, body)
	}
	resp, body = do(t, e.subReq(t, ctx, http.MethodGet, "/.hostgate/auth?ticket=good&next=/", nil))
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, `"code":"store_unavailable"`) {
		t.Fatalf("ticket not checkable: %d %s, want 503 store_unavailable", resp.StatusCode, body)
	}

	e = newPreviewEnv(t, dev, &PreviewConfig{
		Authorize: func(*http.Request, string, int) (bool, string, error) {
			if unknown.Load() {
				return false, "/login", errors.New("no token snapshot")
			}
			return false, "/login", nil
		},
	})
	req := e.subReq(t, ctx, http.MethodGet, "/", nil)
	req.Header.Set("Accept", "text/html")
	resp, body = do(t, req)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "cannot check access") {
		t.Fatalf("authorization unknown: %d %s, want the 503 page", resp.StatusCode, body)
	}
	unknown.Store(false)
	resp, _ = do(t, e.subReq(t, ctx, http.MethodGet, "/", nil))
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("authorization known and refused: %d, want 401", resp.StatusCode)
	}
}

// Credentials that are good but do not cover the host (Authorize's
// *ForbiddenError) are answered 403 forbidden with what and why, to an API
// client and a browser alike, where they got 401 "Log in to see this
// preview" (or a login page) as if they were missing; a public share
// still lets them in.
func TestPreviewForbidden(t *testing.T) {
	ctx := testCtx(t)
	dev := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "page") })
	shares := NewMemoryShares(time.Now)
	e := newPreviewEnv(t, dev, &PreviewConfig{Shares: shares, Authorize: func(r *http.Request, host string, _ int) (bool, string, error) {
		if r.Header.Get("Authorization") == "Bearer other" {
			return false, "/login", &ForbiddenError{Msg: "Host " + host + " is not among the hosts this token reaches.", Hint: "Ask for a token for it."}
		}
		return false, "/login", nil
	}})
	req := func(accept string) *http.Request {
		r, _ := http.NewRequestWithContext(ctx, "GET", e.pathURL("/"), nil)
		r.Header.Set("Authorization", "Bearer other")
		if accept != "" {
			r.Header.Set("Accept", accept)
		}
		return r
	}
	resp, body := do(t, req("application/json"))
	want := `{"error":{"code":"forbidden","message":"Host dev is not among the hosts this token reaches. Ask for a token for it."}}` + "\n"
	if resp.StatusCode != http.StatusForbidden || body != want || resp.Header.Get("WWW-Authenticate") != "" || resp.Header.Get(errorHeader) != "forbidden" {
		t.Fatalf("a token for other hosts: %d %q (WWW-Authenticate %q), want 403 %s", resp.StatusCode, body, resp.Header.Get("WWW-Authenticate"), want)
	}
	resp, body = do(t, req("text/html"))
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "Host dev is not among the hosts this token reaches.") {
		t.Fatalf("a token for other hosts, asking for HTML: %d %q, want the 403 page, not the login", resp.StatusCode, body)
	}
	// Missing credentials still get 401.
	if resp, _ := get(t, ctx, e.pathURL("/")); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no credentials: %d, want 401", resp.StatusCode)
	}
	if err := shares.Put(ctx, Share{HostID: "dev", Port: e.devPort, Expires: time.Now().Add(time.Hour), By: "admin"}); err != nil {
		t.Fatal(err)
	}
	if resp, body := do(t, req("")); resp.StatusCode != http.StatusOK || body != "page" {
		t.Fatalf("a token for other hosts on a shared port: %d %q, want the page", resp.StatusCode, body)
	}
}

func TestPreviewWebSocketEcho(t *testing.T) {
	ctx := testCtx(t)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	dev := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wg.Add(1)
		defer wg.Done()
		// Default options: coder/websocket refuses an Origin that differs
		// from Host, as browsers' preview pages would without the proxy's
		// Origin rewrite.
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			typ, b, err := c.Read(r.Context())
			if err != nil {
				return
			}
			if err := c.Write(r.Context(), typ, append([]byte("echo: "), b...)); err != nil {
				return
			}
		}
	})
	e := newPreviewEnv(t, dev, nil)
	wsURL := "ws" + strings.TrimPrefix(e.gw.URL, "http")
	for _, tc := range []struct {
		form, url, host, origin string
	}{
		{"path", wsURL + fmt.Sprintf("/preview/dev/%d/ws", e.devPort), "", ""},
		{"subdomain", wsURL + "/ws", e.subHost(), "http://" + e.subHost()},
		// Behind a proxy that passes Host without its port (nginx's
		// `proxy_set_header Host $host`) on a port of its own: the page's
		// Origin names the port, Host does not, and the dev server
		// refused the preview's own page.
		{"subdomain behind a port-dropping proxy", wsURL + "/ws", SubdomainHost("dev", e.devPort, testDomain), "https://" + SubdomainHost("dev", e.devPort, testDomain) + ":8443"},
	} {
		t.Run(tc.form, func(t *testing.T) {
			hdr := http.Header{}
			if tc.origin != "" {
				hdr.Set("Origin", tc.origin)
			}
			c, resp, err := websocket.Dial(ctx, tc.url, &websocket.DialOptions{Host: tc.host, HTTPHeader: hdr})
			if err != nil {
				t.Fatalf("dial: %v (%v)", err, resp)
			}
			defer c.CloseNow()
			for i := range 3 {
				msg := fmt.Sprintf("hello %d", i)
				if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
					t.Fatal(err)
				}
				_, b, err := c.Read(ctx)
				if err != nil || string(b) != "echo: "+msg {
					t.Fatalf("read %q, %v", b, err)
				}
			}
			c.Close(websocket.StatusNormalClosure, "")
		})
	}
	// A page of another site keeps its Origin and is refused by the dev
	// server.
	hdr := http.Header{"Origin": {"http://evil.example"}}
	if c, _, err := websocket.Dial(ctx, wsURL+"/ws", &websocket.DialOptions{Host: e.subHost(), HTTPHeader: hdr}); err == nil {
		c.CloseNow()
		t.Fatal("foreign origin reached the dev server's WebSocket")
	}
	// So does one behind the port-dropping proxy.
	hdr = http.Header{"Origin": {"https://evil.example:8443"}}
	if c, _, err := websocket.Dial(ctx, wsURL+"/ws", &websocket.DialOptions{Host: SubdomainHost("dev", e.devPort, testDomain), HTTPHeader: hdr}); err == nil {
		c.CloseNow()
		t.Fatal("foreign origin reached the dev server's WebSocket through a Host without a port")
	}
}

func TestPreviewTicketRedeem(t *testing.T) {
	ctx := testCtx(t)
	dev := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "app") })
	var redeemed []string
	e := newPreviewEnv(t, dev, &PreviewConfig{
		Redeem: func(_ context.Context, ticket, host string, port int) (string, time.Time, error) {
			redeemed = append(redeemed, fmt.Sprintf("%s %s %d", ticket, host, port))
			if ticket != "good" {
				return "", time.Time{}, errors.New("bad ticket")
			}
			return "preview-session-1", time.Now().Add(time.Hour), nil
		},
		Authorize: func(r *http.Request, _ string, _ int) (bool, string, error) {
			c, err := r.Cookie("hostgate_preview")
			return err == nil && c.Value == "preview-session-1", "/login", nil
		},
	})
	resp, _ := do(t, e.subReq(t, ctx, http.MethodGet, "/.hostgate/auth?ticket=good&next=/app%3Fx%3D1", nil))
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/app?x=1" {
		t.Fatalf("redeem: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	cs := resp.Cookies()
	if len(cs) != 1 || cs[0].Name != "hostgate_preview" || cs[0].Value != "preview-session-1" || !cs[0].HttpOnly || cs[0].Domain != "" {
		t.Fatalf("cookie %+v: want host-only HttpOnly hostgate_preview", cs)
	}
	if want := fmt.Sprintf("good dev %d", e.devPort); len(redeemed) != 1 || redeemed[0] != want {
		t.Fatalf("Redeem calls %q, want %q", redeemed, want)
	}
	req := e.subReq(t, ctx, http.MethodGet, "/app", nil)
	req.AddCookie(cs[0])
	if resp, body := do(t, req); resp.StatusCode != 200 || body != "app" {
		t.Fatalf("with the preview cookie: %d %s", resp.StatusCode, body)
	}
	resp, _ = do(t, e.subReq(t, ctx, http.MethodGet, "/.hostgate/auth?ticket=bad&next=/", nil))
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Fatalf("bad ticket: %d %v", resp.StatusCode, resp.Cookies())
	}
	for _, next := range []string{"//evil.example/", "/\\evil.example", "http://evil.example/", "/%09/evil.example", "/%0A/evil.example"} {
		resp, _ = do(t, e.subReq(t, ctx, http.MethodGet, "/.hostgate/auth?ticket=good&next="+next, nil))
		if loc := resp.Header.Get("Location"); loc != "/" {
			t.Errorf("next=%s: redirected to %q, want /", next, loc)
		}
	}
}

// TestPreviewCookieSecureBehindTLSProxy: behind a TLS-terminating proxy
// the request the gateway sees has no TLS, yet with SecureCookie the
// preview cookie is Secure; it never was, so a browser would send it over
// plain http too.
func TestPreviewCookieSecureBehindTLSProxy(t *testing.T) {
	ctx := testCtx(t)
	dev := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "app") })
	redeem := func(context.Context, string, string, int) (string, time.Time, error) {
		return "preview-session-1", time.Now().Add(time.Hour), nil
	}
	for _, secure := range []bool{true, false} {
		e := newPreviewEnv(t, dev, &PreviewConfig{Redeem: redeem, SecureCookie: secure})
		resp, _ := do(t, e.subReq(t, ctx, http.MethodGet, "/.hostgate/auth?ticket=good&next=/", nil))
		cs := resp.Cookies()
		if resp.StatusCode != http.StatusSeeOther || len(cs) != 1 {
			t.Fatalf("SecureCookie %v: redeem %d, cookies %v", secure, resp.StatusCode, cs)
		}
		if cs[0].Secure != secure {
			t.Errorf("SecureCookie %v: cookie %q, want Secure %v", secure, resp.Header.Get("Set-Cookie"), secure)
		}
	}
}

// TestPreviewDropsClearSiteData: a dev server's Clear-Site-Data reaches
// the browser in neither form. It passed through, and in the path form,
// on the gateway's origin, "cookies" logged the viewer out of the gateway.
func TestPreviewDropsClearSiteData(t *testing.T) {
	ctx := testCtx(t)
	dev := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Clear-Site-Data", `"cookies", "storage", "cache"`)
		io.WriteString(w, "cleared")
	})
	e := newPreviewEnv(t, dev, nil)
	path, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.pathURL("/logout"), nil)
	for name, req := range map[string]*http.Request{"path form": path, "subdomain form": e.subReq(t, ctx, http.MethodGet, "/logout", nil)} {
		resp, body := do(t, req)
		if resp.StatusCode != http.StatusOK || body != "cleared" {
			t.Fatalf("%s: %d %q, want the dev server's answer", name, resp.StatusCode, body)
		}
		if v := resp.Header.Values("Clear-Site-Data"); len(v) != 0 {
			t.Errorf("%s: Clear-Site-Data %q reached the browser", name, v)
		}
	}
}

func TestNewPreviewRejectsBadConfig(t *testing.T) {
	for _, c := range []*PreviewConfig{{PathPrefix: "preview"}, {Domain: "preview.localhost:8080"}} {
		if _, err := NewPreview(loopDial, c); err == nil {
			t.Errorf("NewPreview(%+v) = nil error", c)
		}
	}
	if _, err := NewPreview(nil, nil); err == nil {
		t.Error("NewPreview(nil dial) = nil error")
	}
}

func TestParseSubdomain(t *testing.T) {
	for _, tc := range []struct {
		host string
		id   string
		port int
	}{
		{"3000--local.preview.localhost", "local", 3000},
		{"3000--local.preview.localhost:8080", "local", 3000},
		{"8080--My-Box.Preview.Localhost.", "my-box", 8080},
		{"1--a--b.preview.localhost", "a--b", 1},
	} {
		id, port, ok := parseSubdomain(tc.host, testDomain)
		if !ok || id != tc.id || port != tc.port {
			t.Errorf("parseSubdomain(%q) = %q, %d, %v", tc.host, id, port, ok)
		}
	}
	for _, h := range []string{"preview.localhost", "3000.preview.localhost", "--local.preview.localhost",
		"0--local.preview.localhost", "3000--.preview.localhost", "3000--a.b.preview.localhost",
		"3000--local.evilpreview.localhost", "3000--local-.preview.localhost", "99999--x.preview.localhost"} {
		if id, port, ok := parseSubdomain(h, testDomain); ok {
			t.Errorf("parseSubdomain(%q) = %q, %d; want no match", h, id, port)
		}
	}
}

func TestParsePreviewPath(t *testing.T) {
	id, port, rest, ok := ParsePreviewPath("/preview/local/3000/a%2Fb/c", "/preview/")
	if !ok || id != "local" || port != 3000 || rest != "/a%2Fb/c" {
		t.Errorf("ParsePreviewPath = %q, %d, %q, %v; want local, 3000, /a%%2Fb/c", id, port, rest, ok)
	}
	for _, p := range []string{"/preview/local/3000", "/preview/local/03000/", "/preview/lo%2Fcal/3000/", "/other/local/3000/"} {
		if id, port, rest, ok := ParsePreviewPath(p, "/preview/"); ok {
			t.Errorf("ParsePreviewPath(%q) = %q, %d, %q; want no match", p, id, port, rest)
		}
	}
}

func FuzzPreviewRoute(f *testing.F) {
	f.Add("3000--local.preview.localhost:80", "/preview/local/3000/a%2Fb")
	f.Add("x", "/preview/a/1")
	f.Fuzz(func(t *testing.T, host, path string) {
		if id, port, ok := parseSubdomain(host, testDomain); ok {
			if validHostID(id) != nil || port < 1 || port > 65535 {
				t.Fatalf("parseSubdomain(%q) = %q, %d", host, id, port)
			}
			// Round trip: the canonical name parses to the same target.
			if id2, port2, ok := parseSubdomain(SubdomainHost(id, port, testDomain), testDomain); !ok || id2 != id || port2 != port {
				t.Fatalf("round trip of %q: %q %d %v", host, id2, port2, ok)
			}
		}
		tg, err := parsePreviewPath(path, "/preview/")
		if err == nil || errors.Is(err, errNeedSlash) {
			if validHostID(tg.hostID) != nil || tg.port < 1 || tg.port > 65535 || !strings.HasPrefix(tg.rawPath, "/") ||
				!strings.HasPrefix(path, tg.prefix) {
				t.Fatalf("parsePreviewPath(%q) = %+v", path, tg)
			}
		}
	})
}

func FuzzStripCookies(f *testing.F) {
	f.Add("a=1; hostgate_session=x; b=2")
	f.Add("hostgate_session=x")
	f.Add(";;= ; hostgate_preview ;")
	f.Fuzz(func(t *testing.T, line string) {
		h := http.Header{"Cookie": {line}}
		stripCookies(h, "hostgate_session", "hostgate_preview")
		r := &http.Request{Header: h}
		for _, c := range r.Cookies() {
			if c.Name == "hostgate_session" || c.Name == "hostgate_preview" {
				t.Fatalf("%q: %s survived as %q", line, c.Name, h.Get("Cookie"))
			}
		}
		again := h.Clone()
		stripCookies(again, "hostgate_session", "hostgate_preview")
		if again.Get("Cookie") != h.Get("Cookie") {
			t.Fatalf("not idempotent: %q then %q", h.Get("Cookie"), again.Get("Cookie"))
		}
	})
}

// TestPreviewNotFoundNamesTheOrigin: the 404 of a path that is no preview
// shows the subdomain form as its caller reaches it: https behind a TLS
// proxy (SecureCookie), and the port of the gateway's address.
func TestPreviewNotFoundNamesTheOrigin(t *testing.T) {
	for _, tc := range []struct {
		secure bool
		url    string
		want   string
	}{
		{true, "http://gw.example/preview/dev/abc/", "Previews live at https://{port}--{host}." + testDomain + "/ or /preview/{host}/{port}/."},
		{false, "http://127.0.0.1:8080/preview/dev/abc/", "Previews live at http://{port}--{host}." + testDomain + ":8080/ or /preview/{host}/{port}/."},
	} {
		p, err := NewPreview(loopDial, &PreviewConfig{Domain: testDomain, SecureCookie: tc.secure})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, tc.url, nil)
		p.ServeHTTP(rec, r)
		p.Close()
		var body struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		if rec.Code != http.StatusNotFound || body.Error.Code != "not_found" || !strings.HasSuffix(body.Error.Message, tc.want) {
			t.Errorf("GET %s (secure %v): %d %q, want 404 ending %q", tc.url, tc.secure, rec.Code, body.Error.Message, tc.want)
		}
	}
}

func TestPreviewMatch(t *testing.T) {
	p, err := NewPreview(loopDial, &PreviewConfig{Domain: testDomain})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, tc := range []struct {
		host, path string
		want       bool
	}{
		{"3000--dev.preview.localhost:8080", "/anything", true},
		{"gw.example", "/preview/dev/3000/", true},
		{"gw.example", "/v1/hosts", false},
		{"preview.localhost", "/", false},
		{"gw.preview.localhost", "/", false},
		// Meant as previews but not one: the preview's 404, not the
		// gateway's pages.
		{"abc--dev.preview.localhost", "/", true},
		{"99999--dev.preview.localhost", "/", true},
		{"3000--a.b.preview.localhost", "/", true},
		{"x.3000--dev.preview.localhost", "/", true},
	} {
		r := httptest.NewRequest(http.MethodGet, "http://"+tc.host+tc.path, nil)
		if got := p.Match(r); got != tc.want {
			t.Errorf("Match(%s%s) = %v, want %v", tc.host, tc.path, got, tc.want)
		}
		if !tc.want || strings.HasPrefix(tc.path, "/preview/") || tc.host == "3000--dev.preview.localhost:8080" {
			continue
		}
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, r)
		if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "No preview here") {
			t.Errorf("GET http://%s%s: %d %s, want 404 No preview here", tc.host, tc.path, rec.Code, rec.Body)
		}
	}
}

// An anonymous WebSocket upgrade from a browser page gets 401, not a
// redirect it could not follow.
func TestPreviewAnonymousWebSocketIs401(t *testing.T) {
	ctx := testCtx(t)
	e := newPreviewEnv(t, http.NotFoundHandler(), &PreviewConfig{
		Authorize: func(*http.Request, string, int) (bool, string, error) { return false, "/login", nil },
	})
	_, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(e.pathURL("/ws"), "http"),
		&websocket.DialOptions{HTTPHeader: http.Header{"Accept": {"text/html"}}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("anonymous upgrade: %v, %v; want 401", resp, err)
	}
}

// Requests through a host's public shares are bounded, so that held-open
// share requests cannot take every channel the host's previews share: the
// one past the bound is told the preview is busy, and a slot freed serves
// the next.
func TestPreviewShareBounded(t *testing.T) {
	ctx := testCtx(t)
	shares := NewMemoryShares(time.Now)
	release := make(chan struct{})
	var inside sync.WaitGroup
	dev := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			inside.Done()
			<-release
		}
		io.WriteString(w, "shared page")
	})
	e := newPreviewEnv(t, dev, &PreviewConfig{Shares: shares, Authorize: func(r *http.Request, _ string, _ int) (bool, string, error) {
		return r.Header.Get("Authorization") == "Bearer owner", "", nil
	}})
	if err := shares.Put(ctx, Share{HostID: "dev", Port: e.devPort, Expires: time.Now().Add(time.Hour), By: "admin"}); err != nil {
		t.Fatal(err)
	}
	inside.Add(maxSharedPerHost)
	done := make(chan int, maxSharedPerHost)
	for range maxSharedPerHost {
		go func() {
			resp, _ := get(t, ctx, e.pathURL("/hold"))
			done <- resp.StatusCode
		}()
	}
	inside.Wait()
	if resp, body := get(t, ctx, e.pathURL("/")); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "busy") {
		t.Fatalf("past the bound: %d %s, want 503 busy", resp.StatusCode, body)
	}
	// The host's own users are not share traffic: never held back.
	req, _ := http.NewRequestWithContext(ctx, "GET", e.pathURL("/"), nil)
	req.Header.Set("Authorization", "Bearer owner")
	if resp, body := do(t, req); resp.StatusCode != http.StatusOK || body != "shared page" {
		t.Fatalf("the owner while the shares are full: %d %s", resp.StatusCode, body)
	}
	close(release)
	for range maxSharedPerHost {
		if code := <-done; code != http.StatusOK {
			t.Errorf("a held share request: %d", code)
		}
	}
	if resp, body := get(t, ctx, e.pathURL("/")); resp.StatusCode != http.StatusOK || body != "shared page" {
		t.Fatalf("after the slots freed: %d %s", resp.StatusCode, body)
	}
}

// A server in front of the preview may bound the arrival of bodies it has
// not accepted (the gateway does); an upload the preview proxies is
// accepted, and may arrive more slowly than that bound.
func TestPreviewSlowUploadOutlivesBodyDeadline(t *testing.T) {
	ctx := testCtx(t)
	e := newPreviewEnv(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		fmt.Fprintf(w, "%s", b)
	}), nil)
	const deadline = 100 * time.Millisecond
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(deadline))
		e.p.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)

	pr, pw := io.Pipe()
	go func() {
		for _, part := range []string{"slow ", "but ", "whole"} {
			time.Sleep(2 * deadline)
			if _, err := pw.Write([]byte(part)); err != nil {
				return
			}
		}
		pw.Close()
	}()
	url := fmt.Sprintf("%s/preview/dev/%d/upload", front.URL, e.devPort)
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(len("slow but whole"))
	resp, body := do(t, req)
	if resp.StatusCode != 200 || body != "slow but whole" {
		t.Fatalf("status %d: %q; want 200 with the whole upload", resp.StatusCode, body)
	}
}

// A request ended before the dev server answered (the server stopping, a
// body cut short) is answered as a failure, not with an empty 200.
func TestPreviewCancelledIsNot200(t *testing.T) {
	ctx := testCtx(t)
	e := newPreviewEnv(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}), nil)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		time.AfterFunc(100*time.Millisecond, cancel)
		e.p.ServeHTTP(w, r.WithContext(rctx))
	}))
	t.Cleanup(front.Close)
	resp, body := do(t, mustReq(t, ctx, fmt.Sprintf("%s/preview/dev/%d/", front.URL, e.devPort)))
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "cancelled") {
		t.Fatalf("status %d: %q; want 503 cancelled", resp.StatusCode, body)
	}
}

// FuzzHostOnlyCookies: no cookie a subdomain preview passes on carries a
// Domain as a browser reads the line, its name and value are the dev
// server's word for word, and a second pass changes nothing.
func FuzzHostOnlyCookies(f *testing.F) {
	f.Add("a=1; Domain=preview.localhost; Path=/")
	f.Add("b=2; Max-Age=60")
	f.Add("=; Domain=")
	f.Add(`p="{\"a\": 1}"; Domain=preview.localhost; Domain=`)
	f.Fuzz(func(t *testing.T, line string) {
		h := http.Header{"Set-Cookie": {line, "keep=1"}}
		hostOnlyCookies(h)
		for _, l := range h.Values("Set-Cookie") {
			if browserReads(l).domain {
				t.Fatalf("%q became %q", line, l)
			}
			if pair, _, _ := strings.Cut(l, ";"); l != "keep=1" && !strings.HasPrefix(line, pair+";") && line != pair {
				t.Fatalf("%q became %q: another name or value", line, l)
			}
		}
		again := h.Clone()
		hostOnlyCookies(again)
		if !slices.Equal(again.Values("Set-Cookie"), h.Values("Set-Cookie")) {
			t.Fatalf("not idempotent: %q then %q", h.Values("Set-Cookie"), again.Values("Set-Cookie"))
		}
	})
}

// Count counts the live shares that match, not the expired ones.
func TestMemorySharesCount(t *testing.T) {
	ctx := testCtx(t)
	clock := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	s := NewMemoryShares(clock.now)
	for i, tok := range []string{"a", "a", "b"} {
		if err := s.Put(ctx, Share{HostID: "h", Port: 1 + i, TokenID: tok, Expires: clock.now().Add(time.Duration(i+1) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	isA := func(sh Share) bool { return sh.TokenID == "a" }
	if n := s.Count(isA); n != 2 {
		t.Fatalf("Count = %d, want 2", n)
	}
	clock.add(time.Minute)
	if n := s.Count(isA); n != 1 {
		t.Fatalf("Count after one expired = %d, want 1", n)
	}
}

// A full store takes a new share once some have expired, and refuses one
// while all live; replacing a live share never counts as a new one.
func TestMemorySharesFull(t *testing.T) {
	ctx := testCtx(t)
	clock := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	s := NewMemoryShares(clock.now)
	s.max = 3
	for i := range 3 {
		if err := s.Put(ctx, Share{HostID: "h", Port: 1 + i, Expires: clock.now().Add(time.Duration(i+1) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put(ctx, Share{HostID: "h", Port: 9, Expires: clock.now().Add(time.Hour)}); !errors.Is(err, ErrTooManyShares) {
		t.Fatalf("Put into a full store: %v, want ErrTooManyShares", err)
	}
	if err := s.Put(ctx, Share{HostID: "h", Port: 3, Expires: clock.now().Add(time.Hour)}); err != nil {
		t.Fatalf("replacing a share in a full store: %v", err)
	}
	clock.add(time.Minute)
	if err := s.Put(ctx, Share{HostID: "h", Port: 9, Expires: clock.now().Add(time.Hour)}); err != nil {
		t.Fatalf("Put once one expired: %v", err)
	}
	if l, _ := s.List(ctx); len(l) != 3 {
		t.Fatalf("%d shares listed, want 3", len(l))
	}
}

// BenchmarkMemorySharesLoad puts 10 000 shares into an empty store, as the
// gateway does with its stored shares at start.
func BenchmarkMemorySharesLoad(b *testing.B) {
	ctx := context.Background()
	exp := time.Now().Add(time.Hour)
	for b.Loop() {
		s := NewMemoryShares(nil)
		for i := range 10000 {
			if err := s.Put(ctx, Share{HostID: fmt.Sprintf("h%d", i/1000), Port: 1 + i%1000, Expires: exp}); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// Idle upstream connections are bounded over all targets, not only per
// target: with MaxIdleConns 2, four targets' keep-alive connections leave
// two open. Without the bound each port kept up to 8 for 30 s.
func TestPreviewIdleConnsBounded(t *testing.T) {
	ctx := testCtx(t)
	var mu sync.Mutex
	open := 0
	dev := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	dev.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		mu.Lock()
		defer mu.Unlock()
		switch st {
		case http.StateNew:
			open++
		case http.StateClosed, http.StateHijacked:
			open--
		}
	}
	var devs []*httptest.Server
	for range 4 {
		d := httptest.NewUnstartedServer(dev.Config.Handler)
		d.Config.ConnState = dev.Config.ConnState
		d.Start()
		t.Cleanup(d.Close)
		devs = append(devs, d)
	}
	p, err := NewPreview(loopDial, &PreviewConfig{Authorize: allowAll, Domain: testDomain, MaxIdleConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(p)
	t.Cleanup(func() { gw.Close(); p.Close() })
	for _, d := range devs {
		resp, body := get(t, ctx, fmt.Sprintf("%s/preview/dev/%d/", gw.URL, echoPort(t, d.Listener.Addr().String())))
		if resp.StatusCode != http.StatusOK || body != "ok" {
			t.Fatalf("preview: %d %q", resp.StatusCode, body)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := open
		mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d upstream connections open after 4 targets, want 2 (MaxIdleConns)", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// writeCounter counts the writes the gateway's server makes to its
// accepted connections.
type writeCounter struct {
	net.Listener
	writes atomic.Int64
}

func (l *writeCounter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countedConn{Conn: c, n: &l.writes}, nil
}

type countedConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countedConn) Write(p []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(p)
}

// A small page reaches the client in one write, its headers and body
// together. ReverseProxy's immediate flushing (FlushInterval -1) also
// flushed the headers alone from a timer goroutine started for every
// response: a second write (and segment, and wake-up of the client) for
// most responses, and a goroutine each.
func TestPreviewSmallResponseIsOneWrite(t *testing.T) {
	ctx := testCtx(t)
	dev := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(dev.Close)
	p, err := NewPreview(loopDial, &PreviewConfig{Authorize: allowAll, Domain: testDomain})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewUnstartedServer(p)
	wc := &writeCounter{Listener: gw.Listener}
	gw.Listener = wc
	gw.Start()
	t.Cleanup(func() { gw.Close(); p.Close() })
	url := fmt.Sprintf("%s/preview/dev/%d/", gw.URL, echoPort(t, dev.Listener.Addr().String()))
	const n = 40
	for range n {
		if _, body := get(t, ctx, url); body != "ok" {
			t.Fatalf("body %q", body)
		}
	}
	if got := wc.writes.Load(); got != n {
		t.Fatalf("%d small responses took %d writes to the client; want one each", n, got)
	}
}

// TestPreviewRedirectToUpstreamHost: a dev server that builds absolute
// redirects from the Host header the proxy sent it ("localhost:{port}",
// as Spring Security's login redirect and older Tomcats do) keeps the
// browser in the preview: the Location becomes a path there, in both
// forms. It sent the browser to localhost on the viewer's own machine.
// Redirects to anywhere else pass unchanged.
func TestPreviewRedirectToUpstreamHost(t *testing.T) {
	ctx := testCtx(t)
	var devPort atomic.Int64 // set once the dev server listens
	e := newPreviewEnv(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		port := strconv.FormatInt(devPort.Load(), 10)
		to := map[string]string{
			"/host":     "http://" + r.Host + "/login?next=%2Fapp#top",
			"/loopback": "http://127.0.0.1:" + port + "/landing",
			"/v6":       "http://[::1]:" + port,
			"/double":   "http://" + r.Host + "//evil.example/x",
			"/other":    "http://localhost:1/elsewhere",
			"/away":     "https://example.com/x",
		}[r.URL.Path]
		http.Redirect(w, r, to, http.StatusFound)
	}), nil)
	devPort.Store(int64(e.devPort))
	for _, tc := range []struct{ path, want string }{
		{"/host", "/login?next=%2Fapp#top"},
		{"/loopback", "/landing"},
		{"/v6", "/"},
		{"/double", "/evil.example/x"},
		{"/other", "http://localhost:1/elsewhere"},
		{"/away", "https://example.com/x"},
	} {
		resp, _ := do(t, e.subReq(t, ctx, "GET", tc.path, nil))
		if loc := resp.Header.Get("Location"); loc != tc.want {
			t.Errorf("subdomain %s: Location %q, want %q", tc.path, loc, tc.want)
		}
		want := tc.want
		if strings.HasPrefix(want, "/") {
			want = fmt.Sprintf("/preview/dev/%d%s", e.devPort, want)
		}
		resp, _ = get(t, ctx, e.pathURL(tc.path))
		if loc := resp.Header.Get("Location"); loc != want {
			t.Errorf("path form %s: Location %q, want %q", tc.path, loc, want)
		}
	}
}

// TestPreviewSiblingPreflight: a CORS preflight from the preview of
// another port of the same host is answered by the preview (browsers send
// preflights without cookies, so none could be authorized: a frontend's
// JSON POST to its backend's port failed however logged in the viewer
// was); the dev server never sees it. Preflights from another host's
// preview, from the same origin, without a requested method, or in the
// path form go on as before (private: 401 here).
func TestPreviewSiblingPreflight(t *testing.T) {
	ctx := testCtx(t)
	var reached atomic.Int32
	e := newPreviewEnv(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached.Add(1) }),
		&PreviewConfig{Authorize: func(*http.Request, string, int) (bool, string, error) { return false, "", nil }})
	_, gwPort, _ := net.SplitHostPort(e.gw.Listener.Addr().String())
	sibling := "http://" + SubdomainHost("dev", 5173, testDomain) + ":" + gwPort
	preflight := func(req *http.Request, origin, method string) *http.Response {
		req.Header.Set("Origin", origin)
		if method != "" {
			req.Header.Set("Access-Control-Request-Method", method)
		}
		req.Header.Set("Access-Control-Request-Headers", "content-type,x-app")
		resp, _ := do(t, req)
		return resp
	}

	resp := preflight(e.subReq(t, ctx, http.MethodOptions, "/api/items", nil), sibling, "POST")
	h := resp.Header
	if resp.StatusCode != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != sibling ||
		h.Get("Access-Control-Allow-Credentials") != "true" || h.Get("Access-Control-Allow-Methods") != "POST" ||
		h.Get("Access-Control-Allow-Headers") != "content-type,x-app" {
		t.Fatalf("sibling preflight: %d %v, want 204 allowing %s with credentials, POST, content-type,x-app", resp.StatusCode, h, sibling)
	}

	for _, tc := range []struct {
		name, origin, method string
		path                 bool
	}{
		{"another host's preview", "http://" + SubdomainHost("evil", 5173, testDomain) + ":" + gwPort, "POST", false},
		{"same origin", "http://" + e.subHost(), "POST", false},
		{"a foreign site", "https://example.com", "POST", false},
		{"path form", sibling, "POST", true},
	} {
		req := e.subReq(t, ctx, http.MethodOptions, "/api/items", nil)
		if tc.path {
			req = mustReq(t, ctx, e.pathURL("/api/items"))
			req.Method = http.MethodOptions
		}
		if resp := preflight(req, tc.origin, tc.method); resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s: %d, ACAO %q; want 401 without CORS headers", tc.name, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
		}
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the dev server saw %d requests; want none", n)
	}
}

// TestPreviewSiblingUnauthorizedReadable: a call from another port's
// preview of the same host, before the viewer logged in on this port,
// gets its 401 with CORS headers for that origin, and the message says
// which preview to open: the page saw only an opaque CORS failure. Other
// origins' 401s stay without CORS headers.
func TestPreviewSiblingUnauthorizedReadable(t *testing.T) {
	ctx := testCtx(t)
	e := newPreviewEnv(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}),
		&PreviewConfig{Authorize: func(*http.Request, string, int) (bool, string, error) { return false, "", nil }})
	_, gwPort, _ := net.SplitHostPort(e.gw.Listener.Addr().String())
	sibling := "http://" + SubdomainHost("dev", 5173, testDomain) + ":" + gwPort
	req := e.subReq(t, ctx, http.MethodGet, "/api/items", nil)
	req.Header.Set("Origin", sibling)
	resp, body := do(t, req)
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Access-Control-Allow-Origin") != sibling ||
		resp.Header.Get("Access-Control-Allow-Credentials") != "true" || !strings.Contains(body, "open http://"+e.subHost()+"/ once") {
		t.Fatalf("sibling call before login: %d, ACAO %q, ACAC %q, %s; want 401 readable by %s naming http://%s/",
			resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), resp.Header.Get("Access-Control-Allow-Credentials"), body, sibling, e.subHost())
	}
	for _, origin := range []string{"http://" + SubdomainHost("evil", 5173, testDomain) + ":" + gwPort, "https://example.com"} {
		req := e.subReq(t, ctx, http.MethodGet, "/api/items", nil)
		req.Header.Set("Origin", origin)
		if resp, _ := do(t, req); resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("call from %s: %d, ACAO %q; want 401 without CORS headers", origin, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
		}
	}
	// The path form runs sandboxed: no CORS there.
	req = mustReq(t, ctx, e.pathURL("/api/items"))
	req.Header.Set("Origin", sibling)
	if resp, _ := do(t, req); resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("path form: ACAO %q, want none", resp.Header.Get("Access-Control-Allow-Origin"))
	}
}
