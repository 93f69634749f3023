package agent

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
	"go.uber.org/goleak"

	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/buildinfo"
	"github.com/hostgate/hostgate/internal/gateway"
	"github.com/hostgate/hostgate/internal/gateway/sshca"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/gatewaytest"
	"github.com/hostgate/hostgate/internal/sigreset"
	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/internal/testenv"
	"github.com/hostgate/hostgate/sshlayer"
)

func TestMain(m *testing.M) {
	MaybeRunGuard() // RunServe and RunConnect start this binary as their guard
	// As cmd/agent's main does: the commands get SIGHUP at its default
	// however the suite was started. Run under nohup, they inherited it
	// ignored, their `trap … HUP` was void, and
	// TestConnectRedialsWhileOldCommandsWindDown failed every time.
	sigreset.ForChildren()
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/hostgate/hostgate/internal/sigreset.ForChildren.func1"))
}

// gw is a gateway behind a fixed URL whose server can be restarted on
// the same state (store and CA), as `gateway serve` restarting would.
type gw struct {
	t     testing.TB
	ctx   context.Context
	ts    *httptest.Server
	store *store.SQLite
	ca    *sshca.CA
	cur   atomic.Pointer[gateway.Server]
	// agentFrom is the client address of the last agent tunnel's
	// request: the agent's local end of its tunnel.
	agentFrom atomic.Pointer[string]
}

func newGW(t testing.TB) *gw {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	st, ca := gatewaytest.State(t, ctx)
	g := &gw{t: t, ctx: ctx, store: st, ca: ca}
	g.restart()
	g.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == wire.ConnectPath {
			g.agentFrom.Store(&r.RemoteAddr)
		}
		g.cur.Load().Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		_ = g.cur.Load().Close()
		g.ts.Close()
	})
	return g
}

// restart closes the running gateway (dropping every tunnel) and starts a
// new one on the same state.
func (g *gw) restart() { g.restartLogging(nil) }

// restartLogging is restart with the new gateway logging to logger.
func (g *gw) restartLogging(logger *slog.Logger) {
	srv, err := gateway.New(g.ctx, logger, g.store, g.ca, nil)
	if err != nil {
		g.t.Fatal(err)
	}
	if old := g.cur.Swap(srv); old != nil {
		_ = old.Close()
	}
}

func (g *gw) token(role store.Role, hosts ...string) string {
	sec, _, err := g.store.CreateToken(g.ctx, store.TokenSpec{Role: role, Hosts: hosts})
	if err != nil {
		g.t.Fatal(err)
	}
	return sec
}

// runAgent runs Connect until the test ends; tunnels receives the host id
// each time a tunnel comes up.
func runAgent(t *testing.T, ctx context.Context, cfg ConnectConfig) <-chan string {
	tunnels := make(chan string, 16)
	cfg.OnTunnel = func(id string) {
		select {
		case tunnels <- id:
		default: // OnTunnel must not block: a test that stopped listening (two agents taking turns) drops the rest
		}
	}
	cfg.MinBackoff, cfg.MaxBackoff = 20*time.Millisecond, 200*time.Millisecond
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	actx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- Connect(actx, &cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Connect: %v", err)
		}
	})
	return tunnels
}

func waitTunnel(t *testing.T, ch <-chan string, want string) {
	t.Helper()
	select {
	case id := <-ch:
		if id != want {
			t.Fatalf("tunnel for %q, want %q", id, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no tunnel within 30 s")
	}
}

// dialSSH is what a caller does: fetch the pinned key, get a certificate
// for a session key, open the relay, connect with the key pinned.
func (g *gw) dialSSH(token, host string) (*sshlayer.Client, error) {
	var rec gateway.HostRecord
	if err := g.api(token, "GET", "/v1/hosts/"+host, nil, &rec); err != nil {
		return nil, err
	}
	key, cert, err := g.certificate(token, host)
	if err != nil {
		return nil, err
	}
	return g.connectWith(token, host, sshlayer.Auth{Signer: key.Signer, Certificate: []byte(cert), HostKey: rec.HostKey})
}

// certificate gets a certificate for host from the gateway for a new
// session key, in authorized_keys form.
func (g *gw) certificate(token, host string) (*sshlayer.SessionKey, string, error) {
	key, err := sshlayer.GenerateSessionKey()
	if err != nil {
		return nil, "", err
	}
	var cert struct{ Certificate string }
	if err := g.api(token, "POST", "/v1/hosts/"+host+"/certificates", map[string]string{"publicKey": key.PublicKey}, &cert); err != nil {
		return nil, "", err
	}
	return key, cert.Certificate, nil
}

// api makes a call to the gateway's API with token, decoding a 200's body
// into out.
func (g *gw) api(token, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequestWithContext(g.ctx, method, g.ts.URL+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		return errors.New(string(b))
	}
	return json.Unmarshal(b, out)
}

func (g *gw) connectWith(token, host string, auth sshlayer.Auth) (*sshlayer.Client, error) {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+token)
	conn, err := bytestream.WebSocket(g.ctx, g.ts.URL+"/v1/hosts/"+host+"/ssh", &bytestream.WebSocketOptions{Header: h})
	if err != nil {
		return nil, err
	}
	c, err := sshlayer.Connect(g.ctx, conn, auth)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	return c, nil
}

func run(t *testing.T, c *sshlayer.Client, cmd string) string {
	t.Helper()
	s, err := c.SSH().NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out, err := s.Output(cmd)
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return string(out)
}

// TestConnectServesSSHThroughGateway: a real agent tunnel, a real SSH
// session relayed through the gateway, host key pinned end to end.
func TestConnectServesSSHThroughGateway(t *testing.T) {
	g := newGW(t)
	state := t.TempDir()
	tunnels := runAgent(t, g.ctx, ConnectConfig{GatewayURL: g.ts.URL, Token: g.token(store.RoleAgent, "h1"), HostID: "h1", StateDir: state})
	waitTunnel(t, tunnels, "h1")

	client := g.token(store.RoleClient, "h1")
	c, err := g.dialSSH(client, "h1")
	if err != nil {
		t.Fatal(err)
	}
	if got := run(t, c, "echo hello; id -un"); !strings.HasPrefix(got, "hello\n") {
		t.Errorf("output %q", got)
	}
	_ = c.Close()

	// The key the gateway pinned is the agent's host key file; the CA is
	// pinned in the state dir, 0600.
	h, err := g.store.Host(g.ctx, "h1")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := sshlayer.LoadOrCreateHostKey(filepath.Join(state, HostKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if h.HostKey != strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))) {
		t.Errorf("pinned %q", h.HostKey)
	}
	if st, err := os.Stat(filepath.Join(state, GatewayCAFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("CA file: %v %v", st, err)
	}
	var info map[string]any
	if err := json.Unmarshal(h.Info, &info); err != nil || info["kind"] != "machine" || info["os"] == "" || info["persistent"] != true {
		t.Errorf("info %s", h.Info)
	}

	// A certificate from another CA, or for another host, is refused by
	// the agent even though the gateway relays the bytes.
	key, _ := sshlayer.GenerateSessionKey()
	other, _ := sshca.LoadOrCreate(filepath.Join(t.TempDir(), "ca"))
	for name, ca := range map[string]*sshca.CA{"foreign CA": other, "other principal": g.ca} {
		principal := "h1"
		if name == "other principal" {
			principal = "h2"
		}
		cert, err := ca.Sign(key.Signer.PublicKey(), principal, "x", time.Minute, true)
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := ssh.ParsePublicKey(signer.PublicKey().Marshal())
		_, err = g.connectWith(client, "h1", sshlayer.Auth{Signer: key.Signer, Certificate: ssh.MarshalAuthorizedKey(cert), HostKey: sshlayer.Fingerprint(pub)})
		if err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}

// TestConnectSignsItsHostKey: each dial carries a fresh signature by the
// agent's host key over its token and host id (wire.HeaderKeySignature),
// which a gateway that has not pinned the key pins on, with no SSH key
// exchange on the tunnel first.
func TestConnectSignsItsHostKey(t *testing.T) {
	g := newGW(t)
	var seen atomic.Pointer[http.Header]
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == wire.ConnectPath {
			h := r.Header.Clone()
			seen.Store(&h)
		}
		g.ts.Config.Handler.ServeHTTP(w, r)
	}))
	defer ts.Close()
	tok := g.token(store.RoleAgent, "h1")
	waitTunnel(t, runAgent(t, g.ctx, ConnectConfig{GatewayURL: ts.URL, Token: tok, HostID: "h1", StateDir: t.TempDir()}), "h1")
	h := seen.Load()
	if h == nil {
		t.Fatal("the agent never dialed")
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(h.Get(wire.HeaderHostKey)))
	if err != nil {
		t.Fatal(err)
	}
	if err := wire.VerifyKeySignature(pub, h.Get(wire.HeaderKeySignature), tok, "h1", time.Now()); err != nil {
		t.Fatalf("the agent's key signature: %v", err)
	}
	if hst, err := g.store.Host(g.ctx, "h1"); err != nil || hst.HostKey != strings.TrimSpace(h.Get(wire.HeaderHostKey)) {
		t.Fatalf("pinned %q (%v), want the signed key", hst.HostKey, err)
	}
}

// TestConnectSurvivesGatewayRestart: the gateway restarts (every tunnel
// dropped); the agent comes back by itself, pins and tokens survive, and a
// new session works.
func TestConnectSurvivesGatewayRestart(t *testing.T) {
	g := newGW(t)
	tunnels := runAgent(t, g.ctx, ConnectConfig{GatewayURL: g.ts.URL, Token: g.token(store.RoleAgent, "h1"), StateDir: t.TempDir()})
	waitTunnel(t, tunnels, "h1")
	client := g.token(store.RoleClient, "h1")
	c, err := g.dialSSH(client, "h1")
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	for range 2 {
		g.restart()
		waitTunnel(t, tunnels, "h1")
		c, err := g.dialSSH(client, "h1")
		if err != nil {
			t.Fatal(err)
		}
		if got := run(t, c, "echo back"); got != "back\n" {
			t.Errorf("output %q", got)
		}
		_ = c.Close()
	}
}

// TestConnectRefusesChangedCA: an agent pinned to one gateway's CA does
// not serve another gateway (its tunnel never comes up).
func TestConnectRefusesChangedCA(t *testing.T) {
	state := t.TempDir()
	other, _ := sshca.LoadOrCreate(filepath.Join(t.TempDir(), "ca"))
	if err := os.WriteFile(filepath.Join(state, GatewayCAFile), []byte(other.AuthorizedKey()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := newConnector(&ConnectConfig{GatewayURL: "http://127.0.0.1:1", Token: "t", StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	mine, _ := sshca.LoadOrCreate(filepath.Join(t.TempDir(), "ca"))
	if _, err := c.pinCA(mine.AuthorizedKey()); !errors.Is(err, ErrCAChanged) {
		t.Fatalf("changed CA: %v", err)
	}
	if _, err := c.pinCA(other.AuthorizedKey()); err != nil {
		t.Fatalf("pinned CA refused: %v", err)
	}
	if _, err := c.pinCA("garbage"); err == nil {
		t.Fatal("garbage CA accepted")
	}
}

// TestConnectImpostorRefusedRealKeepsServing: an impostor agent (other host key)
// is refused with the gateway's reason and retries with backoff until
// stopped; the real agent keeps serving.
func TestConnectImpostorRefusedRealKeepsServing(t *testing.T) {
	g := newGW(t)
	agentTok := g.token(store.RoleAgent, "h1")
	tunnels := runAgent(t, g.ctx, ConnectConfig{GatewayURL: g.ts.URL, Token: agentTok, StateDir: t.TempDir()})
	waitTunnel(t, tunnels, "h1")

	var mu sync.Mutex
	var logs bytes.Buffer
	refused := make(chan struct{})
	var once sync.Once
	ictx, cancel := context.WithCancel(g.ctx)
	done := make(chan error, 1)
	go func() {
		done <- Connect(ictx, &ConnectConfig{GatewayURL: g.ts.URL, Token: agentTok, StateDir: t.TempDir(),
			MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(writerFunc(func(p []byte) {
				mu.Lock()
				logs.Write(p)
				mu.Unlock()
				if bytes.Contains(p, []byte("host_key_mismatch")) {
					once.Do(func() { close(refused) })
				}
			}), nil)),
			OnTunnel: func(string) { t.Error("impostor got a tunnel") }})
	}()
	select {
	case <-refused:
	case <-time.After(30 * time.Second):
		t.Fatal("impostor not refused")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	c, err := g.dialSSH(g.token(store.RoleClient, "h1"), "h1")
	if err != nil {
		t.Fatal(err)
	}
	if got := run(t, c, "echo real"); got != "real\n" {
		t.Errorf("output %q", got)
	}
	_ = c.Close()
}

type writerFunc func(p []byte)

func (f writerFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }

func TestJitterBounds(t *testing.T) {
	for _, d := range []time.Duration{time.Millisecond, 500 * time.Millisecond, 30 * time.Second} {
		for range 1000 {
			if j := jitter(d); j < d/2 || j > d {
				t.Fatalf("jitter(%v) = %v", d, j)
			}
		}
	}
}

func TestRunConnectFlags(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, args := range [][]string{
		{},
		{"--gateway", "http://x"},
		{"--token", "t"},
		{"--gateway", "ftp://x", "--token", "t", "--state-dir", t.TempDir()},
		{"--gateway", "http://x", "--token", "t", "extra"},
		{"--gateway", "http://x", "--token", "t", "--log-format", "xml"},
		{"--gateway", "http://x", "--token", "t", "--max-backoff", "0"},
	} {
		if err := RunConnect(ctx, args, io.Discard, io.Discard); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
	// A duration without its unit says what the flag takes, on the
	// command line and in the environment, where both said only "parse
	// error" (found by the audit30 audit).
	err := RunConnect(ctx, []string{"--max-backoff", "5"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--max-backoff wants a duration with its unit") {
		t.Errorf("--max-backoff 5: %v", err)
	}
	t.Run("env", func(t *testing.T) {
		t.Setenv("HOSTGATE_MAX_BACKOFF", "5")
		err := RunConnect(ctx, []string{"--gateway", "http://x", "--token", "t", "--state-dir", t.TempDir()}, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), `HOSTGATE_MAX_BACKOFF="5": parse error; --max-backoff wants a duration with its unit`) {
			t.Errorf("HOSTGATE_MAX_BACKOFF=5: %v", err)
		}
	})
	// A URL without its scheme says what a URL looks like, once.
	err = RunConnect(ctx, []string{"--gateway", "127.0.0.1:8443", "--token", "t", "--state-dir", t.TempDir()}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "want https://HOST[:PORT]") || strings.Count(err.Error(), "agent") > 1 {
		t.Errorf("a URL without its scheme: %v", err)
	}
	// The environment supplies what flags do; a cancelled ctx stops it.
	g := newGW(t)
	t.Setenv("HOSTGATE_GATEWAY", g.ts.URL)
	t.Setenv("HOSTGATE_TOKEN", g.token(store.RoleAgent, "envhost"))
	t.Setenv("HOSTGATE_STATE_DIR", t.TempDir())
	cctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	var logs syncBuffer
	go func() { done <- RunConnect(cctx, []string{"--log-format", "json"}, io.Discard, &logs) }()
	select {
	case <-logs.has(`"msg":"tunnel up"`):
	case <-time.After(30 * time.Second):
		t.Fatalf("no tunnel; logs:\n%s", logs.String())
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestRunConnectMaxBackoff: --max-backoff bounds the wait after a refusal
// that lasts (here a token the gateway does not know), which is otherwise
// the default's 15 to 30 s, so an agent refused until someone acts can be
// told to ask again sooner.
func TestRunConnectMaxBackoff(t *testing.T) {
	// A gateway that refuses the token, and says when the agent asks a
	// second time.
	again := make(chan struct{})
	srv := answeringGateway(t, func(n int32) (int, string) {
		if n == 2 {
			close(again)
		}
		return http.StatusUnauthorized, `{"error":{"code":"unauthorized","message":"unknown token"}}`
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var logs syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- RunConnect(ctx, []string{"--gateway", srv.URL, "--token", "hg_unknown_token_000000000000000000000000000", "--state-dir", t.TempDir(),
			"--log-format", "json", "--max-backoff", "1s"}, io.Discard, &logs)
	}()
	select {
	case <-again:
	case err := <-done:
		t.Fatalf("agent connect ended: %v", err)
	case <-ctx.Done():
		t.Fatalf("the agent did not ask again; logs:\n%s", logs.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The wait logged with the refusal (once: the same refusal again is
	// not logged) is within --max-backoff.
	var waits []time.Duration
	for line := range strings.Lines(logs.String()) {
		var rec struct {
			Msg string
			In  time.Duration
		}
		if json.Unmarshal([]byte(line), &rec) == nil && strings.HasPrefix(rec.Msg, "the gateway refuses this agent") {
			waits = append(waits, rec.In)
		}
	}
	if len(waits) != 1 || waits[0] <= 0 || waits[0] > time.Second {
		t.Fatalf("waits logged after a lasting refusal: %v, want one of at most the 1s of --max-backoff; logs:\n%s", waits, logs.String())
	}
}

// TestRunConnectLogLevel: --log-level debug shows what agent connect logs
// at Debug (the same failure again, which Info leaves out), as agent
// serve's flag does; a level that is none is refused naming the flag.
func TestRunConnectLogLevel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := RunConnect(ctx, []string{"--gateway", "http://x", "--token", "t", "--state-dir", t.TempDir(), "--log-level", "loud"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `--log-level "loud"`) {
		t.Errorf("--log-level loud: %v", err)
	}
	srv := answeringGateway(t, func(int32) (int, string) {
		return http.StatusUnauthorized, `{"error":{"code":"unauthorized","message":"unknown token"}}`
	})
	var logs syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- RunConnect(ctx, []string{"--gateway", srv.URL, "--token", "hg_unknown_token_000000000000000000000000000", "--state-dir", t.TempDir(),
			"--max-backoff", "10ms", "--log-level", "debug"}, io.Discard, &logs)
	}()
	select {
	case <-logs.has("failed again"):
	case err := <-done:
		t.Fatalf("agent connect ended: %v", err)
	case <-ctx.Done():
		t.Fatalf("no Debug line; logs:\n%s", logs.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestConnectLogsEachFailureOnce: an agent that keeps failing the same
// way says why once, not once per attempt (a revoked token logged an
// error every 15-30 s for as long as nobody fixed it, burying what
// else the host logged), and says so again when the reason changes,
// naming the one before and how often it repeated.
func TestConnectLogsEachFailureOnce(t *testing.T) {
	const refused, busy = 5, 5
	enough := make(chan struct{})
	var attempts atomic.Int32
	srv := answeringGateway(t, func(n int32) (int, string) {
		attempts.Store(n)
		if n <= refused {
			return http.StatusUnauthorized, `{"error":{"code":"unauthorized","message":"token revoked"}}`
		}
		if n == refused+busy+1 {
			close(enough)
		}
		return http.StatusServiceUnavailable, `{"error":{"code":"busy","message":"try later"}}`
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var logs syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- Connect(ctx, &ConnectConfig{GatewayURL: srv.URL, Token: "hg_x", StateDir: t.TempDir(),
			MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	}()
	select {
	case <-enough:
	case <-ctx.Done():
		t.Fatalf("%d attempts; logs:\n%s", attempts.Load(), logs.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if n := strings.Count(out, "token revoked"); n != 2 {
		t.Errorf("the refusal appears %d times in the log of %d refused attempts and the change after them, want twice (itself, then as the previous error):\n%s", n, refused, out)
	}
	if n := strings.Count(out, "try later"); n != 1 {
		t.Errorf("the busy answer appears %d times in the log of %d busy attempts, want once:\n%s", n, busy, out)
	}
	if !strings.Contains(out, fmt.Sprintf("previousRepeats=%d", refused-1)) {
		t.Errorf("the change does not say how often the refusal repeated (%d):\n%s", refused-1, out)
	}
}

// answeringGateway answers the n-th connect with answer(n): a status and
// a JSON body.
func answeringGateway(t *testing.T, answer func(n int32) (status int, body string)) *httptest.Server {
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status, body := answer(attempts.Add(1))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// syncBuffer collects logs and signals when a substring appears.
type syncBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	waits []wait
}

type wait struct {
	s  string
	n  int // times s must appear
	ch chan struct{}
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b.Write(p)
	kept := b.waits[:0]
	for _, w := range b.waits {
		if strings.Count(b.b.String(), w.s) >= w.n {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	b.waits = kept
	return len(p), nil
}

func (b *syncBuffer) has(s string) <-chan struct{} { return b.hasN(s, 1) }

// hasN is closed once s was written n times.
func (b *syncBuffer) hasN(s string, n int) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	ch := make(chan struct{})
	if strings.Count(b.b.String(), s) >= n {
		close(ch)
	} else {
		b.waits = append(b.waits, wait{s, n, ch})
	}
	return ch
}

func (b *syncBuffer) String() string { b.mu.Lock(); defer b.mu.Unlock(); return b.b.String() }

// A gateway that refuses the agent's token is a lasting refusal: an
// error in the log that says what to fix, and the longest backoff; a
// passing failure stays a warning at the shortest. The backoff is the
// log's "in", when the agent asks again: a count of attempts in a 300 ms
// window read 0 for a 401 once on a loaded machine (the first attempt
// had not been answered yet).
func TestConnectLastingRefusal(t *testing.T) {
	const maxBackoff = time.Minute
	inRE := regexp.MustCompile(` in=(\S+)`)
	for _, tc := range []struct {
		status int
		level  string
		slow   bool
	}{
		{http.StatusUnauthorized, "ERROR", true},
		{http.StatusForbidden, "ERROR", true},
		{http.StatusTooManyRequests, "WARN", true},
		{http.StatusServiceUnavailable, "WARN", false},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(tc.status)
			_, _ = io.WriteString(w, `{"error":{"code":"nope","message":"refused"}}`)
		}))
		var logs syncBuffer
		out := connectUntilLogged(t, &logs, " in=", &ConnectConfig{GatewayURL: srv.URL, Token: "hg_x", StateDir: t.TempDir(),
			MinBackoff: 10 * time.Millisecond, MaxBackoff: maxBackoff, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		srv.Close()
		var failure string // the first attempt's
		for line := range strings.Lines(out) {
			if strings.Contains(line, " in=") {
				failure = line
				break
			}
		}
		if !strings.Contains(failure, "level="+tc.level) {
			t.Errorf("%d: want a %s in the log:\n%s", tc.status, tc.level, out)
		}
		// jitter keeps a wait within [backoff/2, backoff].
		m := inRE.FindStringSubmatch(failure)
		if m == nil {
			t.Fatalf("%d: no retry wait (in=) in %q", tc.status, failure)
		}
		wait, err := time.ParseDuration(m[1])
		if err != nil {
			t.Fatalf("%d: retry wait %q: %v", tc.status, m[1], err)
		}
		if slow := wait >= maxBackoff/2; slow != tc.slow {
			t.Errorf("%d: next attempt in %v, want the longest backoff (%v) %v", tc.status, wait, maxBackoff, tc.slow)
		}
	}
}

// TestConnectChangedCAIsLasting: a gateway whose CA is not the pinned one
// (its state directory lost or made anew) is refused until a person acts,
// so the agent says so at ERROR and asks again after the longest wait, as
// for a revoked token, where it warned of a passing failure and asked
// again soon; and it tells the gateway why in the close frame, where the
// gateway's log showed a tunnel up and down with EOF.
func TestConnectChangedCAIsLasting(t *testing.T) {
	const maxBackoff = time.Minute
	gatewayCA, _ := sshca.LoadOrCreate(filepath.Join(t.TempDir(), "ca"))
	reasons := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(wire.HeaderCAKey, gatewayCA.AuthorizedKey())
		w.Header().Set(wire.HeaderHostID, "h")
		conn, err := bytestream.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		_, err = io.Copy(io.Discard, conn)
		var ce *bytestream.CloseError
		if errors.As(err, &ce) {
			select {
			case reasons <- ce.Reason:
			default:
			}
		}
	}))
	defer srv.Close()
	state := t.TempDir()
	pinned, _ := sshca.LoadOrCreate(filepath.Join(t.TempDir(), "ca"))
	if err := os.WriteFile(filepath.Join(state, GatewayCAFile), []byte(pinned.AuthorizedKey()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	out := connectUntilLogged(t, &logs, " in=", &ConnectConfig{GatewayURL: srv.URL, Token: "hg_x", StateDir: state,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: maxBackoff, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	var failure string
	for line := range strings.Lines(out) {
		if strings.Contains(line, " in=") {
			failure = line
			break
		}
	}
	if !strings.Contains(failure, "level=ERROR") || !strings.Contains(failure, "gateway CA differs from the pinned one") {
		t.Errorf("want an ERROR naming the changed CA:\n%s", out)
	}
	m := regexp.MustCompile(` in=(\S+)`).FindStringSubmatch(failure)
	if m == nil {
		t.Fatalf("no retry wait (in=) in %q", failure)
	}
	if wait, err := time.ParseDuration(m[1]); err != nil || wait < maxBackoff/2 {
		t.Errorf("next attempt in %s, want the longest backoff (%v)", m[1], maxBackoff)
	}
	select {
	case reason := <-reasons:
		if !strings.Contains(reason, "CA differs from the one the agent pinned (a new gateway state directory?)") {
			t.Errorf("the gateway was told %q", reason)
		}
	case <-time.After(30 * time.Second):
		t.Error("the gateway got no close frame with a reason")
	}
}

// connectUntilLogged runs Connect until logs has want, then stops it and
// returns the log.
func connectUntilLogged(t *testing.T, logs *syncBuffer, want string, cfg *ConnectConfig) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Connect(ctx, cfg) }()
	select {
	case <-logs.has(want):
	case err := <-done:
		t.Fatalf("Connect returned before logging %q: %v\n%s", want, err, logs.String())
	case <-time.After(30 * time.Second):
		cancel()
		<-done
		t.Fatalf("no %q logged in 30 s:\n%s", want, logs.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return logs.String()
}

// A URL where something other than the gateway answers 404 (a path too
// many, the wrong port behind a proxy) says to check the URL, not the raw
// page body with its newlines.
func TestConnectNotFoundNamesTheURL(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	var logs syncBuffer
	out := connectUntilLogged(t, &logs, "answered 404", &ConnectConfig{GatewayURL: srv.URL + "/foo", Token: "hg_x", StateDir: t.TempDir(),
		MinBackoff: 10 * time.Millisecond, MaxBackoff: time.Minute, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if !strings.Contains(out, srv.URL+"/foo/v1/agents/connect answered 404") || !strings.Contains(out, "--public-url") || strings.Contains(out, `page not found\n`) {
		t.Errorf("log of a 404:\n%s", out)
	}
}

// A proxy in front of a gateway that is down answers the agent's dial
// itself (nginx with a page of HTML): the agent logs that the gateway did
// not answer and what to do, not the page (found by the audit30 audit).
func TestConnectProxyAnswerSaysTheGatewayDidNotAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n</body>\r\n</html>\r\n")
	}))
	defer srv.Close()
	var logs syncBuffer
	out := connectUntilLogged(t, &logs, "did not answer", &ConnectConfig{GatewayURL: srv.URL, Token: "hg_x", StateDir: t.TempDir(),
		MinBackoff: 10 * time.Millisecond, MaxBackoff: time.Minute, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if !strings.Contains(out, "the gateway did not answer") || !strings.Contains(out, "start the gateway") || strings.Contains(out, "<html") {
		t.Errorf("log of a proxy's 502:\n%s", out)
	}
}

// FuzzPinCA reads the CA key header a gateway sends on first enrollment:
// a key it pins is one the agent can trust user certificates of (not a
// certificate), written so that the next connection reads the same key,
// and a gateway with another key is then refused; anything else is
// refused before anything is pinned.
func FuzzPinCA(f *testing.F) {
	ca, err := sshca.LoadOrCreate(filepath.Join(f.TempDir(), "ca"))
	if err != nil {
		f.Fatal(err)
	}
	other, _ := sshca.LoadOrCreate(filepath.Join(f.TempDir(), "other"))
	line := strings.TrimSpace(ca.AuthorizedKey())
	f.Add(line)
	f.Add(line + " hostgate-ca")
	f.Add("cert-authority " + line)
	f.Add(line + "\n" + line)
	f.Add("# comment\n" + line)
	f.Add("garbage")
	f.Add("")
	// A certificate where the CA's key belongs: pinned, it would refuse
	// every user certificate, for good.
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	signer, _ := ssh.NewSignerFromKey(key)
	cert := &ssh.Certificate{Key: signer.PublicKey(), CertType: ssh.HostCert, ValidPrincipals: []string{"gw"}, ValidBefore: ssh.CertTimeInfinity}
	if err := cert.SignCert(rand.Reader, signer); err != nil {
		f.Fatal(err)
	}
	f.Add(strings.TrimSpace(string(ssh.MarshalAuthorizedKey(cert))))
	f.Fuzz(func(t *testing.T, header string) {
		c := &connector{cfg: ConnectConfig{StateDir: t.TempDir()}, log: slog.New(slog.DiscardHandler)}
		path := filepath.Join(c.cfg.StateDir, GatewayCAFile)
		key, err := c.pinCA(header)
		if err != nil {
			if _, serr := os.Stat(path); serr == nil {
				t.Fatalf("%q refused (%v), but pinned", header, err)
			}
			return
		}
		if _, isCert := key.(*ssh.Certificate); isCert {
			t.Fatalf("certificate %q pinned as the CA", header)
		}
		pinned, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		again, _, _, _, err := ssh.ParseAuthorizedKey(pinned)
		if err != nil || !bytes.Equal(again.Marshal(), key.Marshal()) {
			t.Fatalf("%q pinned as %q (%v)", header, pinned, err)
		}
		if k2, err := c.pinCA(header); err != nil || !bytes.Equal(k2.Marshal(), key.Marshal()) {
			t.Fatalf("%q refused on the next connection: %v", header, err)
		}
		if bytes.Equal(key.Marshal(), other.PublicKey().Marshal()) {
			return
		}
		if _, err := c.pinCA(other.AuthorizedKey()); !errors.Is(err, ErrCAChanged) {
			t.Fatalf("another gateway's CA after %q: %v", header, err)
		}
	})
}

// TestConnectRedialsWhileOldCommandsWindDown: the tunnel drops under a
// command that ignores EOF and traps SIGHUP. The host is back while that
// command is still winding down (before its SIGHUP, a KillGrace after the
// drop), and once the agent stops, the command has had its SIGHUP and is
// gone.
func TestConnectRedialsWhileOldCommandsWindDown(t *testing.T) {
	g := newGW(t)
	dir := t.TempDir()
	hup := filepath.Join(dir, "hup")
	tunnels := make(chan string, 16)
	actx, cancel := context.WithCancel(g.ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Connect(actx, &ConnectConfig{
			GatewayURL: g.ts.URL, Token: g.token(store.RoleAgent, "h1"), StateDir: t.TempDir(),
			MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
			OnTunnel: func(id string) { tunnels <- id },
			// Long enough that the redial (milliseconds, more under
			// -race on a loaded machine) comes well before the SIGHUP.
			Server: func(sc *sshlayer.ServerConfig) { sc.KillGrace = 4 * time.Second },
		})
	}()
	waitTunnel(t, tunnels, "h1")
	c, err := g.dialSSH(g.token(store.RoleClient, "h1"), "h1")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.SSH().NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	// The loop never reads stdin and, its stderr sent away (dash reports
	// the sleep SIGHUP kills there), never writes to a pipe: EOF and the
	// closed pipes leave it running.
	if err := s.Start("trap 'echo hup >" + hup + "' HUP; exec 2>/dev/null; echo $$; while :; do sleep 0.05; done"); err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Fscan(out, &pid); err != nil {
		t.Fatalf("reading the command's pid: %v", err)
	}

	g.restart() // drops the tunnel
	waitTunnel(t, tunnels, "h1")
	if _, err := os.Stat(hup); err == nil {
		t.Error("the host came back only after the old tunnel's command had its SIGHUP")
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Errorf("the old tunnel's command is gone when the host is back (%v): the redial waited for its wind-down", err)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Connect: %v", err)
	}
	if _, err := os.Stat(hup); err != nil {
		t.Errorf("the old tunnel's command never had its SIGHUP: %v", err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the old tunnel's command %d outlives the agent (kill 0: %v)", pid, err)
	}
}

// TestConnectPrivateCANamesTheFix: an agent dialing a gateway whose
// certificate comes from a CA the machine does not trust logs how to
// trust it, not only "certificate signed by unknown authority".
func TestConnectPrivateCANamesTheFix(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes this test fails
	srv.StartTLS()
	defer srv.Close()
	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Connect(ctx, &ConnectConfig{GatewayURL: srv.URL, Token: "hg_x", StateDir: t.TempDir(),
			MinBackoff: 10 * time.Millisecond, MaxBackoff: time.Minute,
			Logger: slog.New(slog.NewTextHandler(logs, nil))})
	}()
	select {
	case <-logs.has("unknown authority"):
	case err := <-done:
		t.Fatalf("Connect returned %v before dialing", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "SSL_CERT_FILE") {
		t.Errorf("the agent's log of an untrusted certificate does not name SSL_CERT_FILE:\n%s", logs.String())
	}
}

// TestConnectReplacedStandsBy: an agent whose tunnel a second agent with
// the same token and host key took over says so, and stands by: it does
// not take the tunnel back while the second serves the host (the two took
// turns for ever, each turn cutting the host's sessions, and the README
// said the second takes over), and serves the host once the second ends.
func TestConnectReplacedStandsBy(t *testing.T) {
	g := newGW(t)
	tok := g.token(store.RoleAgent, "h")
	state := t.TempDir()
	var logs syncBuffer
	first := runAgent(t, g.ctx, ConnectConfig{GatewayURL: g.ts.URL, Token: tok, StateDir: state,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	waitTunnel(t, first, "h")
	said := logs.has("another agent serves this host with this agent's token and host key, and took over its tunnel (host h: replaced by a newer connection for this host from 127.0.0.1): this one stands by")
	sctx, stopSecond := context.WithCancel(g.ctx)
	second := runAgent(t, sctx, ConnectConfig{GatewayURL: g.ts.URL, Token: tok, StateDir: state})
	waitTunnel(t, second, "h")
	select {
	case <-said:
	case <-g.ctx.Done():
		t.Fatalf("the replaced agent's log:\n%s", logs.String())
	}
	// Three attempts turned away while the second serves, and the first
	// took nothing back meanwhile.
	select {
	case <-logs.hasN(wire.CodeHostServed, 3):
	case <-first:
		t.Fatalf("the replaced agent took the host's tunnel back; its log:\n%s", logs.String())
	case <-g.ctx.Done():
		t.Fatalf("the replaced agent's log:\n%s", logs.String())
	}
	select {
	case <-second:
		t.Fatal("the second agent's tunnel was taken over")
	default:
	}
	c, err := g.dialSSH(g.token(store.RoleClient, "h"), "h")
	if err != nil {
		t.Fatal(err)
	}
	if out := run(t, c, "echo served"); out != "served\n" {
		t.Errorf("through the gateway: %q", out)
	}
	_ = c.Close()
	stopSecond()
	waitTunnel(t, first, "h")
	<-logs.has("standing by: another agent serves this host")
	// Its tunnel up says how long it stood by, not that the host was
	// offline that long: the second agent served it meanwhile (found by
	// the audit42a README audit: "offline=6.271s failedAttempts=1").
	var up string
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, `msg="tunnel up"`) {
			up = l
		}
	}
	if !regexp.MustCompile(` stoodBy=[0-9.]+[mµn]?s`).MatchString(up) || strings.Contains(up, "offline=") {
		t.Errorf("the tunnel up after standing by: %s; want stoodBy=, not offline=", up)
	}
}

// TestAgentRefusesGatewayStateDir: an agent given the gateway's state
// directory (HOSTGATE_STATE_DIR exported for the gateway's commands, which
// the agent reads too) refuses it, where it wrote its host key beside the
// gateway's CA key (found by the audit30 audit).
func TestAgentRefusesGatewayStateDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, wire.GatewayStateFile), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := newConnector(&ConnectConfig{GatewayURL: "http://127.0.0.1:1", Token: "t", StateDir: dir})
	if err == nil || !strings.Contains(err.Error(), "is a gateway's") || !strings.Contains(err.Error(), "--state-dir") {
		t.Errorf("connect with the gateway's state dir: %v", err)
	}
	if _, err := NewServer(&ServeConfig{StateDir: dir}); err == nil || !strings.Contains(err.Error(), "is a gateway's") {
		t.Errorf("serve with the gateway's state dir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, HostKeyFile)); err == nil {
		t.Error("the agent wrote its host key into the gateway's state dir")
	}
}

// TestSystemdUnitFlags: the README's sample agent unit starts the agent
// with flags it takes (cmd/gateway's TestSystemdUnits has systemd check the
// unit itself).
func TestSystemdUnitFlags(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "systemd", "hostgate-agent.service"))
	if err != nil {
		t.Fatal(err)
	}
	var argv []string
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "ExecStart="); ok {
			argv = strings.Fields(v)
		}
	}
	if len(argv) < 2 || argv[0] != "/usr/local/bin/agent" || argv[1] != "connect" {
		t.Fatalf("agent unit's ExecStart: %q", argv)
	}
	args := argv[2:]
	for i, a := range args {
		if a == "--state-dir" && i+1 < len(args) {
			args[i+1] = t.TempDir() // not /var/lib/hostgate-agent on the test machine
		}
	}
	t.Setenv("HOSTGATE_TOKEN", "hg_from_agent_env") // the unit's EnvironmentFile
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // parse, then stop before the first dial
	if err := RunConnect(ctx, args, io.Discard, io.Discard); err != nil {
		t.Errorf("agent unit's flags: %v", err)
	}
}

// TestConnectStandbyEndsWhenTheGatewayTakesTheTunnel: a standing-by agent
// whose tunnel the gateway took (it answered 101, so it registered the
// tunnel for the host) and that then failed before it was up asks for
// the tunnel plainly next, replacing its own dead one, instead of
// standing by behind it until the gateway's keepalive ends it (found by
// the audit30b review).
func TestConnectStandbyEndsWhenTheGatewayTakesTheTunnel(t *testing.T) {
	pinned, _ := sshca.LoadOrCreate(filepath.Join(t.TempDir(), "ca"))
	other, _ := sshca.LoadOrCreate(filepath.Join(t.TempDir(), "ca"))
	standby := make(chan string, 8)
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case standby <- r.Header.Get(wire.HeaderStandby):
		default:
		}
		ca := pinned
		if n.Add(1) == 2 {
			ca = other // the agent refuses it before its tunnel is up
		}
		w.Header().Set(wire.HeaderCAKey, ca.AuthorizedKey())
		w.Header().Set(wire.HeaderHostID, "h")
		conn, err := bytestream.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		if ca == pinned {
			// Another agent took the host over.
			_ = bytestream.CloseWithReason(conn, wire.CloseReplaced, "host h: replaced by a newer connection for this host")
			return
		}
		_, _ = io.Copy(io.Discard, conn)
	}))
	defer srv.Close()
	state := t.TempDir()
	if err := os.WriteFile(filepath.Join(state, GatewayCAFile), []byte(pinned.AuthorizedKey()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Connect(ctx, &ConnectConfig{GatewayURL: srv.URL, Token: "hg_x", StateDir: state,
			MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond})
	}()
	var got []string
	for len(got) < 3 {
		select {
		case h := <-standby:
			got = append(got, h)
		case <-time.After(30 * time.Second):
			t.Fatalf("attempts' %s so far: %q", wire.HeaderStandby, got)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if want := []string{"", wire.StandbyOn, ""}; !slices.Equal(got, want) {
		t.Errorf("attempts' %s: %q, want %q (plain, standing by once replaced, plain once the gateway took the tunnel)", wire.HeaderStandby, got, want)
	}
}

// TestConnectConnectionLostSaysSo: a tunnel whose connection ended
// without a close frame (here a TCP proxy in between cut it, as a
// restarting reverse proxy does) was logged as "tunnel closed by the
// gateway", which had said and done nothing (found by the audit32 audit).
func TestConnectConnectionLostSaysSo(t *testing.T) {
	g := newGW(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	// cut closes both ends of every connection so far, without a
	// WebSocket close frame: a proxy restarting.
	cut := func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
		conns = nil
	}
	t.Cleanup(func() { _ = ln.Close(); cut(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", g.ts.Listener.Addr().String())
			if err != nil {
				_ = c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, up)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(up, c); _ = up.Close() })
			wg.Go(func() { _, _ = io.Copy(c, up); _ = c.Close() })
		}
	})
	logs := &syncBuffer{}
	tunnels := runAgent(t, g.ctx, ConnectConfig{GatewayURL: "http://" + ln.Addr().String(), Token: g.token(store.RoleAgent, "h1"), StateDir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	waitTunnel(t, tunnels, "h1")
	cut()
	select {
	case <-logs.has("gateway tunnel ended"):
	case <-time.After(30 * time.Second):
		t.Fatalf("no end of the tunnel logged:\n%s", logs.String())
	}
	waitTunnel(t, tunnels, "h1")
	if l := logs.String(); strings.Contains(l, "closed by the gateway") || !strings.Contains(l, "without the gateway saying why") {
		t.Errorf("a cut connection is not logged as one:\n%s", l)
	}
}

// TestConnectStopTellsTheGateway: an agent that stops (ctx ends: SIGTERM,
// SIGINT) logs so and closes its tunnel with a close frame saying so
// (1001, "agent stopping"), and the gateway logs that the agent stopped.
// It logged nothing of its stop, and its tunnel's plain close read at the
// gateway as err=EOF (found by the tunnellogs32 audit).
func TestConnectStopTellsTheGateway(t *testing.T) {
	g := newGW(t)
	var gwLogs testenv.LogBuffer
	g.restartLogging(slog.New(slog.NewTextHandler(&gwLogs, nil)))
	logs := &syncBuffer{}
	tunnels := make(chan string, 1)
	ctx, stop := context.WithCancelCause(g.ctx)
	done := make(chan error, 1)
	go func() {
		done <- Connect(ctx, &ConnectConfig{GatewayURL: g.ts.URL, Token: g.token(store.RoleAgent, "h1"), StateDir: t.TempDir(),
			Logger: slog.New(slog.NewTextHandler(logs, nil)), OnTunnel: func(id string) { tunnels <- id }})
	}()
	waitTunnel(t, tunnels, "h1")
	stop(errors.New("terminated signal received"))
	if err := <-done; err != nil {
		t.Fatalf("Connect: %v", err)
	}
	if l := logs.String(); !strings.Contains(l, `msg="agent stopping: closed its tunnel, telling the gateway it stops; the tunnel's sessions end and their commands are killed"`) ||
		!strings.Contains(l, `cause="terminated signal received"`) {
		t.Errorf("the agent's log does not say it stops, and why:\n%s", l)
	}
	re := regexp.MustCompile(`msg="tunnel down" .*reason=("[^"]*") err=("[^"]*")`)
	var m []string
	for end := time.Now().Add(30 * time.Second); m == nil; time.Sleep(10 * time.Millisecond) {
		if m = re.FindStringSubmatch(gwLogs.String()); m == nil && time.Now().After(end) {
			t.Fatalf("no tunnel down line at the gateway:\n%s", gwLogs.String())
		}
	}
	if m[1] != `"the agent stopped"` || m[2] != `"bytestream: websocket closed by the peer: agent stopping (status 1001)"` {
		t.Errorf("the gateway logged the stopped agent's tunnel down with reason=%s err=%s, want that the agent stopped", m[1], m[2])
	}
}

// After a tunnel ends (a gateway restart), the next "tunnel up" says how
// long the host was offline and how many attempts failed meanwhile, which
// the log otherwise left to two lines' times, the failure's logged once
// and often long before. The first tunnel has nothing to say.
func TestConnectTunnelUpSaysHowLongTheHostWasOffline(t *testing.T) {
	g := newGW(t)
	var logs syncBuffer
	tunnels := runAgent(t, g.ctx, ConnectConfig{GatewayURL: g.ts.URL, Token: g.token(store.RoleAgent, "h1"), StateDir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	waitTunnel(t, tunnels, "h1")
	g.restart()
	waitTunnel(t, tunnels, "h1")
	var ups []string
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, `msg="tunnel up"`) {
			ups = append(ups, l)
		}
	}
	if len(ups) != 2 {
		t.Fatalf("%d tunnel up lines, want 2:\n%s", len(ups), logs.String())
	}
	if strings.Contains(ups[0], "offline=") {
		t.Errorf("the first tunnel up names an outage: %s", ups[0])
	}
	if !regexp.MustCompile(` offline=[0-9.]+[mµn]?s failedAttempts=[0-9]+`).MatchString(ups[1]) {
		t.Errorf("the tunnel up after a restart does not say how long the host was offline and how many attempts failed: %s", ups[1])
	}
}

// The agent says its build as its connect request's User-Agent, which the
// gateway's tunnel up line shows: in a rolling upgrade, which hosts run
// an old agent. It said Go's "Go-http-client/1.1".
func TestConnectSendsItsBuild(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case got <- r.UserAgent():
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":{"code":"unauthorized","message":"no"}}`)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Connect(ctx, &ConnectConfig{GatewayURL: srv.URL, Token: "hg_x", StateDir: t.TempDir()})
	}()
	var ua string
	select {
	case ua = <-got:
	case <-ctx.Done():
		t.Fatal("no connect request within 30 s")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if want := "hostgate-agent (" + buildinfo.Version() + ")"; ua != want {
		t.Errorf("User-Agent %q, want %q", ua, want)
	}
}

// TestConnectSilentGatewaySaysSo: a gateway that takes the agent's TCP
// connection and never answers (frozen, or the path died once the
// connection was made) is logged as one that did not answer. The dial's
// 30 s ctx logged "context deadline exceeded".
func TestConnectSilentGatewaySaysSo(t *testing.T) {
	defer func(d time.Duration) { dialTimeout = d }(dialTimeout)
	dialTimeout = 300 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // read nothing, answer nothing
			mu.Unlock()
		}
	})
	defer func() {
		_ = ln.Close()
		wg.Wait()
		for _, c := range held {
			_ = c.Close()
		}
	}()
	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Connect(ctx, &ConnectConfig{GatewayURL: "http://" + ln.Addr().String(), Token: "t", StateDir: t.TempDir(),
			MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	}()
	select {
	case <-logs.has("gateway tunnel ended"):
	case <-time.After(30 * time.Second): // a guard against a hang, not a timing
		t.Errorf("no failed attempt logged 30 s on, the dial bounded at 300 ms:\n%s", logs.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if l := logs.String(); !strings.Contains(l, "no answer to the WebSocket handshake within 300ms") {
		t.Errorf("a gateway that never answers, logged as:\n%s\nwant it to say no answer came within 300ms", l)
	}
}
