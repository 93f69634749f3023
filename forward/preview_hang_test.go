package forward

import (
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/testenv"
)

// hangingDev is a dev server whose /hang handler takes the request and
// never answers, as one that was SIGSTOPped or whose handler is stuck,
// and reports when the proxy cut the request.
type hangingDev struct {
	cut chan string // the path of each request the proxy cut
}

func (d *hangingDev) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	<-r.Context().Done()
	d.cut <- r.URL.Path
}

// pageLoad is a request as a browser's address bar sends it.
func pageLoad(t testing.TB, ctx context.Context, method, url string) *http.Request {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
	req.Header.Set("Sec-Fetch-Mode", "navigate")
	req.Header.Set("Sec-Fetch-Dest", "document")
	req.Header.Set("Sec-Fetch-Site", "none")
	return req
}

// doBounded is do, failing (not hanging) when no answer comes in 30 s.
func doBounded(t testing.TB, req *http.Request) (*http.Response, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(req.Context(), 30*time.Second)
	defer cancel()
	resp, err := noRedirect.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("%s %s: %v (a page load through the preview got no answer in 30 s)", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// A page load from a dev server that takes the request and never answers
// ends with a readable 504 naming the host and port, and the request to
// the dev server is cut, in both forms, with and without fetch metadata.
// Before, the browser's tab spun for as long as the dev server hung.
func TestPreviewHungPageLoadIs504(t *testing.T) {
	ctx := testCtx(t)
	dev := &hangingDev{cut: make(chan string, 8)}
	e := newPreviewEnv(t, dev, &PreviewConfig{Authorize: allowAll, NavigationTimeout: 50 * time.Millisecond})
	noMetadata := mustReq(t, ctx, e.pathURL("/old-browser"))
	noMetadata.Header.Set("Accept", "text/html,*/*;q=0.8")
	for _, c := range []struct {
		name string
		req  *http.Request
		path string
	}{
		{"path form", pageLoad(t, ctx, http.MethodGet, e.pathURL("/page")), "/page"},
		{"subdomain", func() *http.Request {
			r := pageLoad(t, ctx, http.MethodGet, e.gw.URL+"/sub")
			r.Host = e.subHost()
			return r
		}(), "/sub"},
		{"HEAD", pageLoad(t, ctx, http.MethodHead, e.pathURL("/head")), "/head"},
		{"no fetch metadata", noMetadata, "/old-browser"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body := doBounded(t, c.req)
			if resp.StatusCode != http.StatusGatewayTimeout || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
				t.Fatalf("status %d, %s: %q; want a 504 page", resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
			if c.req.Method == http.MethodGet {
				for _, want := range []string{fmt.Sprintf("Port %d of host dev has not answered", e.devPort), "localhost:" + fmt.Sprint(e.devPort), "Check its terminal"} {
					if !strings.Contains(body, want) {
						t.Errorf("the page does not say %q: %s", want, body)
					}
				}
			}
			select {
			case p := <-dev.cut:
				if p != c.path {
					t.Errorf("cut %s, want %s", p, c.path)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the dev server's request was not cut 30 s after the 504")
			}
		})
	}
	// A navigation that accepts anything (no text/html) gets the JSON.
	req := pageLoad(t, ctx, http.MethodGet, e.pathURL("/any"))
	req.Header.Set("Accept", "*/*")
	resp, body := doBounded(t, req)
	if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(body, `"code":"upstream_timeout"`) {
		t.Fatalf("navigation accepting */*: %d %s", resp.StatusCode, body)
	}
	<-dev.cut
}

// The bound is for page loads alone, up to their headers: a fetch long
// poll (htmx's asks for text/html too), an event stream, an API client's
// request, a form's POST and a page whose headers came and whose body
// comes slowly all outlast it. Each starts before a hung page load that
// is the clock: once it got its 504 (twice, one after the other), the
// bound has passed for every one of them.
func TestPreviewNavigationBoundSparesTheRest(t *testing.T) {
	ctx := testCtx(t)
	release := make(chan struct{})
	arrived := make(chan string, 16)
	// The clock's cuts apart from the others': net/http may send a GET
	// again on a new connection when the one it reused closed under it,
	// and the dev server then sees (and cuts) one /hang more than the
	// test sent (once, in a whole-package -race run at load 7).
	hangCut := make(chan struct{}, 16)
	cut := make(chan string, 16)
	var releaseOnce sync.Once
	e := newPreviewEnv(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/hang":
			<-r.Context().Done()
			hangCut <- struct{}{}
			return
		case "/stream":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, "<p>first")
			w.(http.Flusher).Flush()
		}
		arrived <- r.URL.Path
		select {
		case <-release:
			fmt.Fprint(w, "done "+r.URL.Path)
		case <-r.Context().Done():
			cut <- r.URL.Path
		}
	}), &PreviewConfig{Authorize: allowAll, NavigationTimeout: 50 * time.Millisecond})
	// After the env's: a failed test's handlers end before its servers
	// close, which waits for them.
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })

	type result struct {
		name, body string
		status     int
		err        error
	}
	results := make(chan result, 8)
	send := func(name string, req *http.Request) {
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				results <- result{name: name, err: err}
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			results <- result{name, string(b), resp.StatusCode, err}
		}()
	}
	reqs := map[string]*http.Request{}
	r := mustReq(t, ctx, e.pathURL("/htmx"))
	r.Header.Set("Accept", "text/html")
	r.Header.Set("Sec-Fetch-Mode", "cors")
	r.Header.Set("Sec-Fetch-Dest", "empty")
	reqs["htmx fetch"] = r
	r = mustReq(t, ctx, e.pathURL("/events"))
	r.Header.Set("Accept", "text/event-stream")
	r.Header.Set("Sec-Fetch-Mode", "cors")
	reqs["event stream"] = r
	reqs["API client"] = mustReq(t, ctx, e.pathURL("/poll"))
	r, _ = http.NewRequestWithContext(ctx, http.MethodPost, e.pathURL("/form"), strings.NewReader("a=1"))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Accept", "text/html")
	r.Header.Set("Sec-Fetch-Mode", "navigate")
	reqs["form POST"] = r
	reqs["page with slow body"] = pageLoad(t, ctx, http.MethodGet, e.pathURL("/stream"))
	for name, req := range reqs {
		send(name, req)
	}
	for range reqs {
		select {
		case <-arrived:
		case <-time.After(30 * time.Second):
			t.Fatal("the requests did not reach the dev server in 30 s")
		}
	}
	for range 2 {
		resp, body := doBounded(t, pageLoad(t, ctx, http.MethodGet, e.pathURL("/hang")))
		if resp.StatusCode != http.StatusGatewayTimeout {
			t.Fatalf("the clock: %d %s, want 504", resp.StatusCode, body)
		}
		<-hangCut
	}
	select {
	case p := <-cut:
		t.Fatalf("%s was cut", p)
	default:
	}
	releaseOnce.Do(func() { close(release) })
	for range reqs {
		select {
		case res := <-results:
			want := "done /"
			if res.name == "page with slow body" {
				want = "<p>firstdone /"
			}
			if res.err != nil || res.status != http.StatusOK || !strings.HasPrefix(res.body, want) {
				t.Errorf("%s: %d %q %v; want 200 and the whole body", res.name, res.status, res.body, res.err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the spared requests did not end 30 s after the dev server answered")
		}
	}
}

// A host the gateway knows more about than "not connected" is named with
// it: a sandbox whose execution ended is gone (410 with its reason and
// end, as the API answers it; nothing to reload),
// a host whose agent is refused says why and who can fix it, where the
// page told both to start or reconnect the agent.
func TestPreviewHostGoneSaysWhy(t *testing.T) {
	ctx := testCtx(t)
	p, err := NewPreview(func(ctx context.Context, hostID string, port int) (net.Conn, error) {
		switch hostID {
		case "ended":
			return nil, &HostGoneError{Err: fmt.Errorf("%w: no record", ErrUnknownHost), Ended: true, Why: "its execution ended (reason runtime)",
				Reason: "runtime", EndedAt: time.Date(2026, 12, 5, 7, 0, 0, 5, time.FixedZone("x", 3600))}
		case "refused":
			return nil, &HostGoneError{Err: ErrHostUnavailable, Why: "its agent was refused 5s ago: it presents another host key than the pinned one (if the machine was reinstalled, an admin runs `gateway host reset-key refused`)"}
		case "quiet":
			return nil, &HostGoneError{Err: ErrHostUnavailable}
		}
		return loopDial(ctx, hostID, port)
	}, &PreviewConfig{Authorize: allowAll})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(p)
	t.Cleanup(func() { gw.Close(); p.Close() })
	for _, c := range []struct {
		host   string
		status int
		want   []string
	}{
		{"ended", http.StatusGone, []string{"Host ended is gone: its execution ended (reason runtime).", "provision a new sandbox"}},
		{"refused", http.StatusServiceUnavailable, []string{"Host refused is not connected.", "Its agent was refused 5s ago", "gateway host reset-key refused", "Reload once that is fixed."}},
		{"quiet", http.StatusServiceUnavailable, []string{"Host quiet is not connected.", "Start or reconnect the host&#39;s agent"}},
	} {
		resp, body := doBounded(t, pageLoad(t, ctx, http.MethodGet, fmt.Sprintf("%s/preview/%s/3000/", gw.URL, c.host)))
		if resp.StatusCode != c.status {
			t.Errorf("%s: %d, want %d: %s", c.host, resp.StatusCode, c.status, body)
		}
		for _, w := range c.want {
			if !strings.Contains(body, template.HTMLEscapeString(w)) && !strings.Contains(body, w) {
				t.Errorf("%s: the page does not say %q: %s", c.host, w, body)
			}
		}
		if c.host == "refused" && strings.Contains(body, "Start or reconnect") {
			t.Errorf("refused: the page still says to restart the agent: %s", body)
		}
	}
	// An API client gets the same words in the JSON, the code, and the
	// reason and end as the executions API gives them (UTC, RFC 3339).
	resp, body := get(t, ctx, gw.URL+"/preview/ended/3000/")
	var e struct {
		Error struct{ Code, Message, Reason, EndedAt string }
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || resp.StatusCode != http.StatusGone || e.Error.Code != "gone" ||
		!strings.Contains(e.Error.Message, "its execution ended (reason runtime)") || e.Error.Reason != "runtime" || e.Error.EndedAt != "2026-12-05T06:00:00.000000005Z" {
		t.Errorf("API client, ended: %d %s (%v)", resp.StatusCode, body, err)
	}
	// A quiet host's answer has neither.
	if _, body := get(t, ctx, gw.URL+"/preview/quiet/3000/"); strings.Contains(body, "reason") || strings.Contains(body, "endedAt") {
		t.Errorf("API client, quiet: %s", body)
	}
}

// HostLost is asked only about a round trip that broke off, and its
// answer picks the page: the host went, or the dev server's answer was
// not HTTP.
func TestPreviewHostLostPicksThePage(t *testing.T) {
	ctx := testCtx(t)
	var (
		mu    sync.Mutex
		asked []string
		lost  error
	)
	e := newPreviewEnv(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = c.Close()
		}
	}), &PreviewConfig{Authorize: allowAll, HostLost: func(_ context.Context, hostID string) error {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, hostID)
		return lost
	}})
	resp, body := get(t, ctx, e.pathURL("/"))
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, `"code":"upstream_bad_response"`) {
		t.Errorf("host there: %d %s", resp.StatusCode, body)
	}
	mu.Lock()
	lost = &HostGoneError{Err: ErrHostUnavailable}
	mu.Unlock()
	resp, body = get(t, ctx, e.pathURL("/"))
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, `"code":"host_offline"`) ||
		!strings.Contains(body, fmt.Sprintf("Host dev went away while port %d was answering.", e.devPort)) {
		t.Errorf("host lost: %d %s", resp.StatusCode, body)
	}
	// Not asked when nothing listens, or the host was not reached.
	refused := echoPort(t, testenv.RefusedAddr(t))
	get(t, ctx, fmt.Sprintf("%s/preview/dev/%d/", e.gw.URL, refused))
	get(t, ctx, fmt.Sprintf("%s/preview/offline/%d/", e.gw.URL, e.devPort))
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 2 || asked[0] != "dev" || asked[1] != "dev" {
		t.Errorf("HostLost asked about %q, want dev twice", asked)
	}
}
