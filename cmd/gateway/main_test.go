package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"flag"
	"io"
	"io/fs"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
	"go.uber.org/goleak"

	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/gateway"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/internal/testenv"
	"github.com/hostgate/hostgate/internal/webterm"
)

func TestMain(m *testing.M) {
	// The test binary doubles as the gateway binary, so OpenSSH can run
	// it as a ProxyCommand without a separate build.
	if os.Getenv("HOSTGATE_TEST_BE_GATEWAY") == "1" {
		// What the process read and wrote by system calls, for a test
		// of how a proxy moved its bytes (proxy_splice_linux_test.go),
		// written once main returns. ssh's SIGHUP, which main's handler
		// no longer catches then, must not end the process before.
		ioFile := os.Getenv("HOSTGATE_TEST_PROC_IO")
		if ioFile != "" {
			signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP)
		}
		main()
		if ioFile != "" {
			if b, err := os.ReadFile("/proc/self/io"); err == nil {
				_ = os.WriteFile(ioFile, b, 0o600)
			}
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// cli runs one gateway command in-process and returns its stdout.
func cli(t *testing.T, ctx context.Context, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(ctx, stdio{in: strings.NewReader(""), out: &out, err: &errb}, args)
	if err != nil {
		t.Logf("gateway %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), err
}

// tokenMaker is `gateway token create --state-dir dir ARGS…`, answering the
// token.
func tokenMaker(t *testing.T, ctx context.Context, dir string) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		out, err := cli(t, ctx, append([]string{"token", "create", "--state-dir", dir}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		return lastLine(out)
	}
}

// apiDo sends one request to the gateway at base with token (none when
// empty) and answers its status and body.
func apiDo(t *testing.T, ctx context.Context, base, method, path, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Accept", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// startServe runs `gateway serve` logic on 127.0.0.1:0 until the test ends;
// opts adjust its flags.
func startServe(t *testing.T, dir string, opts ...func(*serveConfig)) string {
	t.Helper()
	u, _ := startStoppable(t, dir, opts...)
	return u
}

// serveWith runs `gateway serve` logic with c, logging to logs, and
// answers the address it bound and a stop that ends it and gives serve's
// error (run at cleanup when not called before).
func serveWith(t *testing.T, c *serveConfig, logs io.Writer) (net.Addr, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, slog.New(slog.NewTextHandler(logs, nil)), c, func(a net.Addr) { ready <- a })
	}()
	var a net.Addr
	select {
	case a = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("serve: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("serve did not start")
	}
	stop := sync.OnceValue(func() error { cancel(); return <-done })
	t.Cleanup(func() { _ = stop() })
	return a, stop
}

// serveLogged runs `gateway serve` logic on dir, logging to logs, until
// the stop it returns, which gives serve's error.
func serveLogged(t *testing.T, dir string, logs io.Writer) (stop func() error) {
	t.Helper()
	_, stop = serveWith(t, &serveConfig{Listen: "127.0.0.1:0", StateDir: dir, Docker: "off", CertTTL: time.Minute, LogFormat: "text"}, logs)
	return stop
}

// startStoppable is startServe that also returns a stop, which waits for
// serve to return (it runs at cleanup when not called before).
func startStoppable(t *testing.T, dir string, opts ...func(*serveConfig)) (string, func()) {
	t.Helper()
	c := &serveConfig{Listen: "127.0.0.1:0", StateDir: dir, Docker: "off", CertTTL: time.Minute, LogFormat: "text"}
	for _, o := range opts {
		o(c)
	}
	a, stopServe := serveWith(t, c, io.Discard)
	stop := sync.OnceFunc(func() {
		if err := stopServe(); err != nil {
			t.Errorf("serve returned %v after SIGTERM", err)
		}
	})
	t.Cleanup(stop)
	return "http://" + a.String(), stop
}

// A second gateway on a state dir in use refuses to start, naming why;
// once the first stops, the dir is free.
func TestServeLocksStateDir(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	logger := slog.New(slog.DiscardHandler)
	cfg := func() *serveConfig {
		return &serveConfig{Listen: "127.0.0.1:0", StateDir: dir, Docker: "off", CertTTL: time.Minute, LogFormat: "text"}
	}
	go func() { done <- serve(ctx, logger, cfg(), func(a net.Addr) { ready <- a }) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("serve: %v", err)
	}
	err := serve(context.Background(), logger, cfg(), nil)
	if err == nil || !strings.Contains(err.Error(), "another gateway is serving from "+dir) {
		t.Errorf("a second gateway on the same state dir: %v, want it refused", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { done <- serve(ctx2, logger, cfg(), func(a net.Addr) { ready <- a }) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("serve after the first stopped: %v", err)
	}
	cancel2()
	<-done
}

// echoAgent enrolls as the token's host and echoes every stream.
func echoAgent(t *testing.T, ctx context.Context, base, token string) {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, _ := ssh.NewSignerFromKey(priv)
	h := http.Header{}
	h.Set("Authorization", "Bearer "+token)
	h.Set(wire.HeaderHostKey, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))))
	conn, resp, err := bytestream.DialWebSocket(ctx, base+wire.ConnectPath, &bytestream.WebSocketOptions{Header: h})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := bytestream.MuxServer(conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get(wire.HeaderKeyProof) != "" {
		// The gateway pins the key once this agent has signed an SSH key
		// exchange with it, on the first stream, and ends that connection
		// when the host is routable.
		ca, _, _, _, err := ssh.ParseAuthorizedKey([]byte(resp.Header.Get(wire.HeaderCAKey)))
		if err != nil {
			t.Fatal(err)
		}
		// x/crypto's server, not sshlayer's (Unix only): this agent
		// only has to sign the exchange and let the gateway's CA in.
		cfg := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
			if c, ok := k.(*ssh.Certificate); ok && bytes.Equal(c.SignatureKey.Marshal(), ca.Marshal()) {
				return nil, nil
			}
			return nil, errors.New("not a certificate of the gateway's CA")
		}}
		cfg.AddHostKey(signer)
		st, err := sess.AcceptStream()
		if err != nil {
			t.Fatal(err)
		}
		sc, chans, reqs, err := ssh.NewServerConn(st, cfg)
		if err != nil {
			t.Fatalf("host key proof: %v", err)
		}
		go ssh.DiscardRequests(reqs)
		go func() {
			for ch := range chans {
				_ = ch.Reject(ssh.Prohibited, "an echo agent")
			}
		}()
		_ = sc.Wait() // the gateway ends it once the host is routable
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			st, err := sess.AcceptStream()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); _, _ = io.Copy(st, st); _ = st.Close() }()
		}
	}()
	t.Cleanup(func() { _ = sess.Close(); wg.Wait() })
}

// TestServeTokensProxyResetKey runs the binary's commands together: tokens
// created while serve runs (a second handle on the same database), an
// agent enrolling with one, `gateway proxy` relaying stdio through to it,
// and `host reset-key`.
func TestServeTokensProxyResetKey(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "state")
	base := startServe(t, dir)

	out, err := cli(t, ctx, "token", "create", "--role", "agent", "--host", "h1", "--state-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	agentTok := lastLine(out)
	if !strings.HasPrefix(agentTok, "hg_") {
		t.Fatalf("last line %q", agentTok)
	}
	echoAgent(t, ctx, base, agentTok)
	t.Setenv("HOSTGATE_STATE_DIR", dir) // the env var works as the flag
	out, err = cli(t, ctx, "token", "create", "--role", "client", "--host", "h1", "--name", "laptop")
	if err != nil {
		t.Fatal(err)
	}
	clientTok := lastLine(out)

	// `gateway proxy h1` with pipes as its stdio.
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	t.Setenv("HOSTGATE_URL", base)
	t.Setenv("HOSTGATE_TOKEN", clientTok)
	perr := make(chan error, 1)
	go func() {
		perr <- run(ctx, stdio{in: inR, out: outW, err: io.Discard}, []string{"proxy", "h1"})
	}()
	msg := bytes.Repeat([]byte("ssh bytes "), 10000)
	werr := make(chan error, 1)
	go func() { _, err := inW.Write(msg); werr <- err }()
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(outR, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) || <-werr != nil {
		t.Fatal("proxy echo differs")
	}
	// ssh closes the proxy's stdin when it is done: the proxy ends cleanly.
	_ = inW.Close()
	if _, err := io.ReadAll(outR); err != nil {
		t.Fatal(err)
	}
	if err := <-perr; err != nil {
		t.Fatalf("proxy: %v", err)
	}

	// ssh may also close the proxy's stdout while the host still sends: the
	// write's EPIPE ends the proxy cleanly too.
	pinR, pinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	poutR, poutW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pinW.Close()
	go func() {
		perr <- run(ctx, stdio{in: pinR, out: poutW, err: io.Discard}, []string{"proxy", "h1"})
	}()
	if _, err := pinW.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(poutR, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	_ = poutR.Close()
	// Echoed into the closed pipe; the proxy may close its stdin before
	// this write is done.
	go func() { _, _ = pinW.Write(msg) }()
	if err := <-perr; err != nil {
		t.Fatalf("proxy after its stdout closed: %v, want a clean end", err)
	}

	// A proxy to a host the token does not name fails with the gateway's
	// reason, not a hang; the reason is on stderr before stdout closes
	// (ssh hangs up on its ProxyCommand once stdout ends).
	var events []string
	pout := &eventWriteCloser{events: &events, name: "stdout"}
	errw := &eventWriteCloser{events: &events, name: "stderr"}
	err = run(ctx, stdio{in: strings.NewReader(""), out: pout, err: errw}, []string{"proxy", "other"})
	if err == nil || !strings.Contains(err.Error(), "host other: not among the hosts this token reaches") || strings.Count(err.Error(), "host other") != 1 || !errors.As(err, new(reportedError)) {
		t.Errorf("proxy to other host: %v, want the gateway's reason, reported, naming the host once", err)
	}
	// gateway cert says it the same way.
	err = run(ctx, stdio{in: strings.NewReader(""), out: io.Discard, err: io.Discard}, []string{"cert", "--key", filepath.Join(t.TempDir(), "id"), "other"})
	if err == nil || !strings.Contains(err.Error(), "host other: gateway: not among the hosts this token reaches") || strings.Count(err.Error(), "host other") != 1 {
		t.Errorf("cert for other host: %v, want the gateway's reason, naming the host once", err)
	}
	if len(events) != 2 || !strings.HasPrefix(events[0], "stderr: gateway: proxy: host other:") || events[1] != "stdout closed" {
		t.Errorf("proxy to other host: %q, want the reason on stderr, then stdout closed", events)
	}

	if _, err := cli(t, ctx, "host", "reset-key", "h1", "--state-dir", dir); err != nil {
		t.Fatal(err)
	}
	if _, err := cli(t, ctx, "host", "reset-key", "nope"); err == nil {
		t.Error("reset of unknown host succeeded")
	}
	st, err := os.Stat(filepath.Join(dir, caKeyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("ca key: %v %v", st, err)
	}
}

func TestTokenCreateRules(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	for _, args := range [][]string{
		{"--role", "agent"},
		{"--role", "agent", "--host", "a", "--host", "b"},
		{"--role", "client"},
		{"--role", "admin", "--host", "a"},
		{"--role", "root"},
		{"--role", "client", "--host", "bad/id"},
	} {
		if _, err := cli(t, ctx, append([]string{"token", "create", "--state-dir", dir}, args...)...); err == nil {
			t.Errorf("token create %v succeeded", args)
		}
	}
	out, err := cli(t, ctx, "token", "create", "--state-dir", dir, "--role", "client", "--host", "a,b", "--ttl", "1h", "--name", "ci")
	if err != nil || !strings.Contains(out, "for host a, b") || !strings.Contains(out, "expires") {
		t.Errorf("%q %v", out, err)
	}
	secret := lastLine(out)
	list, err := cli(t, ctx, "token", "list", "--state-dir", dir)
	if err != nil || !strings.Contains(list, "ci") || !strings.Contains(list, "a,b") || strings.Contains(list, secret) {
		t.Fatalf("list %q %v", list, err)
	}
	id := strings.Fields(strings.Split(strings.TrimSpace(list), "\n")[1])[0]
	if _, err := cli(t, ctx, "token", "revoke", id, "--state-dir", dir); err != nil {
		t.Fatal(err)
	}
	if _, err := cli(t, ctx, "token", "revoke", id, "--state-dir", dir); err == nil {
		t.Error("revoked twice")
	}
	if list, _ := cli(t, ctx, "token", "list", "--state-dir", dir); strings.Contains(list, "ci") {
		t.Errorf("revoked token listed: %q", list)
	}
}

// A token's secret given to revoke in place of its id is not repeated in
// the error (terminals, logs, CI output keep it): the token's id is named
// instead, and nothing is revoked.
func TestTokenRevokeBySecretNamesTheID(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	out, err := cli(t, ctx, "token", "create", "--state-dir", dir, "--role", "admin", "--name", "ops")
	if err != nil {
		t.Fatal(err)
	}
	secret := lastLine(out)
	list, err := cli(t, ctx, "token", "list", "--state-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	id := strings.Fields(strings.Split(strings.TrimSpace(list), "\n")[1])[0]
	for _, given := range []string{secret, secret + "x"} {
		_, err = cli(t, ctx, "token", "revoke", given, "--state-dir", dir)
		if err == nil || strings.Contains(err.Error(), given) || !strings.Contains(err.Error(), "nothing revoked") {
			t.Errorf("revoke %s…: %v; want a refusal that does not repeat it", given[:6], err)
		}
	}
	if err == nil || strings.Contains(err.Error(), id) {
		t.Errorf("revoke of a secret no token has: %v; want no id named", err)
	}
	_, err = cli(t, ctx, "token", "revoke", secret, "--state-dir", dir)
	if err == nil || !strings.Contains(err.Error(), "the token's id is "+id) {
		t.Errorf("revoke of a token's secret: %v; want its id %s named", err, id)
	}
	if list, _ := cli(t, ctx, "token", "list", "--state-dir", dir); !strings.Contains(list, id) {
		t.Errorf("the token was revoked by its secret: %q", list)
	}
}

// A token written to a state dir no gateway has used yet (a forgotten or
// mistyped --state-dir) says so: the running gateway would refuse it.
func TestTokenCreateWarnsOfNewState(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "state")
	for i, want := range []bool{true, false} {
		var out, errb bytes.Buffer
		if err := run(ctx, stdio{in: strings.NewReader(""), out: &out, err: &errb}, []string{"token", "create", "--state-dir", dir, "--role", "admin"}); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(errb.String(), "no gateway state in "+dir); got != want {
			t.Errorf("token create %d: warned %v, want %v (stderr %q)", i, got, want, errb.String())
		}
		if !strings.HasPrefix(lastLine(out.String()), "hg_") {
			t.Errorf("token create %d: last line %q, want the token", i, lastLine(out.String()))
		}
	}
}

// --help is an answer, not a usage error (exit 0), and names each flag's
// environment variable.
func TestHelp(t *testing.T) {
	ctx := testCtx(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--help"}, "commands:"},
		{[]string{"serve", "--help"}, "--state-dir HOSTGATE_STATE_DIR"},
		{[]string{"proxy", "-h"}, "--token HOSTGATE_TOKEN"},
		{[]string{"token", "create", "--help"}, "--state-dir HOSTGATE_STATE_DIR"},
	} {
		var out, errb bytes.Buffer
		err := run(ctx, stdio{in: strings.NewReader(""), out: &out, err: &errb}, tc.args)
		if err != nil && !errors.Is(err, flag.ErrHelp) {
			t.Errorf("gateway %v: %v, want help (exit 0)", tc.args, err)
		}
		// On stdout, as `gateway --help` always was, so that it pages and
		// greps: a command's help went to stderr.
		if !strings.Contains(out.String(), tc.want) || errb.Len() != 0 {
			t.Errorf("gateway %v: help on stdout lacks %q, or stderr has some:\nstdout:\n%s\nstderr:\n%s", tc.args, tc.want, out.String(), errb.String())
		}
	}
	// Every command answers -h and --help with its usage on stdout, and
	// does nothing else: `gateway version -h` printed the version.
	for name := range commands {
		for _, h := range []string{"-h", "--help"} {
			var out, errb bytes.Buffer
			err := run(ctx, stdio{in: strings.NewReader(""), out: &out, err: &errb}, []string{name, h})
			if (err != nil && !errors.Is(err, flag.ErrHelp)) || !strings.HasPrefix(out.String(), "usage") || errb.Len() != 0 {
				t.Errorf("gateway %s %s: %v; want its usage on stdout alone:\nstdout:\n%s\nstderr:\n%s", name, h, err, out.String(), errb.String())
			}
		}
	}
	// A flag that is not defined is an error: it and the usage stay on stderr.
	var out, errb bytes.Buffer
	if err := run(ctx, stdio{in: strings.NewReader(""), out: &out, err: &errb}, []string{"serve", "--no-such-flag"}); err == nil || out.Len() != 0 || !strings.Contains(errb.String(), "no-such-flag") {
		t.Errorf("gateway serve --no-such-flag: %v, stdout %q, stderr %q; want an error naming the flag on stderr alone", err, out.String(), errb.String())
	}
	if strings.Contains(func() string {
		var b bytes.Buffer
		_ = run(ctx, stdio{in: strings.NewReader(""), out: &b, err: &b}, []string{"token", "create", "--help"})
		return b.String()
	}(), "HOSTGATE_ROLE") {
		t.Error("token create's help names an environment variable it does not read")
	}
	// A usage line that lists its command's flags lists every one: cert's
	// left out --cert and --min-valid.
	flagRE := regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)`)
	for _, cmd := range []string{"cert", "proxy"} {
		var out bytes.Buffer
		_ = run(ctx, stdio{in: strings.NewReader(""), out: &out, err: io.Discard}, []string{cmd, "--help"})
		usage, _, _ := strings.Cut(out.String(), "\n")
		for _, m := range flagRE.FindAllStringSubmatch(out.String(), -1) {
			if !strings.Contains(usage, "[--"+m[1]+"]") && !strings.Contains(usage, "[--"+m[1]+" ") {
				t.Errorf("gateway %s --help: the usage line %q lacks --%s", cmd, usage, m[1])
			}
		}
	}
}

func TestFlagsFromEnvironment(t *testing.T) {
	fs := newFlags("x", stdio{out: io.Discard, err: io.Discard})
	listen := fs.String("listen", "127.0.0.1:8080", "")
	docker := fs.String("docker", "auto", "")
	ttl := fs.Duration("cert-ttl", time.Minute, "")
	t.Setenv("HOSTGATE_LISTEN", "127.0.0.1:9")
	t.Setenv("HOSTGATE_DOCKER", "off")
	t.Setenv("HOSTGATE_CERT_TTL", "5m")
	if err := parse(fs, []string{"--docker", "on"}); err != nil {
		t.Fatal(err)
	}
	if *listen != "127.0.0.1:9" || *docker != "on" || *ttl != 5*time.Minute {
		t.Errorf("listen %q docker %q ttl %v", *listen, *docker, *ttl)
	}
	t.Setenv("HOSTGATE_CERT_TTL", "soon")
	if err := parse(newFlagsWithTTL(), nil); err == nil {
		t.Error("bad env value accepted")
	}
	if EnvName("state-dir") != "HOSTGATE_STATE_DIR" || EnvName("public-url") != "HOSTGATE_PUBLIC_URL" {
		t.Error("env names")
	}
}

func newFlagsWithTTL() *flag.FlagSet {
	fs := newFlags("y", stdio{out: io.Discard, err: io.Discard})
	fs.Duration("cert-ttl", time.Minute, "")
	return fs
}

func TestServeValidatesFlags(t *testing.T) {
	ctx := testCtx(t)
	for _, args := range [][]string{
		{"--docker", "maybe"},
		{"--cert-ttl", "0s"},
		{"--cert-ttl", "100h"},
		{"--public-url", "ftp://x"},
		{"--trusted-proxy", "10.0.0.0/33"},
		{"--token-recheck", "1ms"},
		{"--repository-roots", "srv/repos"},
		{"--trusted-proxy", "proxy.example.com"},
		{"extra"},
	} {
		if _, err := cli(t, ctx, append([]string{"serve", "--state-dir", t.TempDir()}, args...)...); err == nil {
			t.Errorf("serve %v accepted", args)
		}
	}
	if _, err := cli(t, ctx, "nope"); err == nil {
		t.Error("unknown command accepted")
	}
}

// A value the flag package cannot parse says what the flag takes, on the
// command line and in the environment: "--cert-ttl 10" said only "parse
// error" (found by the audit30 audit).
func TestBadFlagValueSaysTheForm(t *testing.T) {
	ctx := testCtx(t)
	_, err := cli(t, ctx, "serve", "--state-dir", t.TempDir(), "--cert-ttl", "10")
	if err == nil || !strings.Contains(err.Error(), "--cert-ttl wants a duration with its unit, such as 90s, 10m or 1h30m") {
		t.Errorf("--cert-ttl 10: %v", err)
	}
	t.Setenv("HOSTGATE_SANDBOX_POOL", "two")
	_, err = cli(t, ctx, "serve", "--state-dir", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), `HOSTGATE_SANDBOX_POOL="two": parse error; --sandbox-pool wants a whole number`) {
		t.Errorf("HOSTGATE_SANDBOX_POOL=two: %v", err)
	}
}

func TestTrustedProxyFlag(t *testing.T) {
	t.Setenv("HOSTGATE_TRUSTED_PROXY", "10.0.0.0/8, 127.0.0.1")
	c, err := parseServeFlags("serve", stdio{out: io.Discard, err: io.Discard}, nil, serveConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.proxies) != 2 || c.proxies[0].String() != "10.0.0.0/8" || c.proxies[1].String() != "127.0.0.1/32" {
		t.Fatalf("proxies %v", c.proxies)
	}
}

func TestRepositoryRootsFlag(t *testing.T) {
	c, err := parseServeFlags("serve", stdio{out: io.Discard, err: io.Discard}, []string{"--repository-roots", " /srv/repos, /home/git/"}, serveConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.repositoryRoots(); len(got) != 2 || got[0] != "/srv/repos" || got[1] != "/home/git/" {
		t.Fatalf("roots %q", got)
	}
}

// TestCheckpointRetentionFlags: both off by default, both from the
// environment, sizes with units; bad values refused.
func TestCheckpointRetentionFlags(t *testing.T) {
	if !executionsBuilt {
		t.Skip("this build refuses the checkpoint flags (TestRefuseExecutionFlags)")
	}
	sio := stdio{out: io.Discard, err: io.Discard}
	c, err := parseServeFlags("serve", sio, nil, serveConfig{})
	if err != nil || c.CheckpointMaxAge != 0 || c.CheckpointMaxBytes != 0 {
		t.Fatalf("defaults: %+v %v, want both 0", c, err)
	}
	t.Setenv("HOSTGATE_CHECKPOINT_MAX_BYTES", "20G")
	t.Setenv("HOSTGATE_CHECKPOINT_MAX_AGE", "72h")
	c, err = parseServeFlags("serve", sio, nil, serveConfig{})
	if err != nil || c.CheckpointMaxAge != 72*time.Hour || c.CheckpointMaxBytes != 20<<30 {
		t.Fatalf("from the environment: %v %v %v", c.CheckpointMaxAge, c.CheckpointMaxBytes, err)
	}
	for in, want := range map[string]int64{"0": 0, "1234": 1234, "512k": 512 << 10, "1MiB": 1 << 20, "3 GiB": 3 << 30, "2T": 2 << 40, "7B": 7} {
		c, err := parseServeFlags("serve", sio, []string{"--checkpoint-max-bytes", in}, serveConfig{})
		if err != nil || int64(c.CheckpointMaxBytes) != want {
			t.Errorf("--checkpoint-max-bytes %q: %v %v, want %d", in, c, err, want)
		}
	}
	for _, args := range [][]string{
		{"--checkpoint-max-bytes", "-1"},
		{"--checkpoint-max-bytes", "10X"},
		{"--checkpoint-max-bytes", "1.5G"},
		{"--checkpoint-max-bytes", "20GB"},
		{"--checkpoint-max-bytes", "99999999T"},
		{"--checkpoint-max-bytes", ""},
		{"--checkpoint-max-age", "-1h"},
		{"--checkpoint-max-age", "week"},
	} {
		if _, err := parseServeFlags("serve", sio, args, serveConfig{}); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

// TestRelayMemoryFlag: --relay-memory (or HOSTGATE_RELAY_MEMORY) reaches
// the gateway's relay budget, 256M unless set, 0 for no bound; --help
// shows its default as a size.
func TestRelayMemoryFlag(t *testing.T) {
	sio := stdio{out: io.Discard, err: io.Discard}
	// t.Setenv restores the caller's value at the end, whatever the
	// cases set or unset meanwhile.
	t.Setenv("HOSTGATE_RELAY_MEMORY", "")
	for _, tc := range []struct {
		args []string
		env  string
		want int64
	}{
		{nil, "", gateway.DefaultRelayMemory},
		{[]string{"--relay-memory", "64M"}, "", 64 << 20},
		{[]string{"--relay-memory", "0"}, "", -1},
		{nil, "1G", 1 << 30},
		{[]string{"--relay-memory", "2G"}, "1G", 2 << 30},
	} {
		if tc.env != "" {
			_ = os.Setenv("HOSTGATE_RELAY_MEMORY", tc.env)
		} else {
			_ = os.Unsetenv("HOSTGATE_RELAY_MEMORY")
		}
		c, err := parseServeFlags("serve", sio, tc.args, serveConfig{CertTTL: time.Hour})
		if err != nil {
			t.Fatalf("%v (env %q): %v", tc.args, tc.env, err)
		}
		if got := c.gatewayConfig().RelayMemory; got != tc.want {
			t.Errorf("%v (env %q): relay memory %d, want %d", tc.args, tc.env, got, tc.want)
		}
	}
	_ = os.Unsetenv("HOSTGATE_RELAY_MEMORY")
	for _, bad := range []string{"-1", "lots", "1.5G"} {
		if _, err := parseServeFlags("serve", sio, []string{"--relay-memory", bad}, serveConfig{}); err == nil || !strings.Contains(err.Error(), "relay-memory") {
			t.Errorf("--relay-memory %q: %v, want an error naming the flag", bad, err)
		}
	}
	var help bytes.Buffer
	_, err := parseServeFlags("serve", stdio{out: &help, err: &help}, []string{"--help"}, serveConfig{})
	if !errors.Is(err, flag.ErrHelp) || !strings.Contains(help.String(), "(default 256M)") {
		t.Errorf("--help: %v; the relay memory's default is not shown as 256M in:\n%s", err, help.String())
	}
}

// TestDirectFlag: --direct-sessions (or HOSTGATE_DIRECT_SESSIONS) turns the gateway's
// direct sessions off, on by default; anything but on and off is refused
// naming the flag.
func TestDirectFlag(t *testing.T) {
	sio := stdio{out: io.Discard, err: io.Discard}
	t.Setenv("HOSTGATE_DIRECT_SESSIONS", "")
	for _, tc := range []struct {
		args []string
		env  string
		off  bool
	}{
		{nil, "", false},
		{[]string{"--direct-sessions", "off"}, "", true},
		{[]string{"--direct-sessions=on"}, "", false},
		{nil, "off", true},
		{[]string{"--direct-sessions", "on"}, "off", false},
	} {
		if tc.env != "" {
			_ = os.Setenv("HOSTGATE_DIRECT_SESSIONS", tc.env)
		} else {
			_ = os.Unsetenv("HOSTGATE_DIRECT_SESSIONS")
		}
		c, err := parseServeFlags("serve", sio, tc.args, serveConfig{CertTTL: time.Hour})
		if err != nil {
			t.Fatalf("%v (env %q): %v", tc.args, tc.env, err)
		}
		if got := c.gatewayConfig().DirectOff; got != tc.off {
			t.Errorf("%v (env %q): direct off %v, want %v", tc.args, tc.env, got, tc.off)
		}
	}
	_ = os.Setenv("HOSTGATE_DIRECT_SESSIONS", "yes")
	if _, err := parseServeFlags("serve", sio, nil, serveConfig{}); err == nil || !strings.Contains(err.Error(), `HOSTGATE_DIRECT_SESSIONS="yes": want on or off`) {
		t.Errorf("HOSTGATE_DIRECT_SESSIONS=yes: %v, want an error naming the variable and its values", err)
	}
	_ = os.Unsetenv("HOSTGATE_DIRECT_SESSIONS")
	var help bytes.Buffer
	if _, err := parseServeFlags("serve", stdio{out: &help, err: &help}, []string{"--help"}, serveConfig{}); !errors.Is(err, flag.ErrHelp) || !strings.Contains(help.String(), "-direct-sessions on|off\n") || !strings.Contains(help.String(), "(default on)") {
		t.Errorf("--help: %v; --direct-sessions is not shown with its values and default in:\n%s", err, help.String())
	}
	for _, bad := range []string{"yes", "", "OFF"} {
		if _, err := parseServeFlags("serve", sio, []string{"--direct-sessions", bad}, serveConfig{}); err == nil || !strings.Contains(err.Error(), "-direct-sessions") || !strings.Contains(err.Error(), "want on or off") {
			t.Errorf("--direct-sessions %q: %v, want an error naming the flag and its values", bad, err)
		}
	}
}

func TestParseArgsInterspersed(t *testing.T) {
	for _, tc := range []struct {
		args []string
		dir  string
		pos  string
	}{
		{[]string{"h1", "--state-dir", "d"}, "d", "h1"},
		{[]string{"--state-dir", "d", "h1"}, "d", "h1"},
		{[]string{"a", "--state-dir=d", "b"}, "d", "a b"},
		{[]string{"--state-dir", "d", "--", "-x", "--state-dir"}, "d", "-x --state-dir"},
		{nil, "", ""},
	} {
		fs := newFlags("t", stdio{out: io.Discard, err: io.Discard})
		dir := fs.String("state-dir", "", "")
		if err := parseArgs(fs, tc.args); err != nil {
			t.Fatal(err)
		}
		if *dir != tc.dir || strings.Join(fs.Args(), " ") != tc.pos {
			t.Errorf("%q: dir %q args %q", tc.args, *dir, fs.Args())
		}
	}
}

// The session cookie authorizes a path-form preview for a navigation, for
// the gateway's own origin and for clients without fetch metadata; not for
// a same-site page's fetches or WebSockets (a preview subdomain's).
func TestCookieUseAllowed(t *testing.T) {
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		want bool
	}{
		{"form posted from a preview subdomain", map[string]string{"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document", ":method": "POST"}, false},
		{"no metadata (curl)", nil, true},
		{"same origin fetch", map[string]string{"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors"}, true},
		{"typed URL", map[string]string{"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}, true},
		{"link from elsewhere", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}, true},
		{"framed by a preview subdomain", map[string]string{"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "iframe"}, false},
		{"preview subdomain fetch", map[string]string{"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "cors"}, false},
		{"preview subdomain image", map[string]string{"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "no-cors"}, false},
		{"preview subdomain socket", map[string]string{"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "websocket", "Upgrade": "websocket", "Origin": "http://3000--a.preview.test"}, false},
		{"foreign socket, old browser", map[string]string{"Upgrade": "websocket", "Origin": "http://3000--a.preview.test"}, false},
		{"own socket", map[string]string{"Sec-Fetch-Site": "same-origin", "Upgrade": "websocket", "Origin": "http://gw.test"}, true},
	} {
		r := withHeaders("http://gw.test/preview/b/8080/", tc.hdr)
		if got := cookieUseAllowed(r, nil); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// withHeaders is a request to url with hdr set; ":method" sets the method
// (default GET).
func withHeaders(url string, hdr map[string]string) *http.Request {
	method := "GET"
	if m, ok := hdr[":method"]; ok {
		method = m
	}
	r := httptest.NewRequest(method, url, nil)
	for k, v := range hdr {
		if k != ":method" {
			r.Header.Set(k, v)
		}
	}
	return r
}

// A subdomain preview's own cookie serves requests from that preview and
// from other ports of the same host, and links followed to it; not what
// another host's preview page (same-site with it) sends: a background
// fetch, a form post, a WebSocket.
func TestPreviewCookieUseAllowed(t *testing.T) {
	const domain = "preview.test"
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		want bool
	}{
		{"no metadata (curl)", nil, true},
		{"own page fetch", map[string]string{"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors", "Origin": "http://3000--h1.preview.test"}, true},
		{"own socket", map[string]string{"Sec-Fetch-Site": "same-origin", "Upgrade": "websocket", "Origin": "http://3000--h1.preview.test"}, true},
		{"typed URL", map[string]string{"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}, true},
		{"link from anywhere", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}, true},
		{"same host, other port (frontend to backend)", map[string]string{"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "cors", "Origin": "http://5173--h1.preview.test"}, true},
		{"same host, other port socket", map[string]string{"Sec-Fetch-Site": "same-site", "Upgrade": "websocket", "Origin": "http://5173--h1.preview.test"}, true},
		{"other host's page, no-cors fetch", map[string]string{"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "no-cors", ":method": "POST", "Origin": "http://3000--evil.preview.test"}, false},
		{"other host's page, image", map[string]string{"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image"}, false},
		{"other host's page, socket", map[string]string{"Sec-Fetch-Site": "same-site", "Upgrade": "websocket", "Origin": "http://3000--evil.preview.test"}, false},
		{"other host's socket, old browser", map[string]string{"Upgrade": "websocket", "Origin": "http://3000--evil.preview.test"}, false},
		{"other host's form post", map[string]string{"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document", ":method": "POST", "Origin": "http://3000--evil.preview.test"}, false},
		{"other host's frame", map[string]string{"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "iframe"}, false},
	} {
		r := withHeaders("http://3000--h1.preview.test/", tc.hdr)
		if got := previewCookieUseAllowed(r, "h1", domain); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Preview tickets are minted for top-level navigations only: a page's
// background fetch must not turn the viewer's session into a cookie for
// another host's preview.
func TestTopNavigation(t *testing.T) {
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		want bool
	}{
		{"no metadata (curl)", nil, true},
		{"redirected navigation", map[string]string{"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}, true},
		{"background fetch", map[string]string{"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "empty"}, false},
		{"frame", map[string]string{"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "iframe"}, false},
	} {
		if got := topNavigation(withHeaders("http://gw.test/preview-login", tc.hdr)); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// eventWriteCloser records its writes and its close, in order with others
// sharing events.
type eventWriteCloser struct {
	events *[]string
	name   string
}

func (w *eventWriteCloser) Write(p []byte) (int, error) {
	*w.events = append(*w.events, w.name+": "+strings.TrimSpace(string(p)))
	return len(p), nil
}

func (w *eventWriteCloser) Close() error {
	*w.events = append(*w.events, w.name+" closed")
	return nil
}

// TestTokenListGroupsSessions: every web UI login adds a session token;
// `token list` shows them as a count per token, and with --sessions under
// their token, rather than as tokens of their own. Revoking the token
// says its sessions go too.
func TestTokenListGroupsSessions(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	out, err := cli(t, ctx, "token", "create", "--state-dir", dir, "--role", "admin", "--name", "ops")
	if err != nil {
		t.Fatal(err)
	}
	st, _, err := openAdminState(ctx, dir, true, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := st.LookupToken(ctx, lastLine(out))
	if err != nil {
		t.Fatal(err)
	}
	var sessions []store.Token
	for range 3 {
		_, s, err := st.CreateSession(ctx, tok.ID, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, s)
	}
	_ = st.Close()

	list, err := cli(t, ctx, "token", "list", "--state-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(list), "\n")
	if len(lines) != 2 || !strings.HasSuffix(lines[0], "SESSIONS") || strings.Fields(lines[1])[0] != tok.ID || !strings.HasSuffix(lines[1], " 3") {
		t.Fatalf("token list:\n%s\nwant the token alone, with 3 sessions", list)
	}
	list, err = cli(t, ctx, "token", "list", "--sessions", "--state-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	lines = strings.Split(strings.TrimSpace(list), "\n")
	if len(lines) != 5 || strings.Fields(lines[1])[0] != tok.ID {
		t.Fatalf("token list --sessions:\n%s", list)
	}
	// Sessions made in the same millisecond list in id order: compare
	// them as a set.
	listed := map[string]bool{}
	for _, l := range lines[2:] {
		id := strings.Fields(l)[0]
		if !strings.HasPrefix(l, "  "+id) || !strings.Contains(l, "ops/session-"+id) {
			t.Errorf("session line %q: want it indented under its token", l)
		}
		listed[id] = true
	}
	for _, s := range sessions {
		if !listed[s.ID] {
			t.Errorf("session %s not listed under its token:\n%s", s.ID, list)
		}
	}
	// A session's id revokes that session alone, and says so.
	out, err = cli(t, ctx, "token", "revoke", sessions[0].ID, "--state-dir", dir)
	if want := "login session " + sessions[0].ID + " of token " + tok.ID + " revoked"; err != nil || !strings.HasPrefix(out, want) {
		t.Fatalf("revoke of a session: %q %v, want %q", out, err, want)
	}
	out, err = cli(t, ctx, "token", "revoke", tok.ID, "--state-dir", dir)
	if err != nil || !strings.Contains(out, "with its 2 login session(s)") {
		t.Fatalf("revoke: %q %v", out, err)
	}
	if list, _ := cli(t, ctx, "token", "list", "--sessions", "--state-dir", dir); strings.Count(strings.TrimSpace(list), "\n") != 0 {
		t.Fatalf("after revoking the token:\n%s\nwant no token and no session", list)
	}
}

// TestStopSignals: `gateway proxy` ends cleanly on the SIGHUP OpenSSH sends
// its ProxyCommand, unless it was started ignoring SIGHUP (nohup), as this
// test may be; serve does not stop on one (nohup).
func TestStopSignals(t *testing.T) {
	has := func(sigs []os.Signal, s os.Signal) bool { return slices.Contains(sigs, s) }
	wantHUP := !signal.Ignored(syscall.SIGHUP)
	if p := stopSignals([]string{"proxy", "--url", "http://x", "h"}); has(p, syscall.SIGHUP) != wantHUP || !has(p, syscall.SIGTERM) {
		t.Errorf("proxy stops on %v, want SIGTERM among them, and SIGHUP unless this process ignores it (ignored: %v)", p, !wantHUP)
	}
	if d := stopSignals([]string{"dev"}); has(d, syscall.SIGHUP) != wantHUP || !has(d, syscall.SIGTERM) {
		t.Errorf("dev stops on %v, want SIGTERM, and SIGHUP (its terminal hung up) unless this process ignores it", d)
	}
	if s := stopSignals([]string{"serve"}); has(s, syscall.SIGHUP) || !has(s, syscall.SIGTERM) {
		t.Errorf("serve stops on %v, want SIGTERM and not SIGHUP", s)
	}
}

// Help is asked for and given (exit 0) at every level, shows positional
// arguments, and errors name the flag and what it wants.
func TestCLIHelpAndErrors(t *testing.T) {
	ctx := testCtx(t)
	runOut := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := run(ctx, stdio{in: strings.NewReader(""), out: &out, err: &errb}, args)
		return out.String() + errb.String(), err
	}
	for _, args := range [][]string{{"token", "-h"}, {"host", "--help"}, {"proxy", "-h"}, {"cert", "-h"}} {
		out, err := runOut(args...)
		if err != nil && !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%v: %v, want help (exit 0)", args, err)
		}
		if !strings.Contains(out, "usage") {
			t.Errorf("%v printed %q", args, out)
		}
	}
	if out, _ := runOut("proxy", "-h"); !strings.Contains(out, "HOST") || !strings.Contains(out, "HOSTGATE_TOKEN") {
		t.Errorf("proxy -h does not show HOST and its variables: %q", out)
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--state-dir", dir, "--preview-domain", "https://p.example.com"}, "--preview-domain"},
		{[]string{"token", "create", "--state-dir", dir, "--role", "client", "--host", "Bad Host/.."}, "letters, digits"},
	} {
		if _, err := runOut(tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error naming %q", tc.args, err, tc.want)
		}
	}
	// A busy --listen names the flag.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := runOut("serve", "--state-dir", t.TempDir(), "--docker", "off", "--listen", ln.Addr().String()); err == nil || !strings.Contains(err.Error(), "--listen "+ln.Addr().String()) {
		t.Errorf("serve on a busy port: %v", err)
	}
}

// TestHelpFlagNames keeps each flag's line in -h one flag and at most one
// placeholder word: flag.PrintDefaults takes a `quoted` word in a usage
// string as the flag's placeholder, and cert's --force, whose usage quoted
// `gateway host reset-key`, printed as "-force gateway host reset-key", as
// if it took three arguments.
func TestHelpFlagNames(t *testing.T) {
	ctx := testCtx(t)
	for _, args := range [][]string{
		{"serve"}, {"dev"}, {"cert"}, {"proxy"},
		{"token", "create"}, {"token", "list"}, {"token", "revoke"}, {"host", "reset-key"}, {"host", "remove"},
	} {
		var out bytes.Buffer
		err := run(ctx, stdio{in: strings.NewReader(""), out: &out, err: &out}, append(args, "-h"))
		if err != nil && !errors.Is(err, flag.ErrHelp) {
			t.Errorf("gateway %v -h: %v, want help (exit 0)", args, err)
		}
		flags := 0
		for line := range strings.SplitSeq(out.String(), "\n") {
			if !strings.HasPrefix(line, "  -") {
				continue
			}
			flags++
			if f := strings.Fields(line); len(f) > 2 {
				t.Errorf("gateway %v -h: %q: a flag with a placeholder of %d words (a `quoted` phrase in its usage?)", args, line, len(f)-1)
			}
		}
		if flags == 0 {
			t.Errorf("gateway %v -h listed no flags:\n%s", args, out.String())
		}
	}
}

// TestPrivateCANamesTheFix: cert and proxy against a gateway whose
// certificate comes from a CA the machine does not trust say how to trust
// it, where they said only "certificate signed by unknown authority" (a
// user of the README's private-CA deployment had nothing to go on). They
// say it once: gateway cert said it twice, the client's hint and its own
// (found by the audit42a README audit, behind nginx with a self-signed
// certificate).
func TestPrivateCANamesTheFix(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes this test fails
	srv.StartTLS()
	defer srv.Close()
	ctx := testCtx(t)
	key := filepath.Join(t.TempDir(), "id")
	for _, args := range [][]string{
		{"cert", "--url", srv.URL, "--token", "hg_x", "--key", key, "build-01"},
		{"proxy", "--url", srv.URL, "--token", "hg_x", "build-01"},
	} {
		var out bytes.Buffer
		err := run(ctx, stdio{in: strings.NewReader(""), out: io.Discard, err: &out}, args)
		if err == nil {
			t.Fatalf("gateway %s: no error from a gateway of an untrusted CA", args[0])
		}
		if msg := err.Error() + out.String(); !strings.Contains(msg, "SSL_CERT_FILE") {
			t.Errorf("gateway %s: %q does not name SSL_CERT_FILE", args[0], msg)
		}
		if n := strings.Count(err.Error(), "SSL_CERT_FILE"); n > 1 {
			t.Errorf("gateway %s: %q names SSL_CERT_FILE %d times", args[0], err, n)
		}
	}
}

// TestTerminalKeepFlag: --terminal-keep reaches the web terminals, 5m
// unless set, 0 for off (webterm's negative), and a negative one is
// refused naming the flag.
func TestTerminalKeepFlag(t *testing.T) {
	sio := stdio{out: io.Discard, err: io.Discard}
	t.Setenv("HOSTGATE_TERMINAL_KEEP", "")
	_ = os.Unsetenv("HOSTGATE_TERMINAL_KEEP")
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{nil, webterm.DefaultKeep},
		{[]string{"--terminal-keep", "1h"}, time.Hour},
		{[]string{"--terminal-keep", "0"}, -1},
	} {
		c, err := parseServeFlags("serve", sio, tc.args, serveConfig{CertTTL: time.Hour})
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if got := c.terminalKeep(); got != tc.want {
			t.Errorf("%v: keep %v, want %v", tc.args, got, tc.want)
		}
	}
	if _, err := parseServeFlags("serve", sio, []string{"--terminal-keep", "-1s"}, serveConfig{}); err == nil || !strings.Contains(err.Error(), "terminal-keep") {
		t.Errorf("--terminal-keep -1s: %v, want an error naming the flag", err)
	}
}

// TestListenFlagWantsAPort: --listen without a port is refused at once,
// saying what it takes, where net.Listen's "missing port in address" came
// after the Docker engine's start-up lines (found by the audit30 audit).
func TestListenFlagWantsAPort(t *testing.T) {
	for _, in := range []string{"21404", "localhost", "127.0.0.1:"} {
		_, err := parseServeFlags("serve", stdio{out: io.Discard, err: io.Discard}, []string{"--listen", in}, serveConfig{})
		if err == nil || !strings.Contains(err.Error(), "want HOST:PORT, such as 127.0.0.1:8080") {
			t.Errorf("--listen %q: %v", in, err)
		}
	}
	for _, in := range []string{"127.0.0.1:8080", ":8080", "[::1]:0"} {
		if _, err := parseServeFlags("serve", stdio{out: io.Discard, err: io.Discard}, []string{"--listen", in}, serveConfig{}); err != nil {
			t.Errorf("--listen %q: %v", in, err)
		}
	}
}

// The state dir's files that hold secrets are the gateway user's alone:
// gateway.db was created 0644 (SQLite's default, less the umask) inside
// the 0700 dir, and an older gateway's stays so until a command opens it,
// which makes it 0600 and says so.
func TestStateFilesPrivate(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "state")
	create := func() string {
		var out, errb bytes.Buffer
		if err := run(ctx, stdio{in: strings.NewReader(""), out: &out, err: &errb}, []string{"token", "create", "--role", "admin", "--state-dir", dir}); err != nil {
			t.Fatalf("token create: %v\n%s", err, errb.String())
		}
		return errb.String()
	}
	create()
	for _, f := range []string{dbFile, caKeyFile} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want 0600", f, st.Mode().Perm(), err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, dbFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if msg := create(); !strings.Contains(msg, "warning: "+filepath.Join(dir, dbFile)+" was open to group or others (0644); made it 0600") {
		t.Errorf("token create on a 0644 database said %q, want a warning naming it", msg)
	}
	if st, err := os.Stat(filepath.Join(dir, dbFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("%s after token create: %v %v, want 0600", dbFile, st.Mode().Perm(), err)
	}
}

// TestNewCAWarnsOfEnrolledAgents: a state dir restored without its ca_key
// (or with it deleted) got a new CA in silence, from `gateway serve` or an
// admin command, and every agent that had enrolled refused the gateway
// (found by the audit32 audit). Both now say so, with the count and the
// fix; a new state dir, whose CA no agent pinned yet, says nothing.
func TestNewCAWarnsOfEnrolledAgents(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	tokenCreate := func() string {
		t.Helper()
		var out, errb bytes.Buffer
		if err := run(ctx, stdio{in: strings.NewReader(""), out: &out, err: &errb}, []string{"token", "create", "--state-dir", dir, "--role", "admin"}); err != nil {
			t.Fatal(err)
		}
		return errb.String()
	}
	if e := tokenCreate(); strings.Contains(e, "SSH CA") {
		t.Errorf("a new state dir warned of a new CA: %s", e)
	}
	st, _, err := openState(ctx, dir, func(store.TightenedFile) {})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Enroll(ctx, store.Enrollment{HostID: "build-01", Kind: "machine", HostKey: authorizedHostKey(t)}); err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	if e := tokenCreate(); strings.Contains(e, "SSH CA") {
		t.Errorf("a state dir with its CA key warned of a new CA: %s", e)
	}

	caFile := filepath.Join(dir, caKeyFile)
	if err := os.Remove(caFile); err != nil {
		t.Fatal(err)
	}
	if e := tokenCreate(); !strings.Contains(e, "had no SSH CA key") || !strings.Contains(e, "its 1 enrolled hosts") || !strings.Contains(e, "gateway_ca.pub") {
		t.Errorf("token create made a new CA for an enrolled agent without saying so: %q", e)
	}

	if err := os.Remove(caFile); err != nil {
		t.Fatal(err)
	}
	var logs testenv.LogBuffer
	if err := serveLogged(t, dir, &logs)(); err != nil {
		t.Fatal(err)
	}
	// The README's words for both warnings: an operator greps the log for them.
	if l := logs.String(); !strings.Contains(l, "had no SSH CA key, so a new CA was made") || !strings.Contains(l, "hosts=1") || !strings.Contains(l, caFile) {
		t.Errorf("serve made a new CA for an enrolled agent without logging it:\n%s", l)
	}
}

// TestTokenRevokeByNameSaysTheID: `gateway token revoke carol` for a token
// created with --name carol answered only `no token with id "carol"`
// (found by the audit32 audit). It now names the id, and revokes nothing.
func TestTokenRevokeByNameSaysTheID(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	cli := func(args ...string) (string, error) {
		t.Helper()
		var out, errb bytes.Buffer
		err := run(ctx, stdio{in: strings.NewReader(""), out: &out, err: &errb}, append(args, "--state-dir", dir))
		return out.String(), err
	}
	out, err := cli("token", "create", "--role", "client", "--host", "build-01", "--name", "carol")
	if err != nil {
		t.Fatal(err)
	}
	id := regexp.MustCompile(`\(id ([0-9a-f]+)\)`).FindStringSubmatch(out)
	if id == nil {
		t.Fatalf("no id in %q", out)
	}
	if _, err := cli("token", "revoke", "carol"); err == nil || !strings.Contains(err.Error(), "has id "+id[1]) {
		t.Errorf("revoke by name: %v, want the id %s named", err, id[1])
	}
	if _, err := cli("token", "revoke", "nosuch"); err == nil || !strings.Contains(err.Error(), "gateway token list") {
		t.Errorf("revoke of an unknown id: %v, want a pointer to token list", err)
	}
	if out, err := cli("token", "list"); err != nil || !strings.Contains(out, id[1]) {
		t.Errorf("the token went with a revoke by name: %v\n%s", err, out)
	}
}

// "stopped" is logged once the hooks' cleanups ran (Docker executions'
// tunnels, the tools volume's holder), so that it means the process is
// about to exit: they took 1.1–1.3 s after it, logging nothing (found by
// the operator34 audit).
func TestStoppedComesAfterCleanups(t *testing.T) {
	var logs testenv.LogBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	saved := serveHooks
	t.Cleanup(func() { serveHooks = saved })
	serveHooks = append(slices.Clip(saved), func(context.Context, *serving) (func(), error) {
		return func() { logger.Info("test hook cleaned up") }, nil
	})
	stop := serveLogged(t, t.TempDir(), &logs)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if c, s := strings.Index(out, "test hook cleaned up"), strings.Index(out, "msg=stopped"); c < 0 || s < 0 || s < c {
		t.Fatalf("want the hook's cleanup before \"stopped\":\n%s", out)
	}
}

// TestListenFlagEmptyRefused: an empty --listen or HOSTGATE_LISTEN (an
// unset variable in a unit or compose file) is refused, where net.Listen
// took it for ":0" and the gateway served on every address at a random
// port.
func TestListenFlagEmptyRefused(t *testing.T) {
	sio := stdio{out: io.Discard, err: io.Discard}
	def := serveConfig{Listen: "127.0.0.1:8080"}
	if _, err := parseServeFlags("serve", sio, []string{"--listen", ""}, def); err == nil || !strings.Contains(err.Error(), "--listen (HOSTGATE_LISTEN) is empty") {
		t.Errorf("--listen \"\": %v, want it refused", err)
	}
	t.Setenv("HOSTGATE_LISTEN", "")
	if _, err := parseServeFlags("dev", sio, nil, def); err == nil || !strings.Contains(err.Error(), "--listen (HOSTGATE_LISTEN) is empty") {
		t.Errorf("HOSTGATE_LISTEN=: %v, want it refused", err)
	}
	if c, err := parseServeFlags("serve", sio, []string{"--listen", ":8080"}, def); err != nil || c.Listen != ":8080" {
		t.Errorf("--listen :8080 over HOSTGATE_LISTEN=: %v %v", c, err)
	}
}

// An empty --state-dir (an unset variable in a unit file) is refused by
// every command that takes one, naming the flag and its variable: dev kept
// its state in the directory it was started from, and serve and token
// failed with "mkdir : no such file or directory".
func TestStateDirEmptyRefused(t *testing.T) {
	t.Chdir(t.TempDir())
	var errb bytes.Buffer
	sio := stdio{out: io.Discard, err: &errb}
	const want = "--state-dir (HOSTGATE_STATE_DIR) is empty"
	if _, err := parseServeFlags("serve", sio, []string{"--state-dir", ""}, serveConfig{Listen: "127.0.0.1:8080", StateDir: "/var/lib/hostgate"}); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("serve --state-dir \"\": %v, want it refused", err)
	}
	t.Setenv("HOSTGATE_STATE_DIR", "")
	for _, args := range [][]string{{"dev", "--listen", "127.0.0.1:0"}, {"token", "create", "--role", "admin"}, {"token", "list"}, {"token", "revoke", "x"}} {
		// Bounded: a dev that is not refused serves until ctx ends.
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		err := run(ctx, sio, args)
		cancel()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q with HOSTGATE_STATE_DIR=: %v, want it refused", args, err)
		}
	}
	if ents, _ := os.ReadDir("."); len(ents) != 0 {
		t.Errorf("the working directory holds %d entries, want none", len(ents))
	}
}

// The commands that only read or remove what a state dir holds (token
// list and revoke, host reset-key and remove) refuse one with no gateway
// state, naming the flag, and leave it unmade: a mistyped --state-dir
// made a new state dir with a new CA key, and token list answered it with
// an empty list and exit 0, as if every token were gone; run in the
// state dir's place midway through the README's restore (after its mv),
// it made the directory that cp -a then copied the backup into, and the
// gateway started on that new state, with no tokens or hosts and a CA
// every agent refuses.
func TestAdminCommandsNeedState(t *testing.T) {
	ctx := testCtx(t)
	for _, args := range [][]string{
		{"token", "list"},
		{"token", "revoke", "abc"},
		{"host", "reset-key", "h1"},
		{"host", "remove", "h1"},
	} {
		dir := filepath.Join(t.TempDir(), "state")
		_, err := cli(t, ctx, append(args, "--state-dir", dir)...)
		if err == nil || !strings.Contains(err.Error(), "no gateway state in "+dir) || !strings.Contains(err.Error(), "--state-dir") {
			t.Errorf("%v on no state: %v; want a refusal naming --state-dir", args, err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%v on no state made %s: %v", args, dir, err)
		}
	}
}

// A flag the command does not take, or a flag's bad value, is a usage
// error as a missing argument is: exit 2, where it exited 1 as a failed
// backup or revoke does, so a script could not tell its own mistake from
// the gateway's. Its message is still said, with what the flag wants.
func TestFlagErrorIsUsage(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"backup", "--bogus", "--out", filepath.Join(dir, "b")}, "flag provided but not defined: -bogus"},
		{[]string{"audit", "--limit", "x"}, "--limit wants a whole number"},
		{[]string{"token", "list", "--ttl", "1h"}, "flag provided but not defined: -ttl"},
		{[]string{"host", "reset-key", "h1", "--role", "admin"}, "flag provided but not defined: -role"},
	} {
		err := run(ctx, stdio{in: strings.NewReader(""), out: io.Discard, err: io.Discard}, append(tc.args, "--state-dir", dir))
		code, said := exitCode(err)
		if code != 2 || !strings.Contains(said, tc.want) {
			t.Errorf("%v: exit %d saying %q (%v), want 2 saying %q", tc.args, code, said, err, tc.want)
		}
	}
	if code, said := exitCode(errors.New("store: disk full")); code != 1 || said != "gateway: store: disk full" {
		t.Errorf("a failure: exit %d saying %q, want 1", code, said)
	}
	if code, said := exitCode(errUsage); code != 2 || said != "" {
		t.Errorf("a usage printed: exit %d saying %q, want 2 and nothing more", code, said)
	}
}

// Each row of token list has a word in every column, so that a script
// splitting rows on blanks (awk '{print $4}') finds each column where the
// header puts it: an admin token's hosts and a login session's count were
// left blank, which shifted every later column of that row one to the
// left (an admin token's CREATED read as its HOSTS).
func TestTokenListColumnsFilled(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	out, err := cli(t, ctx, "token", "create", "--state-dir", dir, "--role", "admin", "--name", "ops")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli(t, ctx, "token", "create", "--state-dir", dir, "--role", "client", "--name", "ci", "--host", "h1"); err != nil {
		t.Fatal(err)
	}
	st, _, err := openAdminState(ctx, dir, false, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := st.LookupToken(ctx, lastLine(out))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.CreateSession(ctx, tok.ID, time.Hour); err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	list, err := cli(t, ctx, "token", "list", "--sessions", "--state-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(list), "\n")
	header := strings.Fields(lines[0])
	for _, l := range lines[1:] {
		if f := strings.Fields(l); len(f) != len(header) {
			t.Errorf("row %q has %d words, want one for each of %q", l, len(f), header)
		}
	}
	if len(lines) != 4 {
		t.Errorf("token list --sessions:\n%s\nwant the header, two tokens and a session", list)
	}
}

// A positional argument missing or too many is a usage error wherever
// the command says so itself: exit 2, as token revoke's missing id and
// backup's extra argument exited, where host, token create, serve and
// version exited 1, a failure's status.
func TestArgumentErrorIsUsage(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"host", "reset-key"}, "want exactly one host id"},
		{[]string{"host", "remove", "a", "b"}, "want exactly one host id"},
		{[]string{"token", "create", "--role", "admin", "extra"}, `unexpected arguments ["extra"]`},
		{[]string{"version", "extra"}, `unexpected arguments ["extra"]`},
		{[]string{"serve", "extra"}, `unexpected arguments ["extra"]`},
	} {
		err := run(ctx, stdio{in: strings.NewReader(""), out: io.Discard, err: io.Discard}, append(tc.args, "--state-dir", dir))
		if tc.args[0] == "version" {
			err = run(ctx, stdio{in: strings.NewReader(""), out: io.Discard, err: io.Discard}, tc.args)
		}
		code, said := exitCode(err)
		if code != 2 || !strings.Contains(said, tc.want) {
			t.Errorf("%v: exit %d saying %q, want 2 saying %q", tc.args, code, said, tc.want)
		}
	}
}
