package gateway

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"github.com/coder/websocket"
	"github.com/hostgate/hostgate/internal/yamux"
	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
	"go.uber.org/goleak"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/buildinfo"
	"github.com/hostgate/hostgate/internal/gateway/sshca"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/internal/testenv"
)

// blocked reports whether ip's source is blocked now.
func (l *limiter) blocked(ip string) bool { return l.blockedFor(ip) > 0 }

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type env struct {
	t     testing.TB
	ctx   context.Context
	srv   *Server
	ts    *httptest.Server
	store *store.SQLite
	// agentMisuse counts frames from the gateway that the fake agents'
	// sessions take for misuse (bytestream.MuxConfig.OnMisuse).
	agentMisuse atomic.Int64
}

func newEnv(t testing.TB, cfg *Config) *env {
	t.Helper()
	return newEnvWrapped(t, cfg, nil)
}

// newEnvWrapped is newEnv with the gateway's store wrapped by wrap (when
// set), for tests that watch what the gateway asks the store.
func newEnvWrapped(t testing.TB, cfg *Config, wrap func(store.Store) store.Store) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := sshca.LoadOrCreate(filepath.Join(dir, "ca_key"))
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if _, isT := t.(*testing.T); !isT {
		// Benchmarks and fuzz targets: background logs to t.Log race
		// with the fuzz engine, and would swamp benchmark output.
		logger = slog.New(slog.DiscardHandler)
	}
	var gst store.Store = st
	if wrap != nil {
		gst = wrap(st)
	}
	srv, err := New(ctx, logger, gst, ca, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		_ = srv.Close()
		ts.Close()
		_ = st.Close()
	})
	return &env{t: t, ctx: ctx, srv: srv, ts: ts, store: st}
}

// testWriter sends logs to t.Log, and drops them once the test is over.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	defer func() { _ = recover() }() // a log after the test ended
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func (e *env) token(role store.Role, hosts ...string) string {
	e.t.Helper()
	sec, _, err := e.store.CreateToken(e.ctx, store.TokenSpec{Role: role, Hosts: hosts, Name: string(role) + "-" + strings.Join(hosts, "+")})
	if err != nil {
		e.t.Fatal(err)
	}
	return sec
}

// revoke deletes the token of secret from the store, as `gateway token
// revoke` does from another process: the gateway is not told.
func (e *env) revoke(secret string) {
	e.t.Helper()
	tok, err := e.store.LookupToken(e.ctx, secret)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.store.DeleteToken(e.ctx, tok.ID); err != nil {
		e.t.Fatal(err)
	}
}

// call does one API request and decodes the JSON answer into out (when
// set); it returns the status and the error code of an error answer.
func (e *env) call(method, path, token string, body any, out any) (int, string) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		if s, ok := body.(string); ok {
			rd = strings.NewReader(s)
		} else {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
	}
	req, _ := http.NewRequestWithContext(e.ctx, method, e.ts.URL+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if strings.HasSuffix(path, "/ssh") || path == wire.ConnectPath {
		wsHeaders(req.Header)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode/100 != 2 {
		if ct := res.Header.Get("Content-Type"); ct != "application/json" {
			e.t.Errorf("%s %s: %d with content type %q: %s", method, path, res.StatusCode, ct, b)
		}
		we, ok := wire.ParseError(b)
		if !ok {
			e.t.Errorf("%s %s: %d without JSON error: %s", method, path, res.StatusCode, b)
		}
		return res.StatusCode, we.Code
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			e.t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
	return res.StatusCode, ""
}

// wsHeaders makes a request a WebSocket upgrade, so the endpoint's checks
// run and answer before any upgrade.
func wsHeaders(h http.Header) {
	h.Set("Connection", "Upgrade")
	h.Set("Upgrade", "websocket")
	h.Set("Sec-WebSocket-Version", "13")
	h.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
}

// testSigners maps each newKey's authorized key to its signer, so a fake
// agent presenting it can prove it holds it.
var testSigners sync.Map

func newKey(t testing.TB) (ssh.Signer, string) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	k := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.PublicKey())))
	testSigners.Store(k, s)
	return s, k
}

// proveKey answers the gateway's proof of a host key it has not pinned
// (wire.HeaderKeyProof in resp): an SSH server signing with signer on the
// tunnel's first stream, until the gateway ends that connection, which it
// does once the host is routable. Without the header it does nothing.
func proveKey(sess *yamux.Session, resp *http.Response, signer ssh.Signer) error {
	if resp.Header.Get(wire.HeaderKeyProof) == "" {
		return nil
	}
	if signer == nil {
		return errors.New("the gateway asks for a proof of a key this test holds no signer for")
	}
	st, err := sess.AcceptStream()
	if err != nil {
		return err
	}
	// The gateway logs in with a certificate its CA signed, which a real
	// agent checks; the proof is the key exchange's signature.
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(ssh.ConnMetadata, ssh.PublicKey) (*ssh.Permissions, error) { return nil, nil }}
	cfg.AddHostKey(signer)
	c, chans, reqs, err := ssh.NewServerConn(st, cfg)
	if err != nil {
		// The gateway counts and logs a failed proof, then closes the
		// tunnel.
		<-sess.CloseChan()
		return fmt.Errorf("key proof: %w", err)
	}
	go ssh.DiscardRequests(reqs)
	go func() {
		for ch := range chans {
			_ = ch.Reject(ssh.Prohibited, "")
		}
	}()
	_ = c.Wait()
	if sess.IsClosed() {
		return errors.New("key proof: the gateway closed the tunnel")
	}
	return nil
}

// signerOf is newKey's signer of hostKey, nil for a key newKey did not
// make.
func signerOf(hostKey string) ssh.Signer {
	if v, ok := testSigners.Load(hostKey); ok {
		return v.(ssh.Signer)
	}
	return nil
}

// pin pins hostKey for host id as an enrollment that proved it would, so
// a test's raw tunnel for it is routable without a proof.
func (e *env) pin(id, hostKey string) {
	e.t.Helper()
	if _, err := e.store.Enroll(e.ctx, store.Enrollment{HostID: id, Kind: "machine", HostKey: hostKey}); err != nil {
		e.t.Fatal(err)
	}
}

// fakeAgent is an agent's tunnel that echoes every stream (enough to test
// the relay without SSH).
type fakeAgent struct {
	conn net.Conn // the WebSocket under sess
	sess *yamux.Session
	resp *http.Response
	wg   sync.WaitGroup
}

func (e *env) dialAgent(token, hostKey string, info hostgate.Info) (*fakeAgent, error) {
	return e.dialAgentSigner(token, hostKey, info, signerOf(hostKey))
}

// dialAgentSigner is dialAgent whose agent proves its key (when the
// gateway asks) with signer, which may hold another key than hostKey.
func (e *env) dialAgentSigner(token, hostKey string, info hostgate.Info, signer ssh.Signer) (*fakeAgent, error) {
	return e.dialAgentHeader(token, hostKey, info, signer, nil)
}

// dialAgentHeader is dialAgentSigner whose request also has the headers
// in extra.
func (e *env) dialAgentHeader(token, hostKey string, info hostgate.Info, signer ssh.Signer, extra http.Header) (*fakeAgent, error) {
	h := extra.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set(wire.HeaderInfo, wire.EncodeInfo(info))
	return e.dialAgentWith(token, hostKey, signer, &bytestream.WebSocketOptions{Header: h})
}

// dialAgentOpts is dialAgent dialing with opts (whose headers it adds
// to).
func (e *env) dialAgentOpts(token, hostKey string, opts *bytestream.WebSocketOptions) (*fakeAgent, error) {
	o := *opts
	o.Header = opts.Header.Clone()
	if o.Header == nil {
		o.Header = http.Header{}
	}
	return e.dialAgentWith(token, hostKey, signerOf(hostKey), &o)
}

// dialAgentWith dials the fake agent with opts, whose headers it sets
// the token and host key in.
func (e *env) dialAgentWith(token, hostKey string, signer ssh.Signer, opts *bytestream.WebSocketOptions) (*fakeAgent, error) {
	h := opts.Header
	h.Set("Authorization", "Bearer "+token)
	h.Set(wire.HeaderHostKey, hostKey)
	conn, resp, err := bytestream.DialWebSocket(e.ctx, e.ts.URL+wire.ConnectPath, opts)
	if err != nil {
		return nil, err
	}
	sess, err := bytestream.MuxServer(conn, &bytestream.MuxConfig{OnMisuse: func(bytestream.MuxMisuse) { e.agentMisuse.Add(1) }})
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	if err := proveKey(sess, resp, signer); err != nil {
		_ = sess.Close()
		return nil, err
	}
	a := &fakeAgent{conn: conn, sess: sess, resp: resp}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		for {
			st, err := sess.AcceptStream()
			if err != nil {
				return
			}
			a.wg.Add(1)
			go func() {
				defer a.wg.Done()
				_, _ = io.Copy(st, st)
				_ = st.Close()
			}()
		}
	}()
	e.t.Cleanup(a.close)
	return a, nil
}

func (a *fakeAgent) close() { _ = a.sess.Close(); a.wg.Wait() }

// refuse ends the tunnel as an agent refusing the gateway does: a close
// frame with status 1008 and its reason.
func (a *fakeAgent) refuse(reason string) {
	_ = bytestream.CloseWithReason(a.conn, bytestream.StatusPolicyViolation, reason)
	a.close()
}

// relay dials GET /v1/hosts/{id}/ssh; the conn is closed when the test
// ends.
func (e *env) relay(id, token string) (net.Conn, error) {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+token)
	c, err := bytestream.WebSocket(e.ctx, e.ts.URL+"/v1/hosts/"+id+"/ssh", &bytestream.WebSocketOptions{Header: h})
	if err == nil {
		e.t.Cleanup(func() { _ = c.Close() })
	}
	return c, err
}

func echoRoundTrip(t *testing.T, c net.Conn, n int) {
	t.Helper()
	if err := echoCheck(c, n); err != nil {
		t.Fatal(err)
	}
}

// echoCheck writes n random bytes and checks they come back unchanged.
func echoCheck(c net.Conn, n int) error {
	msg := make([]byte, n)
	_, _ = rand.Read(msg)
	errc := make(chan error, 1)
	go func() { _, err := c.Write(msg); errc <- err }()
	got := make([]byte, n)
	if _, err := io.ReadFull(c, got); err != nil {
		return fmt.Errorf("read echo: %w", err)
	}
	if err := <-errc; err != nil {
		return err
	}
	if !bytes.Equal(got, msg) {
		return errors.New("echo differs")
	}
	return nil
}

func TestHealthAndUnknownRoutes(t *testing.T) {
	e := newEnv(t, nil)
	if code, _ := e.call("GET", "/healthz", "", nil, nil); code != 200 {
		t.Errorf("healthz %d", code)
	}
	var ready map[string]any
	if code, _ := e.call("GET", "/readyz", "", nil, &ready); code != 200 || ready["status"] != "ready" {
		t.Errorf("readyz %d %v", code, ready)
	}
	if code, c := e.call("GET", "/v1/nothing", "", nil, nil); code != 404 || c != "not_found" {
		t.Errorf("unknown route %d %s", code, c)
	}
}

// TestServeHeaderLimit: Serve's server takes headers up to 64 KiB and
// answers past that with net/http's plain-text 431 before any handler
// runs, the one non-JSON error the README's Errors section names.
func TestServeHeaderLimit(t *testing.T) {
	e := newEnv(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.srv.Serve(ln) }()
	defer func() {
		_ = e.srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	}()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	get := func(cookie int) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(e.ctx, "GET", "http://"+ln.Addr().String()+"/healthz", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Cookie", "c="+strings.Repeat("x", cookie))
		res, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = res.Body.Close() }()
		return res.StatusCode, res.Header.Get("Content-Type")
	}
	if code, _ := get(60 << 10); code != http.StatusOK {
		t.Errorf("60 KiB of headers: %d, want 200", code)
	}
	if code, ct := get(80 << 10); code != http.StatusRequestHeaderFieldsTooLarge || !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("80 KiB of headers: %d %q, want 431 text/plain (README, Errors)", code, ct)
	}
}

// TestClientTokenOtherHostSaysWhy: a client token asking for a host it does
// not name is told so and how to get one that does, in the same words
// whether the host exists or not (no probing). It was "no such host", which
// sent the holder of a token made for another host looking for a host
// that was there.
func TestClientTokenOtherHostSaysWhy(t *testing.T) {
	e := newEnv(t, nil)
	clientA := e.token(store.RoleClient, "a")
	_, key := newKey(t)
	if _, err := e.store.Enroll(e.ctx, store.Enrollment{HostID: "b", Kind: "machine", HostKey: key}); err != nil {
		t.Fatal(err)
	}
	messages := map[string]string{}
	for _, id := range []string{"b", "zzz"} {
		req, _ := http.NewRequestWithContext(e.ctx, "GET", e.ts.URL+"/v1/hosts/"+id, nil)
		req.Header.Set("Authorization", "Bearer "+clientA)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		we, _ := wire.ParseError(b)
		if res.StatusCode != http.StatusNotFound || we.Code != "not_found" {
			t.Fatalf("GET /v1/hosts/%s with another host's client token: %d %s, want 404 not_found", id, res.StatusCode, b)
		}
		if !strings.HasPrefix(we.Message, "host "+id+": ") || !strings.Contains(we.Message, "--host") {
			t.Errorf("GET /v1/hosts/%s: message %q names neither the host nor the token's --host", id, we.Message)
		}
		messages[id] = strings.ReplaceAll(we.Message, id, "ID")
	}
	if messages["b"] != messages["zzz"] {
		t.Errorf("an existing host and a missing one answer apart: %q, %q", messages["b"], messages["zzz"])
	}
}

func TestAuthAndScopes(t *testing.T) {
	e := newEnv(t, nil)
	admin := e.token(store.RoleAdmin)
	clientA := e.token(store.RoleClient, "a")
	agentA := e.token(store.RoleAgent, "a")
	for _, id := range []string{"a", "b"} {
		_, key := newKey(t)
		if _, err := e.store.Enroll(e.ctx, store.Enrollment{HostID: id, Kind: "machine", HostKey: key}); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		method, path, token string
		status              int
		code                string
	}{
		{"GET", "/v1/hosts", "", 401, "unauthorized"},
		{"GET", "/v1/hosts", "hg_wrong", 401, "unauthorized"},
		{"GET", "/v1/hosts/a", "not-even-a-token", 401, "unauthorized"},
		{"GET", "/v1/hosts", agentA, 403, "forbidden"},
		{"GET", "/v1/hosts/a", agentA, 403, "forbidden"},
		{"GET", "/v1/hosts/a", clientA, 200, ""},
		{"GET", "/v1/hosts/b", clientA, 404, "not_found"},
		{"POST", "/v1/hosts/b/certificates", clientA, 404, "not_found"},
		{"GET", "/v1/hosts/b/ssh", clientA, 404, "not_found"},
		{"GET", "/v1/hosts/b", admin, 200, ""},
		{"GET", "/v1/hosts/zzz", admin, 404, "not_found"},
		{"GET", "/v1/hosts/bad%2Fid", admin, 404, "not_found"},
		{"GET", "/v1/hosts/a/ssh", admin, 503, "host_offline"},
		{"GET", "/v1/hosts/zzz/ssh", admin, 404, "not_found"},
		{"GET", "/v1/agents/connect", clientA, 403, "forbidden"},
	}
	for _, c := range cases {
		code, errCode := e.call(c.method, c.path, c.token, nil, nil)
		if code != c.status || errCode != c.code {
			t.Errorf("%s %s: %d %q, want %d %q", c.method, c.path, code, errCode, c.status, c.code)
		}
	}
	// A message about one host begins with it, as the tunnel's close
	// reasons do: the Go client, which names the host itself, drops it.
	hdr := http.Header{}
	wsHeaders(hdr)
	if res, b := e.raw("GET", "/v1/hosts/a/ssh", admin, hdr); res.StatusCode != 503 || !strings.Contains(string(b), `"message":"host a: not connected to the gateway"`) {
		t.Errorf("GET /v1/hosts/a/ssh of an offline host: %d %s, want the message to begin with host a:", res.StatusCode, b)
	}
	// A plain request to a WebSocket endpoint changes nothing: no pin.
	_, k := newKey(t)
	req, _ := http.NewRequestWithContext(e.ctx, "GET", e.ts.URL+wire.ConnectPath, nil)
	req.Header.Set("Authorization", "Bearer "+e.token(store.RoleAgent, "c"))
	req.Header.Set(wire.HeaderHostKey, k)
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusUpgradeRequired {
		t.Errorf("plain connect: %v %v", res, err)
	} else {
		res.Body.Close()
	}
	if _, err := e.store.Host(e.ctx, "c"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("plain connect enrolled the host: %v", err)
	}

	// With the cookie, a cross-origin POST is refused (CSRF); a
	// same-origin one passes authentication.
	for origin, want := range map[string]int{"https://evil.example": 403, e.ts.URL: 400} {
		req, _ := http.NewRequestWithContext(e.ctx, "POST", e.ts.URL+"/v1/hosts/a/certificates", strings.NewReader("{}"))
		req.AddCookie(&http.Cookie{Name: SessionCookie, Value: clientA})
		req.Header.Set("Origin", origin)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("cookie POST from %s: %d, want %d", origin, res.StatusCode, want)
		}
	}

	var list struct{ Hosts []HostRecord }
	if code, _ := e.call("GET", "/v1/hosts", clientA, nil, &list); code != 200 || len(list.Hosts) != 1 || list.Hosts[0].ID != "a" {
		t.Errorf("client list: %d %+v", code, list)
	}
	if code, _ := e.call("GET", "/v1/hosts", admin, nil, &list); code != 200 || len(list.Hosts) != 2 {
		t.Errorf("admin list: %d %+v", code, list)
	}
	var me map[string]any
	if code, _ := e.call("GET", "/v1/me", clientA, nil, &me); code != 200 || me["role"] != "client" {
		t.Errorf("me: %d %v", code, me)
	}
	// The session cookie works like the bearer header.
	req, _ = http.NewRequestWithContext(e.ctx, "GET", e.ts.URL+"/v1/hosts/a", nil)
	req.AddCookie(&http.Cookie{Name: SessionCookie, Value: clientA})
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("cookie auth: %d", res.StatusCode)
	}
}

func TestAuthFailuresRateLimited(t *testing.T) {
	e := newEnv(t, &Config{AuthFailureLimit: 5, AuthFailureWindow: time.Minute})
	t0 := time.Now()
	var elapsed atomic.Int64 // the limiter's clock, as time since t0
	e.srv.limiter.now = func() time.Time { return t0.Add(time.Duration(elapsed.Load())) }
	var logs testenv.LogBuffer
	e.srv.logger = slog.New(slog.NewTextHandler(&logs, nil))
	good := e.token(store.RoleAdmin)
	for i := range 5 {
		if code, _ := e.call("GET", "/v1/hosts", fmt.Sprintf("hg_guess%d", i), nil, nil); code != 401 {
			t.Fatalf("guess %d: %d", i, code)
		}
	}
	// The block is logged once, naming the address (found by the audit32
	// audit: every developer behind one address got 429 with nothing in
	// the gateway's log to say why).
	if n := strings.Count(logs.String(), "too many failed authentications"); n != 1 || !strings.Contains(logs.String(), "client=127.0.0.1") {
		t.Errorf("the block of the source logged %d times, want once with the address:\n%s", n, logs.String())
	}
	// The source is now blocked: even a valid token is refused, so
	// guessing cannot continue.
	for _, tok := range []string{"hg_guess", good} {
		if code, c := e.call("GET", "/v1/hosts", tok, nil, nil); code != 429 || c != "rate_limited" {
			t.Errorf("after 5 failures: %d %q", code, c)
		}
	}
	if n := strings.Count(logs.String(), "too many failed authentications"); n != 1 {
		t.Errorf("the refusals while blocked logged the block again (%d lines)", n)
	}
	// The answer says why a valid token is refused and what to do: it
	// said "too many failed authentications; try again later", which
	// left the holder of a good token to think the token was at fault,
	// and named neither the address nor the culprit to look for.
	res, body := e.raw("GET", "/v1/hosts", good, nil)
	var ans struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(body, &ans); err != nil || res.StatusCode != 429 {
		t.Fatalf("blocked: %d %s", res.StatusCode, body)
	}
	for _, want := range []string{"127.0.0.1", "valid tokens too", "Retry-After", "revoked or mistyped token"} {
		if !strings.Contains(ans.Error.Message, want) {
			t.Errorf("429's message %q does not say %q", ans.Error.Message, want)
		}
	}
	// Retry-After is what is left of the window (it said 60 whatever
	// was left), in whole seconds rounded up.
	if got := res.Header.Get("Retry-After"); got != "60" {
		t.Errorf("Retry-After at the block: %q, want 60", got)
	}
	elapsed.Store(int64(45*time.Second + 300*time.Millisecond))
	if res, _ := e.raw("GET", "/v1/hosts", good, nil); res.StatusCode != 429 || res.Header.Get("Retry-After") != "15" {
		t.Errorf("45.3 s into a 1-minute window: %d, Retry-After %q, want 429 and 15", res.StatusCode, res.Header.Get("Retry-After"))
	}
	// The window moves on: the source may try again.
	elapsed.Store(int64(2 * time.Minute))
	if code, _ := e.call("GET", "/v1/hosts", good, nil, nil); code != 200 {
		t.Errorf("after the window: %d", code)
	}
}

// Asking without credentials is what a browser does before it logs in,
// and on every preview origin: it must not use up the source's budget.
func TestAuthMissingCredentialsNotLimited(t *testing.T) {
	e := newEnv(t, &Config{AuthFailureLimit: 5})
	good := e.token(store.RoleAdmin)
	for i := range 20 {
		if code, c := e.call("GET", "/v1/hosts", "", nil, nil); code != 401 || c != "unauthorized" {
			t.Fatalf("request %d without credentials: %d %q, want 401", i, code, c)
		}
	}
	if code, _ := e.call("GET", "/v1/hosts", good, nil, nil); code != 200 {
		t.Errorf("a good token after 20 requests without credentials: %d, want 200", code)
	}
}

func TestLimiterBounded(t *testing.T) {
	now := time.Now()
	l := newLimiter(2, time.Minute, func() time.Time { return now })
	// One failure each from more sources than the table holds: a flood of
	// addresses, none of them blocked.
	for i := range limiterSlots + 10 {
		l.fail(fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&255, i&255))
	}
	if len(l.buckets) > limiterSlots {
		t.Fatalf("table grew to %d", len(l.buckets))
	}
	// A new source is not blocked by the flood, and its own failures
	// still count: it takes a slot of a source that is not blocked.
	if l.blocked("192.0.2.1") {
		t.Fatal("a new source is blocked after a flood of single failures from other addresses")
	}
	if l.fail("192.0.2.1"); l.blocked("192.0.2.1") {
		t.Fatal("blocked after one failure of two")
	}
	if !l.fail("192.0.2.1") || !l.blocked("192.0.2.1") {
		t.Fatal("not blocked after its second failure in a full table")
	}
	// A blocked source keeps its slot while others churn.
	for i := range 1000 {
		l.fail(fmt.Sprintf("172.16.%d.%d", i>>8, i&255))
	}
	if !l.blocked("192.0.2.1") {
		t.Error("a blocked source lost its block to other sources' failures")
	}
	now = now.Add(2 * time.Minute)
	l.fail("198.51.100.1")
	if _, ok := l.buckets[source("198.51.100.1")]; !ok || len(l.buckets) > limiterSlots {
		t.Errorf("expired buckets not pruned: %d", len(l.buckets))
	}
	if len(l.buckets) > 10 {
		t.Errorf("%d buckets left after the window, want the new one", len(l.buckets))
	}
}

// Only when every slot holds a blocked source do new sources share the
// overflow bucket: the table stays bounded whatever the flood.
func TestLimiterFullOfBlocked(t *testing.T) {
	now := time.Now()
	l := newLimiter(1, time.Minute, func() time.Time { return now })
	for i := range limiterSlots {
		l.fail(fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&255, i&255))
	}
	if l.blocked("192.0.2.1") {
		t.Fatal("a new source blocked before the overflow bucket had a failure")
	}
	l.fail("192.0.2.1")
	if len(l.buckets) > limiterSlots {
		t.Fatalf("table grew to %d", len(l.buckets))
	}
	if !l.blocked("192.0.2.2") {
		t.Error("sources without a slot do not share the overflow bucket")
	}
	if !l.blocked("10.0.0.1") {
		t.Error("a blocked source lost its slot")
	}
}

// An IPv6 source is its /64: a machine has a whole /64 to send from.
func TestLimiterIPv6Subnet(t *testing.T) {
	now := time.Now()
	l := newLimiter(3, time.Minute, func() time.Time { return now })
	for i := range 3 {
		l.fail(fmt.Sprintf("2001:db8:1:2::%x", i+1))
	}
	for _, ip := range []string{"2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::99%eth0"} {
		if !l.blocked(ip) {
			t.Errorf("%s not blocked after 3 failures from its /64", ip)
		}
	}
	if l.blocked("2001:db8:1:3::1") {
		t.Error("another /64 blocked")
	}
	// IPv4 addresses count alone, mapped or not.
	for range 3 {
		l.fail("::ffff:192.0.2.7")
	}
	if !l.blocked("192.0.2.7") {
		t.Error("192.0.2.7 not blocked after 3 failures as ::ffff:192.0.2.7")
	}
	if l.blocked("192.0.2.8") {
		t.Error("a neighbouring IPv4 address blocked")
	}
}

func TestCertificate(t *testing.T) {
	e := newEnv(t, &Config{CertTTL: 3 * time.Minute})
	_, hostKey := newKey(t)
	if _, err := e.store.Enroll(e.ctx, store.Enrollment{HostID: "a", HostKey: hostKey}); err != nil {
		t.Fatal(err)
	}
	client := e.token(store.RoleClient, "a")
	user, userPub := newKey(t)
	for _, bad := range []string{`{`, `[]`, `{"publicKey":"nope"}`, `{"publicKey":""}`, `{"publicKey":"` + userPub + `"} trailing`,
		`{"publicKey":"` + strings.Repeat("A", maxBody) + `"}`} {
		code, c := e.call("POST", "/v1/hosts/a/certificates", client, bad, nil)
		if code != 400 && code != 413 {
			t.Errorf("body %.40q: %d %s", bad, code, c)
		}
	}
	var res certResponse
	if code, c := e.call("POST", "/v1/hosts/a/certificates", client, certRequest{PublicKey: userPub}, &res); code != 200 {
		t.Fatalf("sign: %d %s", code, c)
	}
	pk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(res.Certificate))
	if err != nil {
		t.Fatal(err)
	}
	cert := pk.(*ssh.Certificate)
	if !bytes.Equal(cert.Key.Marshal(), user.PublicKey().Marshal()) {
		t.Error("certificate for another key")
	}
	if cert.KeyId != "client-a" || len(cert.ValidPrincipals) != 1 || cert.ValidPrincipals[0] != "a" {
		t.Errorf("key id %q principals %v", cert.KeyId, cert.ValidPrincipals)
	}
	// The token's id, by which an agent's direct listener has the gateway
	// admit the session.
	if tok, _ := e.store.LookupToken(e.ctx, client); cert.Extensions[wire.CertTokenExtension] != tok.ID || tok.ID == "" {
		t.Errorf("certificate's %s %q, want the token's id %q", wire.CertTokenExtension, cert.Extensions[wire.CertTokenExtension], tok.ID)
	}
	checker := ssh.CertChecker{IsUserAuthority: func(k ssh.PublicKey) bool {
		return bytes.Equal(k.Marshal(), e.srv.CA().PublicKey().Marshal())
	}}
	if err := checker.CheckCert("a", cert); err != nil {
		t.Fatalf("agent would refuse: %v", err)
	}
	if d := time.Until(res.ValidBefore); d <= 2*time.Minute || d > 3*time.Minute+5*time.Second {
		t.Errorf("validBefore in %v", d)
	}
	pub, _, _, _, _ := ssh.ParseAuthorizedKey([]byte(hostKey))
	if res.HostKey != ssh.FingerprintSHA256(pub) || res.HostPublicKey != hostKey {
		t.Errorf("hostKey %q hostPublicKey %q, want the pinned key's fingerprint and the key (gateway cert writes it to known_hosts)", res.HostKey, res.HostPublicKey)
	}
	sessions, _ := e.store.Sessions(e.ctx, 10)
	if len(sessions) != 1 || sessions[0].Kind != "certificate" || sessions[0].TokenName != "client-a" {
		t.Errorf("audit: %+v", sessions)
	}
	// A reset host has no key to trust: no certificate until it re-enrolls.
	if err := e.store.ResetHostKey(e.ctx, "a", "test"); err != nil {
		t.Fatal(err)
	}
	if code, c := e.call("POST", "/v1/hosts/a/certificates", client, certRequest{PublicKey: userPub}, nil); code != 409 {
		t.Errorf("after reset: %d %s", code, c)
	}
}

// TestCertificateAgentForwarding: a certificate permits agent forwarding
// only for a host whose agent forwards one: a machine's, not a sandbox's
// (kind docker), nor one whose agent said on connecting that it was started
// with --no-agent-forwarding (until it connects again without it); those
// agents refuse ssh -A whatever the certificate says. Before, every
// certificate permitted it (found by the leftovers29 audit).
func TestCertificateAgentForwarding(t *testing.T) {
	e := newEnv(t, nil)
	admin := e.token(store.RoleAdmin)
	_, userPub := newKey(t)
	permits := func(id string) bool {
		t.Helper()
		return e.certPermitsAgent(t, admin, id, userPub)
	}
	for _, tc := range []struct {
		kind  string
		agent bool
	}{{"machine", true}, {"local", true}, {store.KindDocker, false}} {
		_, hostKey := newKey(t)
		id := "host-" + tc.kind
		if _, err := e.store.Enroll(e.ctx, store.Enrollment{HostID: id, Kind: tc.kind, HostKey: hostKey}); err != nil {
			t.Fatal(err)
		}
		if got := permits(id); got != tc.agent {
			t.Errorf("a %s host's certificate permits agent forwarding: %v, want %v", tc.kind, got, tc.agent)
		}
	}

	_, hostKey := newKey(t)
	e.pin("m", hostKey)
	agentTok := e.token(store.RoleAgent, "m")
	off := http.Header{wire.HeaderAgentForwarding: {wire.AgentForwardingOff}}
	for i, tc := range []struct {
		header http.Header
		agent  bool
	}{{off, false}, {nil, true}, {off, false}} {
		a, err := e.dialAgentHeader(agentTok, hostKey, hostgate.Info{Kind: "machine"}, signerOf(hostKey), tc.header)
		if err != nil {
			t.Fatal(err)
		}
		if got := permits("m"); got != tc.agent {
			t.Errorf("tunnel %d (%s %q): the certificate permits agent forwarding: %v, want %v", i, wire.HeaderAgentForwarding, tc.header.Get(wire.HeaderAgentForwarding), got, tc.agent)
		}
		a.close()
	}
}

// certPermitsAgent signs userPub for host id with token and reports
// whether the certificate permits agent forwarding; it fails the test
// unless it also permits what every certificate does.
func (e *env) certPermitsAgent(t testing.TB, token, id, userPub string) bool {
	t.Helper()
	var res certResponse
	if code, c := e.call("POST", "/v1/hosts/"+id+"/certificates", token, certRequest{PublicKey: userPub}, &res); code != 200 {
		t.Fatalf("%s: sign: %d %s", id, code, c)
	}
	pk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(res.Certificate))
	if err != nil {
		t.Fatal(err)
	}
	ext := pk.(*ssh.Certificate).Extensions
	for _, want := range []string{"permit-pty", "permit-port-forwarding"} {
		if _, ok := ext[want]; !ok {
			t.Errorf("host %s's certificate: extensions %v, want %s", id, ext, want)
		}
	}
	_, ok := ext["permit-agent-forwarding"]
	return ok
}

// TestCertificateAgentForwardingRace: of two tunnels of one host that
// connect at once, one from an agent with --no-agent-forwarding and one
// without, the certificate says what the tunnel that won (the one still
// registered) says. The setting was kept in a map of its own, written just
// after the registration, so the replaced tunnel's write could land last:
// here the first tunnel is held between the two until the second has
// replaced it and been answered (found by the leftovers30 audit).
func TestCertificateAgentForwardingRace(t *testing.T) {
	e := newEnv(t, nil)
	admin := e.token(store.RoleAdmin)
	_, userPub := newKey(t)
	_, hostKey := newKey(t)
	e.pin("m", hostKey)
	agentTok := e.token(store.RoleAgent, "m")
	dial := func(agentFwd bool) (*fakeAgent, error) {
		var hdr http.Header
		if !agentFwd {
			hdr = http.Header{wire.HeaderAgentForwarding: {wire.AgentForwardingOff}}
		}
		return e.dialAgentHeader(agentTok, hostKey, hostgate.Info{Kind: "machine"}, signerOf(hostKey), hdr)
	}
	for _, firstFwd := range []bool{false, true} {
		finish := e.dialHeld(func() (*fakeAgent, error) { return dial(firstFwd) })
		second, err := dial(!firstFwd)
		if err != nil {
			t.Fatal(err)
		}
		// The replaced tunnel's agent may see 101 and then its close, or
		// its dial fail: either way it is gone.
		if r := finish(); r.err == nil {
			<-r.a.sess.CloseChan()
			r.a.close()
		}
		if got := e.certPermitsAgent(t, admin, "m", userPub); got != !firstFwd {
			t.Errorf("first tunnel forwards agents %v, the second (which replaced it) %v: the certificate permits agent forwarding: %v", firstFwd, !firstFwd, got)
		}
		second.close()
	}
	e.srv.testHookRegistered = nil
}

// dialResult is a fake agent's dial's outcome.
type dialResult struct {
	a   *fakeAgent
	err error
}

// dialHeld starts dial and holds its connection's handler just after the
// tunnel's registration, before the upgrade answers, until finish lets
// it go on and returns the dial's outcome: a second connection can
// replace the first in that window. The hook stays set for the env.
func (e *env) dialHeld(dial func() (*fakeAgent, error)) (finish func() dialResult) {
	held, release := make(chan struct{}), make(chan struct{})
	var first atomic.Bool // a sync.Once would hold the second too
	e.srv.testHookRegistered = func(string) {
		if first.CompareAndSwap(false, true) {
			close(held)
			<-release
		}
	}
	res := make(chan dialResult, 1)
	go func() {
		a, err := dial()
		res <- dialResult{a, err}
	}()
	<-held
	return func() dialResult {
		close(release)
		return <-res
	}
}

func TestEnrollRelayAndImpostor(t *testing.T) {
	e := newEnv(t, nil)
	agentTok := e.token(store.RoleAgent, "h1")
	_, realKey := newKey(t)
	info := hostgate.Info{Kind: "machine", OS: "linux", Home: "/root"}
	real, err := e.dialAgent(agentTok, realKey, info)
	if err != nil {
		t.Fatal(err)
	}
	if got := real.resp.Header.Get(wire.HeaderCAKey); got != e.srv.CA().AuthorizedKey() {
		t.Errorf("CA header %q", got)
	}
	if got := real.resp.Header.Get(wire.HeaderHostID); got != "h1" {
		t.Errorf("host id header %q", got)
	}
	if a, _ := e.store.Sessions(e.ctx, 1); len(a) != 1 || a[0].Kind != "tunnel" || a[0].HostID != "h1" || a[0].TokenName != "agent-h1" {
		t.Errorf("tunnel audit: %+v", a)
	}
	admin := e.token(store.RoleAdmin)
	var rec HostRecord
	if code, c := e.call("GET", "/v1/hosts/h1", admin, nil, &rec); code != 200 {
		t.Fatalf("get: %d %s", code, c)
	}
	pub, _, _, _, _ := ssh.ParseAuthorizedKey([]byte(realKey))
	if !rec.Connected || rec.HostPublicKey != realKey || rec.HostKey != ssh.FingerprintSHA256(pub) || rec.Kind != "machine" {
		t.Errorf("record %+v", rec)
	}
	var gotInfo hostgate.Info
	if err := json.Unmarshal(rec.Info, &gotInfo); err != nil || gotInfo != info {
		t.Errorf("info %s %v", rec.Info, err)
	}

	c, err := e.relay("h1", admin)
	if err != nil {
		t.Fatal(err)
	}
	echoRoundTrip(t, c, 300<<10) // larger than one WebSocket message and the read limit

	// An impostor (same token, other key) is refused before the upgrade…
	_, otherKey := newKey(t)
	_, err = e.dialAgent(agentTok, otherKey, info)
	var he *bytestream.HandshakeError
	if !errors.As(err, &he) || he.StatusCode != http.StatusConflict {
		t.Fatalf("impostor: %v", err)
	}
	if we, ok := wire.ParseError([]byte(he.Body)); !ok || we.Code != "host_key_mismatch" || !strings.Contains(we.Message, "reset-key h1") {
		t.Errorf("impostor answer %q", he.Body)
	}
	// …and the real tunnel and its relay keep working.
	echoRoundTrip(t, c, 1000)
	c2, err := e.relay("h1", admin)
	if err != nil {
		t.Fatal(err)
	}
	echoRoundTrip(t, c2, 10)
	_ = c2.Close()
	_ = c.Close()

	// Other refusals before the upgrade.
	for _, tc := range []struct {
		token, key string
		status     int
	}{
		{e.token(store.RoleClient, "h1"), realKey, 403},
		{agentTok, "garbage", 400},
		{"hg_nope", realKey, 401},
	} {
		_, err := e.dialAgent(tc.token, tc.key, info)
		if !errors.As(err, &he) || he.StatusCode != tc.status {
			t.Errorf("dial with %q: %v, want %d", tc.key, err, tc.status)
		}
	}

	// The agent reconnects with its key: the new tunnel replaces the old.
	done := e.srv.Tunnels().Done("h1")
	again, err := e.dialAgent(agentTok, realKey, info)
	if err != nil {
		t.Fatal(err)
	}
	waitClosed(t, done, "replaced tunnel")
	// And when the agent goes away and comes back, that is a reconnect.
	done = e.srv.Tunnels().Done("h1")
	again.close()
	waitClosed(t, done, "tunnel before reconnect")
	again, err = e.dialAgent(agentTok, realKey, info)
	if err != nil {
		t.Fatal(err)
	}
	b := e.metricsText()
	for _, want := range []string{`result="new"} 1`, `result="replaced"} 1`, `result="reconnect"} 1`, `result="refused"} 1`} {
		if !strings.Contains(b, "hostgate_tunnel_connects_total{"+want) {
			t.Errorf("metrics lack tunnel connects %s", want)
		}
	}
	c3, err := e.relay("h1", admin)
	if err != nil {
		t.Fatal(err)
	}
	echoRoundTrip(t, c3, 10)
	_ = c3.Close()

	// The agent goes away: its host reads offline and callers get a clear
	// 503, not a hang.
	done = e.srv.Tunnels().Done("h1")
	again.close()
	waitClosed(t, done, "tunnel after agent close")
	if code, c := e.call("GET", "/v1/hosts/h1/ssh", admin, nil, nil); code != 503 || c != "host_offline" {
		t.Errorf("offline relay: %d %s", code, c)
	}
	if code, _ := e.call("GET", "/v1/hosts/h1", admin, nil, &rec); code != 200 || rec.Connected {
		t.Errorf("offline record %+v", rec)
	}
	_ = real
}

// TestLastSeen: a host's lastSeen is when the gateway last saw it: now
// while connected, when its tunnel ended once it is gone. It was the
// store's last connect, so a host connected for a week and gone an hour
// read a week old (found by the audit32 audit).
func TestLastSeen(t *testing.T) {
	e := newEnv(t, nil)
	admin := e.token(store.RoleAdmin)
	_, key := newKey(t)
	a, err := e.dialAgent(e.token(store.RoleAgent, "h1"), key, hostgate.Info{Kind: "machine"})
	if err != nil {
		t.Fatal(err)
	}
	seen := func() time.Time {
		t.Helper()
		var rec HostRecord
		if code, c := e.call("GET", "/v1/hosts/h1", admin, nil, &rec); code != 200 || rec.LastSeen == nil {
			t.Fatalf("get: %d %s %+v", code, c, rec)
		}
		return *rec.LastSeen
	}
	time.Sleep(20 * time.Millisecond) // the store keeps milliseconds: the connect is before
	before := time.Now()
	if s := seen(); s.Before(before) {
		t.Errorf("lastSeen of a connected host %v, want now (at least %v)", s, before)
	}
	time.Sleep(20 * time.Millisecond)
	closing := time.Now()
	done := e.srv.Tunnels().Done("h1")
	a.close()
	waitClosed(t, done, "tunnel after agent close")
	for end := time.Now().Add(10 * time.Second); e.srv.Tunnels().Len() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the ended tunnel was never unregistered")
		}
	}
	s := seen()
	if s.Before(closing) {
		t.Errorf("lastSeen of a host gone at %v: %v, want when its tunnel ended", closing, s)
	}
	time.Sleep(20 * time.Millisecond)
	if s2 := seen(); !s2.Equal(s) {
		t.Errorf("lastSeen of a gone host moved: %v then %v", s, s2)
	}
}

// TestEnrollRequiresKeyPossession: the gateway pins a host key only after
// the agent signs an SSH key exchange with it. The key came in a request
// header and was pinned before the upgrade, so anyone with a host's agent
// token could pin, on its first enrollment or after a reset, a key they do
// not hold (another host's public key, say), and the real agent was then
// refused as an impostor until an admin reset the key again.
func TestEnrollRequiresKeyPossession(t *testing.T) {
	e := newEnv(t, nil)
	agentTok := e.token(store.RoleAgent, "h1")
	admin := e.token(store.RoleAdmin)
	info := hostgate.Info{Kind: "machine"}
	realSigner, realKey := newKey(t)
	otherSigner, otherKey := newKey(t)

	// Claims realKey, signs with another: refused, nothing pinned.
	if _, err := e.dialAgentSigner(agentTok, realKey, info, otherSigner); err == nil {
		t.Fatal("an agent that signed with another key than it presented was enrolled")
	}
	if h, err := e.store.Host(e.ctx, "h1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after a failed proof the host is %+v (%v), want none: the presented key was pinned", h, err)
	}
	if e.srv.Tunnels().Connected("h1") {
		t.Fatal("an unproven tunnel is connected")
	}
	if b := e.metricsText(); !strings.Contains(b, `hostgate_tunnel_connects_total{result="refused"} 1`) {
		t.Error("the failed proof is not counted as a refused connect")
	}

	// The holder of realKey enrolls, and the host serves.
	if _, err := e.dialAgentSigner(agentTok, realKey, info, realSigner); err != nil {
		t.Fatal(err)
	}
	if h, err := e.store.Host(e.ctx, "h1"); err != nil || h.HostKey != realKey {
		t.Fatalf("pinned %q (%v), want the proven key", h.HostKey, err)
	}
	c, err := e.relay("h1", admin)
	if err != nil {
		t.Fatal(err)
	}
	echoRoundTrip(t, c, 100)

	// After a reset, a claim of a key not held pins nothing and leaves
	// the live tunnel serving.
	if err := e.store.ResetHostKey(e.ctx, "h1", "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.dialAgentSigner(agentTok, otherKey, info, realSigner); err == nil {
		t.Fatal("after a reset, an agent that signed with another key than it presented was enrolled")
	}
	if h, err := e.store.Host(e.ctx, "h1"); err != nil || h.HostKey != "" {
		t.Fatalf("after a reset and a failed proof, pinned %q (%v), want none", h.HostKey, err)
	}
	echoRoundTrip(t, c, 100)
	_ = c.Close()
	if _, err := e.dialAgentSigner(agentTok, otherKey, info, otherSigner); err != nil {
		t.Fatal(err)
	}
	if h, err := e.store.Host(e.ctx, "h1"); err != nil || h.HostKey != otherKey {
		t.Fatalf("after a reset, pinned %q (%v), want the new proven key", h.HostKey, err)
	}
}

// TestOfflineHostSaysWhyItsAgentIsRefused: a caller who finds a host
// offline because its agent is refused (a reinstalled machine with a new
// host key) is told so and who can fix it, where it heard "not connected"
// alone (found by the audit30 audit); once the agent is served again, the
// refusal is forgotten.
func TestOfflineHostSaysWhyItsAgentIsRefused(t *testing.T) {
	e := newEnv(t, nil)
	agentTok := e.token(store.RoleAgent, "h1")
	admin := e.token(store.RoleAdmin)
	_, realKey := newKey(t)
	info := hostgate.Info{Kind: "machine", OS: "linux", Home: "/root"}
	offline := func() string { t.Helper(); return e.offlineMessage(t, "h1", admin) }
	a, err := e.dialAgent(agentTok, realKey, info)
	if err != nil {
		t.Fatal(err)
	}
	// An impostor refused while the real agent serves the host is not
	// the host's agent: its callers do not hear of it once it goes.
	_, otherKey := newKey(t)
	if _, err := e.dialAgent(agentTok, otherKey, info); err == nil {
		t.Fatal("an agent with another key was let in")
	}
	done := e.srv.Tunnels().Done("h1")
	a.close()
	waitClosed(t, done, "the agent's tunnel")
	if msg := offline(); msg != "host h1: not connected to the gateway" {
		t.Errorf("offline, refused only while served: %q", msg)
	}
	if _, err := e.dialAgent(agentTok, otherKey, info); err == nil {
		t.Fatal("an agent with another key was let in")
	}
	msg := offline()
	for _, want := range []string{"host h1: not connected to the gateway; its agent was refused ", " ago: it presents another host key than the pinned one", "`gateway host reset-key h1`"} {
		if !strings.Contains(msg, want) {
			t.Errorf("offline after a refusal: %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "SHA256:") {
		t.Errorf("offline after a refusal names a key: %q", msg)
	}
	// The previews' words (OfflineReason) are the API's.
	if ended, why := e.srv.OfflineReason("h1"); ended || !strings.Contains(msg, why) || !strings.Contains(why, "reset-key h1") {
		t.Errorf("OfflineReason after a refusal: %v %q, want the API's reason %q", ended, why, msg)
	}
	a, err = e.dialAgent(agentTok, realKey, info)
	if err != nil {
		t.Fatal(err)
	}
	done = e.srv.Tunnels().Done("h1")
	a.close()
	waitClosed(t, done, "the agent's tunnel")
	if msg := offline(); msg != "host h1: not connected to the gateway" {
		t.Errorf("offline after the agent was served again: %q", msg)
	}
}

// TestOfflineHostSaysWhyItsAgentRefusesTheGateway: an agent that refuses
// the gateway (its CA is not the one the agent pinned: a state dir
// restored without its CA key) closes its tunnel with its reason; a caller
// finding the host offline is told that reason, where it heard "not
// connected" alone while the gateway's log had it (found by the audit32
// audit). Served again, the host says nothing of it.
func TestOfflineHostSaysWhyItsAgentRefusesTheGateway(t *testing.T) {
	e := newEnv(t, nil)
	agentTok := e.token(store.RoleAgent, "h1")
	admin := e.token(store.RoleAdmin)
	_, key := newKey(t)
	info := hostgate.Info{Kind: "machine"}
	offline := func() string { t.Helper(); return e.offlineMessage(t, "h1", admin) }
	for range 2 { // pinned at the first: the second is not asked to prove its key
		a, err := e.dialAgent(agentTok, key, info)
		if err != nil {
			t.Fatal(err)
		}
		done := e.srv.Tunnels().Done("h1")
		// Escapes a terminal acts on: ESC, C1's CSI, and a bidi override
		// that would show what follows it reversed.
		a.refuse("agent refuses this gateway: its CA differs from the one the agent pinned (a new gateway state directory?)\x1b[2J\u009b2J\u202e")
		waitClosed(t, done, "the refusing agent's tunnel")
		for end := time.Now().Add(10 * time.Second); e.srv.Tunnels().Len() != 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatal("the ended tunnel was never unregistered")
			}
		}
		msg := offline()
		for _, want := range []string{"host h1: not connected to the gateway; its agent refused this gateway ", " ago: its CA differs from the one the agent pinned (a new gateway state directory?)"} {
			if !strings.Contains(msg, want) {
				t.Errorf("offline after the agent refused: %q lacks %q", msg, want)
			}
		}
		if strings.IndexFunc(msg, func(c rune) bool { return !unicode.IsPrint(c) }) >= 0 {
			t.Errorf("the agent's reason is passed on with characters a terminal does not print as text: %q", msg)
		}
	}
	a, err := e.dialAgent(agentTok, key, info)
	if err != nil {
		t.Fatal(err)
	}
	done := e.srv.Tunnels().Done("h1")
	a.close()
	waitClosed(t, done, "the agent's tunnel")
	if msg := offline(); msg != "host h1: not connected to the gateway" {
		t.Errorf("offline after the agent was served again: %q", msg)
	}
}

// offlineMessage is the message of host id's host_offline answer to a
// relay with token.
func (e *env) offlineMessage(t *testing.T, id, token string) string {
	t.Helper()
	_, err := e.relay(id, token)
	var he *bytestream.HandshakeError
	if !errors.As(err, &he) || he.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("relay to an offline host: %v", err)
	}
	we, ok := wire.ParseError([]byte(he.Body))
	if !ok || we.Code != "host_offline" {
		t.Fatalf("relay to an offline host: %s", he.Body)
	}
	return we.Message
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	if ch == nil {
		t.Fatalf("%s: no tunnel", what)
	}
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: still open after 30 s", what)
	}
}

// TestOversizedFrameClosesThatTunnelOnly: an agent that sends a WebSocket
// message above the read limit, or a malformed frame, loses its own tunnel,
// and a caller doing so loses its own relay; another host's tunnel and
// relay carry on.
func TestOversizedFrameClosesThatTunnelOnly(t *testing.T) {
	e := newEnv(t, &Config{ReadLimit: 64 << 10})
	admin := e.token(store.RoleAdmin)
	_, k2 := newKey(t)
	if _, err := e.dialAgent(e.token(store.RoleAgent, "good"), k2, hostgate.Info{}); err != nil {
		t.Fatal(err)
	}
	good, err := e.relay("good", admin)
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	echoRoundTrip(t, good, 100)

	ws := e.pinnedAgentWS("bad")
	done := e.srv.Tunnels().Done("bad")
	if err := ws.Write(e.ctx, websocket.MessageBinary, make([]byte, 64<<10+1)); err != nil {
		t.Fatal(err)
	}
	// Reading answers the gateway's close frame (else it waits 5 s for it).
	_, _, err = ws.Read(e.ctx)
	if websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
		t.Errorf("close status: %v", err)
	}
	waitClosed(t, done, "oversized agent tunnel")
	echoRoundTrip(t, good, 100)
	if !e.srv.Tunnels().Connected("good") || e.srv.Tunnels().Connected("bad") {
		t.Error("wrong tunnel closed")
	}

	// A malformed frame (unmasked, reserved bits set) on a raw upgraded
	// connection ends that tunnel only.
	_, k3 := newKey(t)
	e.pin("ugly", k3)
	raw := rawUpgrade(t, e, wire.ConnectPath, e.token(store.RoleAgent, "ugly"), k3)
	done = e.srv.Tunnels().Done("ugly")
	if _, err := raw.Write([]byte{0xf2, 0x05, 'h', 'e', 'l', 'l', 'o'}); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, done, "malformed agent tunnel")
	_ = raw.Close()

	// A caller's oversized message ends that relay only.
	h := http.Header{}
	h.Set("Authorization", "Bearer "+admin)
	cws, _, err := websocket.Dial(e.ctx, e.ts.URL+"/v1/hosts/good/ssh", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatal(err)
	}
	defer cws.CloseNow()
	// Echoed bytes come back in messages of up to bytestream.MaxMessageSize;
	// coder/websocket's default 32 KiB limit would end this side first (a
	// flake: 9 in 200 runs under load).
	cws.SetReadLimit(bytestream.DefaultReadLimit)
	if err := cws.Write(e.ctx, websocket.MessageBinary, make([]byte, 64<<10+1)); err != nil {
		t.Fatal(err)
	}
	// The gateway may relay (and the echo return) the part below the limit
	// before the limit trips; read until the close.
	for i := 0; ; i++ {
		_, _, err := cws.Read(e.ctx)
		if err == nil && i < 100 {
			continue
		}
		if websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
			t.Errorf("caller close status: %v", err)
		}
		break
	}
	echoRoundTrip(t, good, 100)
}

// pinnedAgentWS pins a new key for host id and dials its agent tunnel as
// a bare WebSocket, for a test to write what no agent would.
func (e *env) pinnedAgentWS(id string) *websocket.Conn {
	e.t.Helper()
	_, k := newKey(e.t)
	e.pin(id, k)
	h := http.Header{}
	h.Set("Authorization", "Bearer "+e.token(store.RoleAgent, id))
	h.Set(wire.HeaderHostKey, k)
	ws, _, err := websocket.Dial(e.ctx, e.ts.URL+wire.ConnectPath, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = ws.CloseNow() })
	return ws
}

// rawUpgrade performs a WebSocket upgrade by hand and returns the raw TCP
// connection, so a test can write bytes no WebSocket library would.
func rawUpgrade(t *testing.T, e *env, path, token, hostKey string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", e.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", e.ts.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set(wire.HeaderHostKey, hostKey)
	wsHeaders(req.Header)
	if err := req.Write(c); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil || res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("raw upgrade: %v %v", res, err)
	}
	return c
}

func TestStreamsPerTunnelBounded(t *testing.T) {
	e := newEnv(t, &Config{MaxStreamsPerTunnel: 2})
	admin := e.token(store.RoleAdmin)
	_, k := newKey(t)
	if _, err := e.dialAgent(e.token(store.RoleAgent, "h"), k, hostgate.Info{}); err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	for range 2 {
		c, err := e.relay("h", admin)
		if err != nil {
			t.Fatal(err)
		}
		echoRoundTrip(t, c, 10)
		conns = append(conns, c)
	}
	if code, c := e.call("GET", "/v1/hosts/h/ssh", admin, nil, nil); code != 503 || c != "too_many_streams" {
		t.Errorf("third stream: %d %s", code, c)
	}
	// It says the limit and what to do.
	req, _ := http.NewRequestWithContext(e.ctx, "GET", e.ts.URL+"/v1/hosts/h/ssh", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	wsHeaders(req.Header)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if we, _ := wire.ParseError(b); we.Message != "host h: too many open sessions: it has 2, the most one host may; close some (ssh sessions, SFTP, forwards, web terminals) and retry" {
		t.Errorf("third stream's message: %q", we.Message)
	}
	for _, c := range conns {
		_ = c.Close()
	}
}

func TestMetricsExposed(t *testing.T) {
	e := newEnv(t, nil)
	admin := e.token(store.RoleAdmin)
	_, k := newKey(t)
	if _, err := e.dialAgent(e.token(store.RoleAgent, "h"), k, hostgate.Info{}); err != nil {
		t.Fatal(err)
	}
	c, err := e.relay("h", admin)
	if err != nil {
		t.Fatal(err)
	}
	echoRoundTrip(t, c, 5000)
	e.call("GET", "/v1/hosts", "hg_bad", nil, nil)
	wants := []string{
		"hostgate_tunnels_connected 1",
		`hostgate_tunnel_connects_total{result="new"} 1`,
		"hostgate_streams_open 1",
		`hostgate_relayed_bytes_total{direction="to_host"} 5000`,
		`hostgate_relayed_bytes_total{direction="from_host"} 5000`,
		`hostgate_session_starts_total{kind="ssh"} 1`,
		`hostgate_auth_failures_total{reason="unknown"} 1`,
		"hostgate_relay_held_bytes 0",
		"go_goroutines",
		// The build: an upgrade shows in the scrape.
		`hostgate_build_info{version="` + buildinfo.Version() + `"} 1`,
	}
	// The relay counts a chunk after writing it on, so the echo can be
	// back before its last count (the test failed once under load):
	// look again for a while.
	var missing []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b := e.metricsText()
		missing = missing[:0]
		for _, want := range wants {
			if !strings.Contains(b, want) {
				missing = append(missing, want)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, m := range missing {
		t.Errorf("metrics lack %q", m)
	}
	_ = c.Close()
}

func (e *env) metricsText() string {
	e.t.Helper()
	res, err := http.Get(e.ts.URL + "/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

// TestCloseEndsTunnelsAndRelays: Close returns with every tunnel and relay
// gone (goleak checks the goroutines), and refuses new work after.
func TestCloseEndsTunnelsAndRelays(t *testing.T) {
	e := newEnv(t, nil)
	admin := e.token(store.RoleAdmin)
	_, k := newKey(t)
	agent, err := e.dialAgent(e.token(store.RoleAgent, "h"), k, hostgate.Info{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := e.relay("h", admin)
	if err != nil {
		t.Fatal(err)
	}
	echoRoundTrip(t, c, 10)
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("relay survived Close")
	}
	select {
	case <-agent.sess.CloseChan():
	case <-time.After(30 * time.Second):
		t.Error("agent tunnel survived Close")
	}
	if code, c := e.call("GET", "/v1/hosts/h/ssh", admin, nil, nil); code != 503 {
		t.Errorf("after close: %d %s", code, c)
	}
	var ready map[string]any
	if code, _ := e.call("GET", "/readyz", "", nil, &ready); code != 503 {
		t.Errorf("readyz after close: %d", code)
	}
}

// TestSlowCallerDoesNotStallOthers: one caller writes a lot and never
// reads its echo, so its stream's windows fill up all the way to the
// agent; another session on the same tunnel still round-trips.
func TestSlowCallerDoesNotStallOthers(t *testing.T) {
	e := newEnv(t, nil)
	admin := e.token(store.RoleAdmin)
	_, k := newKey(t)
	if _, err := e.dialAgent(e.token(store.RoleAgent, "h"), k, hostgate.Info{}); err != nil {
		t.Fatal(err)
	}
	slow, err := e.relay("h", admin)
	if err != nil {
		t.Fatal(err)
	}
	wrote := make(chan int64, 1)
	go func() {
		// Blocks once every buffer on the path is full; ends when closed.
		n, _ := io.Copy(slow, io.LimitReader(zeroReader{}, 64<<20))
		wrote <- n
	}()
	for range 3 {
		fast, err := e.relay("h", admin)
		if err != nil {
			t.Fatal(err)
		}
		echoRoundTrip(t, fast, 64<<10)
		_ = fast.Close()
	}
	_ = slow.Close()
	if n := <-wrote; n >= 64<<20 {
		t.Errorf("slow caller wrote all %d bytes without reading: no backpressure", n)
	}
}

// TestRelayMemorySpent: with the relay memory spent, sessions still
// carry every byte (the host waits for its callers instead), and neither
// side's window updates look like a flood to the other (each grants at
// least half a window, 128 KiB).
func TestRelayMemorySpent(t *testing.T) {
	e := newEnv(t, &Config{RelayMemory: 1})
	admin := e.token(store.RoleAdmin)
	_, k := newKey(t)
	if _, err := e.dialAgent(e.token(store.RoleAgent, "h"), k, hostgate.Info{}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 3 {
		c, err := e.relay("h", admin)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if err := echoCheck(c, 8<<20); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := e.agentMisuse.Load(); n != 0 {
		t.Errorf("the agent took %d of the gateway's frames for misuse, want none", n)
	}
	for _, want := range []string{`hostgate_agent_misuse_total{kind="stream_refused"} 0`, `hostgate_agent_misuse_total{kind="empty_window_update"} 0`} {
		if m := e.metricsText(); !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// farTunnels is a stand-in for a multi-replica relay: host "far" lives on
// another replica (here: an in-memory echo), everything else is local.
type farTunnels struct {
	local *Registry
	wg    *sync.WaitGroup
	// opened is told of each Add: the test's Wait must follow it by
	// something the race detector sees, and the relay's bytes reach the
	// test through the kernel's sockets, which it does not.
	opened chan<- struct{}
}

func (f farTunnels) Open(ctx context.Context, id string) (net.Conn, error) {
	if id != "far" {
		return f.local.Open(ctx, id)
	}
	a, b := net.Pipe()
	f.wg.Add(1)
	f.opened <- struct{}{}
	go func() { defer f.wg.Done(); _, _ = io.Copy(b, b); _ = b.Close() }()
	return a, nil
}

func (f farTunnels) Connected(id string) bool { return id == "far" || f.local.Connected(id) }

func TestRouteSeam(t *testing.T) {
	var wg sync.WaitGroup
	defer wg.Wait()
	opened := make(chan struct{}, 1)
	e := newEnv(t, &Config{Route: func(local *Registry) Tunnels { return farTunnels{local, &wg, opened} }})
	_, k := newKey(t)
	if _, err := e.store.Enroll(e.ctx, store.Enrollment{HostID: "far", HostKey: k}); err != nil {
		t.Fatal(err)
	}
	admin := e.token(store.RoleAdmin)
	var rec HostRecord
	if code, _ := e.call("GET", "/v1/hosts/far", admin, nil, &rec); code != 200 || !rec.Connected {
		t.Errorf("far host: %d %+v", code, rec)
	}
	c, err := e.relay("far", admin)
	if err != nil {
		t.Fatal(err)
	}
	echoRoundTrip(t, c, 1000)
	<-opened
	_ = c.Close()
}

type countShrinker struct{ n atomic.Int64 }

func (c *countShrinker) Shrink() { c.n.Add(1) }

// TestShrinkEveryStops: a relayed stream is asked to give back an empty
// receive buffer every interval while the relay runs, and never after.
func TestShrinkEveryStops(t *testing.T) {
	var c countShrinker
	stop := shrinkEvery(&c, time.Millisecond)
	deadline := time.Now().Add(10 * time.Second)
	for c.n.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("Shrink called %d times in 10 s at a 1 ms interval", c.n.Load())
		}
		time.Sleep(time.Millisecond)
	}
	stop()
	at := c.n.Load()
	time.Sleep(20 * time.Millisecond)
	if n := c.n.Load(); n > at+1 { // one call may have been under way
		t.Fatalf("Shrink called %d more times after stop", n-at)
	}
}

// TestRelayedStreamShrinks: the conn Registry.Open hands the relay must
// pass Shrink through to the tunnel's stream, or relaySSH never gives back
// a grown receive buffer (its wrapper once hid the method). A real yamux
// tunnel's conn must offer it, and a call must reach the stream.
func TestRelayedStreamShrinks(t *testing.T) {
	a, b := net.Pipe()
	agentSide, err := bytestream.MuxServer(a, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer agentSide.Close()
	gwSide, err := bytestream.MuxClient(b, DefaultTunnelMux())
	if err != nil {
		t.Fatal(err)
	}
	r := NewRegistry(0, nil)
	defer r.Close()
	if _, _, err := r.Register("h", MuxTunnel(gwSide)); err != nil {
		t.Fatal(err)
	}
	c, err := r.Open(t.Context(), "h")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(shrinker); !ok {
		t.Fatalf("Registry.Open returned %T, which has no Shrink: the relay cannot give back its buffer", c)
	}

	stream := &shrinkConn{}
	if _, _, err := r.Register("counted", stubTunnel{stream}); err != nil {
		t.Fatal(err)
	}
	c2, err := r.Open(t.Context(), "counted")
	if err != nil {
		t.Fatal(err)
	}
	c2.(shrinker).Shrink()
	if n := stream.n.Load(); n != 1 {
		t.Fatalf("Shrink on Registry.Open's conn reached the stream %d times, want 1", n)
	}
}

// shrinkConn is a stream that counts Shrink calls.
type shrinkConn struct {
	net.Conn
	countShrinker
}

// stubTunnel opens c as its only stream.
type stubTunnel struct{ c net.Conn }

func (s stubTunnel) Open(context.Context) (net.Conn, error) { return s.c, nil }
func (s stubTunnel) Close() error                           { return nil }
func (s stubTunnel) Done() <-chan struct{}                  { return nil }

// A WebSocket handshake the gateway cannot complete gets the API's JSON
// error, as every other refusal does.
func TestBadWebSocketHandshakeIsJSON(t *testing.T) {
	e := newEnv(t, nil)
	admin := e.token(store.RoleAdmin)
	for _, tc := range []struct {
		name, header, value string
		status              int
		code                string
	}{
		{"version 8", "Sec-WebSocket-Version", "8", http.StatusUpgradeRequired, "websocket_version"},
		{"no key", "Sec-WebSocket-Key", "", http.StatusBadRequest, "bad_request"},
		{"short key", "Sec-WebSocket-Key", "c2hvcnQ=", http.StatusBadRequest, "bad_request"},
	} {
		hdr := http.Header{}
		wsHeaders(hdr)
		hdr.Set(tc.header, tc.value)
		res, b := e.raw("GET", "/v1/hosts/h1/ssh", admin, hdr)
		we, ok := wire.ParseError(b)
		if res.StatusCode != tc.status || !ok || we.Code != tc.code || res.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s: %d %q %s; want %d with JSON code %q", tc.name, res.StatusCode, res.Header.Get("Content-Type"), b, tc.status, tc.code)
		}
	}
}

// raw sends a request with token and hdr and returns the response with
// its body read, for the tests that look past call's status and code.
func (e *env) raw(method, path, token string, hdr http.Header) (*http.Response, []byte) {
	e.t.Helper()
	req, _ := http.NewRequestWithContext(e.ctx, method, e.ts.URL+path, nil)
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res, b
}

// A route used with another method is 405 with Allow, in JSON; a path
// with no route is 404.
func TestWrongMethodIs405(t *testing.T) {
	e := newEnv(t, nil)
	admin := e.token(store.RoleAdmin)
	for _, tc := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{"DELETE", "/v1/hosts/h1", 405, "GET"},
		{"GET", "/v1/hosts/h1/certificates", 405, "POST"},
		{"POST", "/v1/hosts", 405, "GET"},
		{"GET", "/v1/nothing/here", 404, ""},
	} {
		res, b := e.raw(tc.method, tc.path, admin, nil)
		if _, ok := wire.ParseError(b); res.StatusCode != tc.status || res.Header.Get("Allow") != tc.allow || !ok {
			t.Errorf("%s %s: %d Allow %q %s; want %d Allow %q in JSON", tc.method, tc.path, res.StatusCode, res.Header.Get("Allow"), b, tc.status, tc.allow)
		}
	}
}

// A body of the wrong JSON shape is named in JSON's words, not Go's.
func TestJSONBodyErrorWording(t *testing.T) {
	type inner struct {
		N int `json:"n"`
	}
	type body struct {
		Key   string  `json:"publicKey"`
		Inner inner   `json:"inner"`
		Ptr   *string `json:"ptr"`
	}
	for in, want := range map[string]string{
		`[]`:                  "the body must be a JSON object, not an array",
		`{"publicKey":1}`:     "publicKey: want a JSON string, got a number",
		`{"inner":{"n":1.5}}`: "inner.n: want a JSON integer, got a number 1.5",
		`{"inner":"x"}`:       "inner: want a JSON object, got a string",
		`{"ptr":true}`:        "ptr: want a JSON string, got a bool",
		`{"publicKey":`:       "body: not valid JSON: unexpected EOF",
	} {
		var b body
		err := json.NewDecoder(strings.NewReader(in)).Decode(&b)
		if got := JSONBodyError(err); got != want {
			t.Errorf("%s: %q, want %q", in, got, want)
		}
	}
}

// LiveToken answers for a token id from a snapshot at most the auth
// cache's TTL old: a revoked token stops within it, an expired one at once.
func TestLiveToken(t *testing.T) {
	e := newEnv(t, &Config{TokenRecheck: 50 * time.Millisecond})
	_, tok, err := e.store.CreateToken(e.ctx, store.TokenSpec{Role: store.RoleClient, Hosts: []string{"h"}})
	if err != nil {
		t.Fatal(err)
	}
	// short must still be live at the first check: 2 s, far more than a
	// loaded machine stalls (at 200 ms it expired first, 1 run in 20 at
	// load 9).
	shortExp := time.Now().Add(2 * time.Second)
	_, short, err := e.store.CreateToken(e.ctx, store.TokenSpec{Role: store.RoleClient, Hosts: []string{"h"}, ExpiresAt: shortExp})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{tok.ID, short.ID} {
		if got, ok, err := e.srv.LiveToken(e.ctx, id); !ok || err != nil || got.ID != id {
			t.Fatalf("LiveToken(%s) = %v, %v, %v", id, got.ID, ok, err)
		}
	}
	if _, ok, err := e.srv.LiveToken(e.ctx, "nosuch"); ok || err != nil {
		t.Error("an unknown id is live")
	}
	if err := e.store.DeleteToken(e.ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(shortExp) + 100*time.Millisecond) // past the snapshot's TTL and short's expiry
	if _, ok, err := e.srv.LiveToken(e.ctx, tok.ID); ok || err != nil {
		t.Error("a revoked token is still live past the snapshot's TTL")
	}
	if _, ok, err := e.srv.LiveToken(e.ctx, short.ID); ok || err != nil {
		t.Error("an expired token is live")
	}
}

// pointReads counts the store's reads of one token by id.
type pointReads struct {
	store.Store
	n    atomic.Int64
	then func(id string) // after the read, before its answer
}

func (s *pointReads) Token(ctx context.Context, id string) (store.Token, error) {
	s.n.Add(1)
	t, err := s.Store.Token(ctx, id)
	if s.then != nil {
		s.then(id)
	}
	return t, err
}

// TestLiveTokenMadeAfterTheSnapshot: a token made after the token
// snapshot's read began (a fresh login's session, a token made and used
// at once) is live at once, not after the snapshot's TTL: it was not live
// for up to a second, in which a share it made was ended as if the token
// had been revoked, and a preview cookie for it sent the viewer back to
// log in. A miss asks the store once per snapshot, not per request.
func TestLiveTokenMadeAfterTheSnapshot(t *testing.T) {
	var reads *pointReads
	e := newEnvWrapped(t, &Config{TokenRecheck: time.Hour}, func(st store.Store) store.Store {
		reads = &pointReads{Store: st}
		return reads
	})
	_, old, err := e.store.CreateToken(e.ctx, store.TokenSpec{Role: store.RoleClient})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := e.srv.LiveToken(e.ctx, old.ID); !ok || err != nil { // the snapshot
		t.Fatalf("LiveToken(old) = %v, %v", ok, err)
	}
	_, fresh, err := e.store.CreateToken(e.ctx, store.TokenSpec{Role: store.RoleClient})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if got, ok, err := e.srv.LiveToken(e.ctx, fresh.ID); !ok || err != nil || got.ID != fresh.ID {
			t.Fatalf("LiveToken of a token made after the snapshot = %v, %v, %v; want it live", got.ID, ok, err)
		}
	}
	for range 3 {
		if _, ok, err := e.srv.LiveToken(e.ctx, "nosuch"); ok || err != nil {
			t.Fatalf("LiveToken(nosuch) = %v, %v", ok, err)
		}
	}
	if n := reads.n.Load(); n != 2 {
		t.Errorf("%d reads of one token for two ids missing from the snapshot, asked 3 times each; want 2", n)
	}
	// Revoked here (a logout) while its read was on its way: not kept
	// as live for the rest of the snapshot's life.
	_, gone, err := e.store.CreateToken(e.ctx, store.TokenSpec{Role: store.RoleClient})
	if err != nil {
		t.Fatal(err)
	}
	reads.then = func(id string) {
		if err := e.store.DeleteToken(e.ctx, id); err != nil {
			t.Error(err)
		}
		e.srv.tokenSet.drop(id)
	}
	_, _, _ = e.srv.LiveToken(e.ctx, gone.ID) // raced with its revocation: either answer
	reads.then = nil
	if _, ok, err := e.srv.LiveToken(e.ctx, gone.ID); ok || err != nil {
		t.Fatalf("LiveToken of a token revoked while it was read = %v, %v; want not live", ok, err)
	}
}

// Before the gateway has any token snapshot, a store that cannot list
// tokens makes LiveToken say it does not know, not that the token is
// dead: it answered false, and the gateway then deleted every persisted
// share as if its token had been revoked. A snapshot taken once is kept
// through a later outage.
func TestLiveTokenUnknownBeforeSnapshot(t *testing.T) {
	e := newEnv(t, &Config{TokenRecheck: 50 * time.Millisecond})
	_, tok, err := e.store.CreateToken(e.ctx, store.TokenSpec{Role: store.RoleClient, Hosts: []string{"h"}})
	if err != nil {
		t.Fatal(err)
	}
	real := e.srv.store
	e.srv.store = brokenStore{real}
	if _, ok, err := e.srv.LiveToken(e.ctx, tok.ID); ok || !errors.Is(err, ErrTokensUnknown) {
		t.Fatalf("LiveToken with no snapshot and a broken store: %v, %v; want ErrTokensUnknown", ok, err)
	}
	e.srv.store = real
	if _, ok, err := e.srv.LiveToken(e.ctx, tok.ID); !ok || err != nil {
		t.Fatalf("LiveToken once the store answers: %v, %v", ok, err)
	}
	e.srv.store = brokenStore{real}
	time.Sleep(100 * time.Millisecond) // past the snapshot's TTL
	if _, ok, err := e.srv.LiveToken(e.ctx, tok.ID); !ok || err != nil {
		t.Fatalf("LiveToken through an outage after a snapshot: %v, %v; want the last snapshot's answer", ok, err)
	}
	e.srv.store = real
}

// gatedTokens reads the tokens, then holds its answer until released,
// saying when a read has come in.
type gatedTokens struct {
	store.Store
	entered, release chan struct{}
}

func (g gatedTokens) Tokens(ctx context.Context) ([]store.Token, error) {
	toks, err := g.Store.Tokens(ctx)
	select {
	case g.entered <- struct{}{}:
	default:
	}
	<-g.release
	return toks, err
}

// A new token snapshot is read outside the lock: while one caller reads
// every token from the store, the others answer from the last snapshot
// instead of waiting for it (once a second, every preview-cookie and
// share request stalled for that read). A token dropped meanwhile (a
// logout) stays dropped, though the snapshot read it before.
func TestLiveTokenSnapshotOffLock(t *testing.T) {
	e := newEnv(t, &Config{TokenRecheck: 50 * time.Millisecond})
	var ids []string
	for range 2 {
		_, tok, err := e.store.CreateToken(e.ctx, store.TokenSpec{Role: store.RoleClient, Hosts: []string{"h"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, tok.ID)
	}
	if _, ok, err := e.srv.LiveToken(e.ctx, ids[0]); !ok || err != nil {
		t.Fatalf("LiveToken: %v %v", ok, err)
	}
	real := e.srv.store
	gate := gatedTokens{real, make(chan struct{}, 1), make(chan struct{})}
	e.srv.store = gate
	defer func() { e.srv.store = real }()
	time.Sleep(100 * time.Millisecond) // past the snapshot's TTL

	first := make(chan error, 1)
	go func() {
		_, ok, err := e.srv.LiveToken(e.ctx, ids[0])
		if err == nil && !ok {
			err = errors.New("not live")
		}
		first <- err
	}()
	<-gate.entered // the first caller reads the store
	second := make(chan bool, 1)
	go func() {
		_, ok, _ := e.srv.LiveToken(e.ctx, ids[1])
		second <- ok
	}()
	select {
	case ok := <-second:
		if !ok {
			t.Error("a live token answered not live from the last snapshot")
		}
	case <-time.After(10 * time.Second):
		close(gate.release)
		t.Fatal("a LiveToken waited for another caller's read of the store")
	}
	// A logout while the snapshot is read, after the store was: as
	// EndSession does, the store's row goes, then the snapshot's.
	if err := real.DeleteToken(e.ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	e.srv.tokenSet.drop(ids[1])
	close(gate.release)
	if err := <-first; err != nil {
		t.Fatalf("the caller that took the snapshot: %v", err)
	}
	if _, ok, err := e.srv.LiveToken(e.ctx, ids[1]); ok || err != nil {
		t.Fatalf("a token dropped while the snapshot was read came back with it: %v %v", ok, err)
	}
}

// Two different session cookies (one tossed in for this host by a page
// under a parent domain, for a longer path so it comes first) are refused,
// not taken as whichever comes first.
func TestConflictingSessionCookies(t *testing.T) {
	e := newEnv(t, nil)
	admin := e.token(store.RoleAdmin)
	other := e.token(store.RoleClient, "h9")
	get := func(cookies ...string) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(e.ctx, "GET", e.ts.URL+"/v1/hosts", nil)
		for _, c := range cookies {
			req.AddCookie(&http.Cookie{Name: SessionCookie, Value: c})
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	if st := get(admin); st != http.StatusOK {
		t.Fatalf("one session cookie: %d", st)
	}
	if st := get(admin, admin); st != http.StatusOK {
		t.Errorf("the same cookie twice: %d, want 200", st)
	}
	if st := get(other, admin); st != http.StatusUnauthorized {
		t.Errorf("a tossed cookie before the admin's: %d, want 401", st)
	}
}

// TestOneKeyProofPerHost: while one agent proves a key to pin for a host
// (here, one that never answers the proof), another connect for that host
// is answered 503 busy, not held as a second unproven tunnel; once the
// first ends, the next proves and enrolls.
func TestOneKeyProofPerHost(t *testing.T) {
	e := newEnv(t, nil)
	agentTok := e.token(store.RoleAgent, "h1")
	signer, key := newKey(t)
	h := http.Header{}
	h.Set("Authorization", "Bearer "+agentTok)
	h.Set(wire.HeaderHostKey, key)
	silent, resp, err := bytestream.DialWebSocket(e.ctx, e.ts.URL+wire.ConnectPath, &bytestream.WebSocketOptions{Header: h})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get(wire.HeaderKeyProof) == "" {
		t.Fatal("a first enrollment was not asked for a proof")
	}
	// The silent agent never opens its mux: its proof waits.
	for range 3 {
		_, err := e.dialAgentSigner(agentTok, key, hostgate.Info{}, signer)
		var he *bytestream.HandshakeError
		if !errors.As(err, &he) || he.StatusCode != http.StatusServiceUnavailable || !strings.Contains(he.Body, `"busy"`) {
			t.Fatalf("a second connect while a proof for the host is pending: %v, want 503 busy", err)
		}
	}
	_ = silent.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := e.dialAgentSigner(agentTok, key, hostgate.Info{}, signer)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the pending proof ended, the holder still cannot enroll: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if hst, err := e.store.Host(e.ctx, "h1"); err != nil || hst.HostKey != key {
		t.Fatalf("pinned %q (%v), want the proven key", hst.HostKey, err)
	}
}

// TestKeySignatureEnrolls: an agent whose request carries a signature by
// the key it presents (wire.HeaderKeySignature) has it pinned at once,
// with no SSH key exchange asked for; a signature by another key, or an
// old one, pins nothing and the gateway asks for the exchange instead.
func TestKeySignatureEnrolls(t *testing.T) {
	e := newEnv(t, nil)
	tok := e.token(store.RoleAgent, "h1")
	signer, key := newKey(t)
	other, _ := newKey(t)
	dial := func(sig string) (*http.Response, *yamux.Session) {
		t.Helper()
		h := http.Header{}
		h.Set("Authorization", "Bearer "+tok)
		h.Set(wire.HeaderHostKey, key)
		h.Set(wire.HeaderKeySignature, sig)
		// The proof the last dial was asked for may still hold the
		// host's slot (503 busy) until the gateway sees its tunnel end.
		var (
			conn net.Conn
			resp *http.Response
			err  error
		)
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			conn, resp, err = bytestream.DialWebSocket(e.ctx, e.ts.URL+wire.ConnectPath, &bytestream.WebSocketOptions{Header: h})
			var he *bytestream.HandshakeError
			if err == nil || !errors.As(err, &he) || he.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		sess, err := bytestream.MuxServer(conn, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sess.Close() })
		return resp, sess
	}
	sign := func(s ssh.Signer, at time.Time) string {
		v, err := wire.SignKey(s, tok, "", at)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for name, sig := range map[string]string{
		"another key's": sign(other, time.Now()),
		"an old":        sign(signer, time.Now().Add(-time.Hour)),
	} {
		resp, sess := dial(sig)
		if resp.Header.Get(wire.HeaderKeyProof) == "" {
			t.Fatalf("%s signature: no key exchange asked for", name)
		}
		if hst, err := e.store.Host(e.ctx, "h1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("%s signature pinned %q (%v)", name, hst.HostKey, err)
		}
		_ = sess.Close()
	}
	resp, sess := dial(sign(signer, time.Now()))
	if v := resp.Header.Get(wire.HeaderKeyProof); v != "" {
		t.Fatalf("a good signature: the gateway still asks for a key exchange (%q)", v)
	}
	if hst, err := e.store.Host(e.ctx, "h1"); err != nil || hst.HostKey != key {
		t.Fatalf("a good signature: pinned %q (%v), want the presented key", hst.HostKey, err)
	}
	// Routable at once: a relay's stream reaches this agent.
	go func() {
		st, err := sess.AcceptStream()
		if err == nil {
			_, _ = io.Copy(st, st)
			_ = st.Close()
		}
	}()
	c, err := e.relay("h1", e.token(store.RoleAdmin))
	if err != nil {
		t.Fatal(err)
	}
	echoRoundTrip(t, c, 100)
	_ = c.Close()
}

// TestWrongTokenRoleNamesTheFix: a client token given to an agent, or an
// agent token given to a caller (gateway proxy), is refused saying which
// token it is and which one to make, where it said only that an agent
// token is required, or that agent tokens cannot reach hosts (found by the
// audit30 audit).
func TestWrongTokenRoleNamesTheFix(t *testing.T) {
	e := newEnv(t, nil)
	_, key := newKey(t)
	_, err := e.dialAgent(e.token(store.RoleClient, "h1"), key, hostgate.Info{})
	var he *bytestream.HandshakeError
	if !errors.As(err, &he) || he.StatusCode != http.StatusForbidden ||
		!strings.Contains(he.Body, "this is a client token") || !strings.Contains(he.Body, "gateway token create --role agent --host ID") {
		t.Errorf("agent with a client token: %v", err)
	}
	_, err = e.relay("h1", e.token(store.RoleAgent, "h1"))
	if !errors.As(err, &he) || he.StatusCode != http.StatusForbidden ||
		!strings.Contains(he.Body, "gateway token create --role client --host ID") {
		t.Errorf("caller with an agent token: %v", err)
	}
}

// TestAuthWhileShuttingDown: a request whose token lookup the shutdown
// cuts (its ctx is the gateway's, ended with ErrShuttingDown) is answered
// 503 shutting_down, as a relay or a tunnel then is, not 503
// store_unavailable with an ERROR "token lookup" logged: a client
// redialing during a restart was told the state store failed (found by
// the audit31 audit).
func TestAuthWhileShuttingDown(t *testing.T) {
	e := newEnv(t, nil)
	tok, cached := e.token(store.RoleAdmin), e.token(store.RoleAdmin)
	// cached's lookup is in the gateway's cache, so its request gets to
	// the host's, which the shutdown cuts instead.
	if st, _ := e.call("GET", "/v1/hosts", cached, nil, nil); st != http.StatusOK {
		t.Fatalf("GET /v1/hosts: %d", st)
	}
	_ = e.srv.Close()
	for _, c := range []struct{ path, token string }{{"/v1/hosts", tok}, {"/v1/hosts/box", cached}} {
		req := httptest.NewRequestWithContext(e.srv.Context(), "GET", c.path, nil)
		req.Header.Set("Authorization", "Bearer "+c.token)
		rec := httptest.NewRecorder()
		e.srv.Handler().ServeHTTP(rec, req)
		we, _ := wire.ParseError(rec.Body.Bytes())
		if rec.Code != http.StatusServiceUnavailable || we.Code != "shutting_down" {
			t.Errorf("GET %s while shutting down: %d %s, want 503 shutting_down", c.path, rec.Code, rec.Body)
		}
	}
}

func TestLimiterSourceKey(t *testing.T) {
	for ip, want := range map[string]string{
		"192.0.2.7":            "192.0.2.7",
		"::ffff:192.0.2.7":     "192.0.2.7",
		"2001:db8:1:2:3:4:5:6": "2001:db8:1:2::/64",
		"fe80::1%eth0":         "fe80::/64",
		"@":                    "@",
		"not an address":       "not an address",
	} {
		if got := source(ip).String(); got != want {
			t.Errorf("source(%q) = %q, want %q", ip, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { source("2001:db8::1") }); n != 0 {
		t.Errorf("source allocates %v times a call; every request's check makes one", n)
	}
}
