package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/client"
	"github.com/hostgate/hostgate/internal/testenv"
)

// TestPreviewThroughGateway checks the preview path form end to end, real
// gateway and agent: private by default (401 for API clients, 403 for one
// whose token reaches other hosts, a login redirect for browsers), the dev
// server's page for the host's token, 502 with a clear page for a closed
// port, and a public share that expires.
func TestPreviewThroughGateway(t *testing.T) {
	g := startGateway(t, "")
	g.startAgent("alpha", "")
	port := devServer(t)
	path := "/preview/alpha/" + strconv.Itoa(port) + "/"
	get := func(token, accept string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", g.url+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 30 * time.Second}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}

	if res, body := get("", "application/json"); res.StatusCode != http.StatusUnauthorized || !strings.Contains(body, `"error"`) {
		t.Errorf("anonymous API request: %d %s", res.StatusCode, body)
	}
	if res, _ := get("", "text/html"); res.StatusCode != http.StatusFound || !strings.HasPrefix(res.Header.Get("Location"), "/login") {
		t.Errorf("anonymous browser: %d %q, want a redirect to log in", res.StatusCode, res.Header.Get("Location"))
	}
	if res, body := get(g.admin, ""); res.StatusCode != 200 || !strings.Contains(body, `id="title"`) {
		t.Errorf("admin: %d %.200s", res.StatusCode, body)
	}
	// A client token for another host cannot preview this one: 403, as
	// its token is good, not 401, which said to log in (and logging in
	// with the same token got the same).
	other := g.token("client", "beta")
	if res, body := get(other, "application/json"); res.StatusCode != http.StatusForbidden || !strings.Contains(body, `"forbidden"`) ||
		!strings.Contains(body, "not among the hosts this token reaches") {
		t.Errorf("client of another host: %d %s, want 403 forbidden", res.StatusCode, body)
	}

	// A port nobody listens on.
	closed := "/preview/alpha/1/"
	req, _ := http.NewRequest("GET", g.url+closed, nil)
	req.Header.Set("Authorization", "Bearer "+g.admin)
	req.Header.Set("Accept", "text/html")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusBadGateway || !bytes.Contains(body, []byte("Nothing answered on port 1")) {
		t.Errorf("closed port: %d %.300s", res.StatusCode, body)
	}
	// A host never enrolled is not there (404); an enrolled one that is
	// not connected is unavailable (503).
	g.startAgent("gamma", "").stop()
	g.waitConnected("gamma", false, 30*time.Second)
	for id, want := range map[string]int{"nobody": http.StatusNotFound, "gamma": http.StatusServiceUnavailable} {
		req, _ := http.NewRequest("GET", g.url+"/preview/"+id+"/80/", nil)
		req.Header.Set("Authorization", "Bearer "+g.admin)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("host %s: %d %.300s, want %d", id, res.StatusCode, body, want)
		}
	}

	// Share the port publicly for two seconds.
	status, b := g.api("POST", "/v1/hosts/alpha/shares", g.admin, map[string]any{"port": port, "ttlSeconds": 2})
	if status != http.StatusCreated {
		t.Fatalf("share: %d %s", status, b)
	}
	if res, body := get("", ""); res.StatusCode != 200 || !strings.Contains(body, `id="title"`) {
		t.Errorf("shared port, anonymous: %d", res.StatusCode)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, _ := get("", "application/json")
		if res.StatusCode == http.StatusUnauthorized {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("share did not expire: %d", res.StatusCode)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Bad share requests are 400s that name the field.
	for _, bad := range []map[string]any{{"port": 0, "ttlSeconds": 5}, {"port": port, "ttlSeconds": 0}, {"port": port}} {
		status, b := g.api("POST", "/v1/hosts/alpha/shares", g.admin, bad)
		if status != http.StatusBadRequest {
			t.Errorf("share %v: %d %s", bad, status, b)
		}
	}
}

// TestPreviewSubdomainCookieFollowsToken: the subdomain form's own cookie
// (from /preview-login's ticket) opens the preview only while the token
// that asked for it lives; revoked, it stops within a second or two, as
// the token does, where it used to last its 12 hours.
func TestPreviewSubdomainCookieFollowsToken(t *testing.T) {
	g := startGateway(t, "", "--preview-domain", "preview.test")
	g.startAgent("alpha", "")
	port := devServer(t)
	out, err := exec.Command(bin.gateway, "token", "create", "--role", "client", "--host", "alpha", "--state-dir", g.stateDir).Output()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`\(id (\w+)\)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no token id in %q", out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	secret, id := lines[len(lines)-1], string(m[1])
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 30 * time.Second}
	do := func(req *http.Request) *http.Response {
		t.Helper()
		res, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}
	// The gateway's origin mints a ticket and sends the browser to the
	// preview origin, which trades it for its cookie.
	req, _ := http.NewRequest("GET", g.url+"/preview-login?host=alpha&port="+strconv.Itoa(port)+"&next=/", nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	res := do(req)
	loc, err := url.Parse(res.Header.Get("Location"))
	if res.StatusCode != http.StatusFound || err != nil || !strings.HasPrefix(loc.Host, strconv.Itoa(port)+"--alpha.preview.test") {
		t.Fatalf("preview-login: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	subReq := func(path string, c *http.Cookie) *http.Request {
		req, _ := http.NewRequest("GET", g.url+path, nil)
		req.Host = loc.Host
		if c != nil {
			req.AddCookie(c)
		}
		return req
	}
	res = do(subReq(loc.RequestURI(), nil))
	var cookie *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == "hostgate_preview" {
			cookie = c
		}
	}
	if res.StatusCode != http.StatusSeeOther || cookie == nil {
		t.Fatalf("ticket redeemed: %d, cookies %v", res.StatusCode, res.Cookies())
	}
	if res := do(subReq("/", cookie)); res.StatusCode != http.StatusOK {
		t.Fatalf("with the preview cookie: %d", res.StatusCode)
	}
	if out, err := exec.Command(bin.gateway, "token", "revoke", id, "--state-dir", g.stateDir).CombinedOutput(); err != nil {
		t.Fatalf("revoke: %v %s", err, out)
	}
	deadline := time.Now().Add(5 * time.Second)
	for do(subReq("/", cookie)).StatusCode == http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("the preview cookie of a revoked token still opens the preview after 5 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestPreviewSubdomainHostCase: host ids may hold capitals, but browsers
// lower-case host names, so "{port}--MyHost.{domain}" arrives as
// "…--myhost…" and answered 404 unknown host. The gateway now finds the
// one host whose id matches in any case; when two ids differ only in case
// it says so, naming both and their path forms. Ids no DNS label carries
// (a dot, an underscore) get path-form links from shares and
// /preview-login, not subdomains that lead nowhere.
func TestPreviewSubdomainHostCase(t *testing.T) {
	g := startGateway(t, "", "--preview-domain", "preview.test")
	g.startAgent("MyHost", "")
	port := devServer(t)
	p := strconv.Itoa(port)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 30 * time.Second}
	get := func(host, path, token string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", g.url+path, nil)
		if host != "" {
			req.Host = host
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		req.Header.Set("Accept", "application/json")
		res, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}

	// What a browser sends for http://{port}--MyHost.preview.test/.
	sub := p + "--myhost.preview.test"
	if res, body := get(sub, "/", g.admin); res.StatusCode != http.StatusOK || !strings.Contains(body, `id="title"`) {
		t.Errorf("subdomain of MyHost, lower-cased: %d %.300s", res.StatusCode, body)
	}
	// A client token for MyHost reaches it there too.
	if res, body := get(sub, "/", g.token("client", "MyHost")); res.StatusCode != http.StatusOK {
		t.Errorf("client of MyHost on its subdomain: %d %.300s", res.StatusCode, body)
	}
	status, b := g.api("POST", "/v1/hosts/MyHost/shares", g.admin, map[string]any{"port": port, "ttlSeconds": 60})
	if status != http.StatusCreated || !strings.Contains(string(b), `"url":"http://`+sub) {
		t.Errorf("share of MyHost: %d %s, want its subdomain url", status, b)
	}

	// A second host whose id differs only in case: the subdomain cannot
	// tell them apart, and says so.
	g.startAgent("myhost", "")
	res, body := get(sub, "/", g.admin)
	if res.StatusCode != http.StatusConflict || !strings.Contains(body, "MyHost") || !strings.Contains(body, "myhost") ||
		!strings.Contains(body, "/preview/MyHost/"+p+"/") {
		t.Errorf("subdomain matching MyHost and myhost: %d %.400s, want 409 naming both and the path form", res.StatusCode, body)
	}
	if res, body := get(sub, "/", ""); res.StatusCode != http.StatusConflict || strings.Contains(body, "MyHost") {
		t.Errorf("anonymous on the ambiguous subdomain: %d %.400s, want 409 without the ids", res.StatusCode, body)
	}
	if res, body := get("", "/preview/MyHost/"+p+"/", g.admin); res.StatusCode != http.StatusOK || !strings.Contains(body, `id="title"`) {
		t.Errorf("path form of MyHost: %d %.300s", res.StatusCode, body)
	}
	status, b = g.api("POST", "/v1/hosts/MyHost/shares", g.admin, map[string]any{"port": port, "ttlSeconds": 60})
	if status != http.StatusCreated || !strings.Contains(string(b), `"url":"`+g.url+"/preview/MyHost/"+p+`/"`) {
		t.Errorf("share of MyHost beside myhost: %d %s, want the path form as its url", status, b)
	}

	// An id a DNS label cannot carry: links in the path form.
	g.startAgent("build.01", "")
	status, b = g.api("POST", "/v1/hosts/build.01/shares", g.admin, map[string]any{"port": port, "ttlSeconds": 60})
	if status != http.StatusCreated || !strings.Contains(string(b), `"url":"`+g.url+"/preview/build.01/"+p+`/"`) {
		t.Errorf("share of build.01: %d %s, want the path form as its url", status, b)
	}
	res, _ = get("", "/preview-login?host=build.01&port="+p+"&next=/x", g.admin)
	if loc := res.Header.Get("Location"); res.StatusCode != http.StatusFound || loc != "/preview/build.01/"+p+"/x" {
		t.Errorf("preview-login for build.01: %d %q, want the path form", res.StatusCode, loc)
	}
}

// TestPreviewDevServerOnIPv6Loopback: a dev server listening on ::1 alone,
// as Vite does when started on "localhost" where the host's resolver puts
// ::1 first (Node 17 and later), is previewed like one on 127.0.0.1. The
// preview dialed 127.0.0.1 only and answered 502 "Nothing answered on
// port …" while the dev server ran.
func TestPreviewDevServerOnIPv6Loopback(t *testing.T) {
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	// On ::1 alone: 127.0.0.1 at its port, which the agent dials first,
	// refuses. Another server there (the kernel chose the port for ::1
	// alone) would answer the preview in place of this one.
	for try := 1; ; try++ {
		_, err := testenv.HoldRefusing(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)))
		if err == nil {
			break
		}
		if try == 20 {
			t.Fatalf("20 ports free on ::1 were all taken on 127.0.0.1: %v", err)
		}
		_ = ln.Close()
		if ln, err = net.Listen("tcp", "[::1]:0"); err != nil {
			t.Fatal(err)
		}
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, `<!doctype html><h1 id="title">on ::1</h1>`)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	g := startGateway(t, "")
	g.startAgent("alpha", "")
	req, _ := http.NewRequest("GET", g.url+"/preview/alpha/"+strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)+"/", nil)
	req.Header.Set("Authorization", "Bearer "+g.admin)
	res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || !strings.Contains(string(b), "on ::1") {
		t.Fatalf("preview of a dev server on [::1]: %d %.300s", res.StatusCode, b)
	}
}

// TestPreviewOfflineHostSaysWhy: the preview of a host whose agent the
// gateway refuses (it came back with another host key: a reinstalled
// machine) says so and who can fix it, as the API does, where the page
// said only to start or reconnect the agent, which the refused agent
// already does every few seconds.
func TestPreviewOfflineHostSaysWhy(t *testing.T) {
	g := startGateway(t, "")
	g.startAgent("gamma", "").stop()
	g.waitConnected("gamma", false, 30*time.Second)
	imp := start(t, "impostor gamma", bin.agent, nil, "connect", "--gateway", g.url, "--token", g.token("agent", "gamma"),
		"--host-id", "gamma", "--state-dir", t.TempDir(), "--max-backoff", "1s")
	defer imp.stop()
	g.waitFor(regexp.MustCompile(`agent refused: host key differs`), 60*time.Second)

	req, _ := http.NewRequest("GET", g.url+"/preview/gamma/3000/", nil)
	req.Header.Set("Authorization", "Bearer "+g.admin)
	req.Header.Set("Accept", "text/html")
	c := &http.Client{Timeout: 30 * time.Second}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("preview of a host whose agent is refused: %d %s %.500s", res.StatusCode, res.Header.Get("Content-Type"), body)
	}
	for _, want := range []string{"Host gamma is not connected.", "another host key than the pinned one", "gateway host reset-key gamma"} {
		if !strings.Contains(html.UnescapeString(string(body)), want) {
			t.Errorf("the page does not say %q: %s", want, body)
		}
	}
	if bytes.Contains(body, []byte("Start or reconnect")) {
		t.Errorf("the page tells to restart an agent that is refused: %s", body)
	}
}

// TestPreviewHostLostMidRequest: a page whose host's agent goes while the
// dev server works on it says the host went, and to bring its agent back,
// where it said the port "answered, but not with an HTTP response" and
// asked whether it was an HTTP server: through the tunnel both end the
// same way. A dev server that drops the connection itself, its host
// still there, is still told apart.
func TestPreviewHostLostMidRequest(t *testing.T) {
	g := startGateway(t, "")
	a := g.startAgent("alpha", "")
	arrived := make(chan string, 2)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- r.URL.Path
		if r.URL.Path == "/drop" {
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = c.Close()
			}
			return
		}
		<-r.Context().Done()
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	page := func(path string) (int, string) {
		req, _ := http.NewRequest("GET", g.url+"/preview/alpha/"+port+path, nil)
		req.Header.Set("Authorization", "Bearer "+g.admin)
		req.Header.Set("Accept", "text/html")
		res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, html.UnescapeString(string(b))
	}

	status, body := page("/drop")
	if status != http.StatusBadGateway || !strings.Contains(body, "answered, but not with an HTTP response") {
		t.Errorf("a dev server that drops the connection, its host there: %d %s", status, body)
	}
	<-arrived

	type answer struct {
		status int
		body   string
	}
	got := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest("GET", g.url+"/preview/alpha/"+port+"/slow", nil)
		req.Header.Set("Authorization", "Bearer "+g.admin)
		req.Header.Set("Accept", "text/html")
		res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			got <- answer{0, err.Error()}
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		got <- answer{res.StatusCode, html.UnescapeString(string(b))}
	}()
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("the request did not reach the dev server in 30 s")
	}
	a.kill()
	ans := <-got
	if ans.status != http.StatusServiceUnavailable || !strings.Contains(ans.body, "Host alpha went away while port "+port+" was answering.") ||
		!strings.Contains(ans.body, "start or reconnect it") || strings.Contains(ans.body, "HTTP response") {
		t.Errorf("a page whose host's agent went: %d %s", ans.status, ans.body)
	}
}

// TestPreviewOfEndedSandboxSaysSo: through the real gateway and Docker,
// the preview of a sandbox whose execution ended says it is gone and why,
// and to provision a new one, as the API says, where it said "There is no
// host …" (or, while its record stayed, to reconnect its agent).
func TestPreviewOfEndedSandboxSaysSo(t *testing.T) {
	g, c, image := execGateway(t)
	ctx := testCtx(t, 3*time.Minute)
	e := provision(t, ctx, c, execRequest(image))
	if err := c.Terminate(ctx, e.ExecutionID); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", g.url+"/preview/"+e.ExecutionID+"/3000/", nil)
	req.Header.Set("Authorization", "Bearer "+g.admin)
	req.Header.Set("Accept", "text/html")
	res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	body := html.UnescapeString(string(b))
	if res.StatusCode != http.StatusGone || !strings.Contains(body, "Host "+e.ExecutionID+" is gone: its execution ended (reason ") ||
		!strings.Contains(body, "provision a new sandbox") {
		t.Errorf("the preview of an ended sandbox: %d %s", res.StatusCode, body)
	}
	// A program reads the reason and end the executions API gives.
	_, err = c.Execution(ctx, e.ExecutionID)
	var gone *client.APIError
	if !errors.As(err, &gone) || gone.Code != "gone" || gone.Reason != "terminated" {
		t.Fatalf("the executions API on the ended sandbox: %v", err)
	}
	req.Header.Set("Accept", "application/json")
	res, err = (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var pe struct {
		Error struct{ Code, Reason, EndedAt string }
	}
	err = json.NewDecoder(res.Body).Decode(&pe)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusGone || pe.Error.Code != "gone" || pe.Error.Reason != "terminated" ||
		pe.Error.EndedAt != gone.EndedAt.UTC().Format(time.RFC3339Nano) {
		t.Errorf("the preview of an ended sandbox, to a program: %d %+v (%v), want gone, terminated, %v", res.StatusCode, pe.Error, err, gone.EndedAt)
	}
}
