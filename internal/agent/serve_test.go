package agent

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/testenv"
	"github.com/hostgate/hostgate/sshlayer"
)

const serveWait = 30 * time.Second

func serveKey(t testing.TB) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// serveTCPPair returns both ends of a loopback TCP connection (not a
// net.Pipe: SSH has both sides write first).
func serveTCPPair(t testing.TB) (net.Conn, net.Conn) { return testenv.TCPPair(t) }

// serveNewServer builds an agent server in a fresh state dir accepting
// the returned client key; edit, when set, adjusts its config.
func serveNewServer(t testing.TB, edit ...func(*ServeConfig)) (*sshlayer.Server, ssh.PublicKey, ssh.Signer) {
	t.Helper()
	client := serveKey(t)
	dir := t.TempDir()
	cfg := &ServeConfig{StateDir: dir, AuthorizedKeys: []ssh.PublicKey{client.PublicKey()}}
	for _, e := range edit {
		e(cfg)
	}
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	hk, err := sshlayer.LoadOrCreateHostKey(filepath.Join(dir, HostKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	return srv, hk.PublicKey(), client
}

// serveSSHClient runs an SSH client over conn, closed when the test ends.
func serveSSHClient(t testing.TB, conn net.Conn, hostKey ssh.PublicKey, client ssh.Signer) *ssh.Client {
	t.Helper()
	c, chans, reqs, err := ssh.NewClientConn(conn, "agent", &ssh.ClientConfig{
		User: "x", Auth: []ssh.AuthMethod{ssh.PublicKeys(client)},
		HostKeyCallback: ssh.FixedHostKey(hostKey), Timeout: serveWait,
	})
	if err != nil {
		t.Fatal(err)
	}
	cl := ssh.NewClient(c, chans, reqs)
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

func serveSSHExec(t testing.TB, conn net.Conn, hostKey ssh.PublicKey, client ssh.Signer, cmd string) string {
	t.Helper()
	cl := serveSSHClient(t, conn, hostKey, client)
	defer func() { _ = cl.Close() }()
	s, err := cl.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	out, err := s.Output(cmd)
	if err != nil {
		t.Fatalf("%q: %v", cmd, err)
	}
	return string(out)
}

func TestServeMuxOneSSHConnectionPerStream(t *testing.T) {
	srv, hostKey, client := serveNewServer(t)
	a, b := serveTCPPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), serveWait)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- ServeMux(ctx, b, srv, nil) }()
	sess, err := bytestream.MuxClient(a, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := sess.OpenStream()
			if err != nil {
				t.Error(err)
				return
			}
			if out := serveSSHExec(t, st, hostKey, client, fmt.Sprintf("echo stream-%d", i)); out != fmt.Sprintf("stream-%d\n", i) {
				t.Errorf("stream %d: %q", i, out)
			}
		}()
	}
	wg.Wait()
	// The peer ending the tunnel ends ServeMux without an error.
	_ = sess.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeMux after the peer left: %v", err)
		}
	case <-time.After(serveWait):
		t.Fatal("ServeMux did not return after the peer closed")
	}
}

func TestServeMuxStopsOnCancel(t *testing.T) {
	srv, _, _ := serveNewServer(t)
	a, b := serveTCPPair(t)
	defer func() { _ = a.Close() }()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeMux(ctx, b, srv, nil) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeMux after cancel: %v", err)
		}
	case <-time.After(serveWait):
		t.Fatal("ServeMux ignored ctx")
	}
}

// TestServeMuxSilentGatewaySaysSo: a tunnel whose gateway stops answering
// (its path stalled with the sockets open: a NAT that lost its state)
// ends with an error that says so, which the agent logs as the tunnel's
// end. It read "agent: mux: bytestream: mux keepalive timed out".
func TestServeMuxSilentGatewaySaysSo(t *testing.T) {
	srv, _, _ := serveNewServer(t)
	a, b := serveTCPPair(t)
	defer func() { _ = a.Close() }() // a peer that reads and answers nothing
	ctx, cancel := context.WithTimeout(context.Background(), serveWait)
	defer cancel()
	err := ServeMux(ctx, b, srv, &bytestream.MuxConfig{KeepAliveInterval: 20 * time.Millisecond, WriteTimeout: 200 * time.Millisecond})
	if !errors.Is(err, bytestream.ErrKeepAliveTimeout) || !strings.Contains(err.Error(), "the gateway stopped answering") {
		t.Fatalf("ServeMux with a silent gateway: %v, want ErrKeepAliveTimeout saying the gateway stopped answering", err)
	}
}

// serveOverPipes runs ServeStdio for srv over two pipes, as a
// ProxyCommand's stdin and stdout would be, and returns the client's end
// and ServeStdio's result.
func serveOverPipes(t testing.TB, srv *sshlayer.Server) (net.Conn, <-chan error) {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ServeStdio(context.Background(), bytestream.NewPipeConn(inR, outW), srv) }()
	return bytestream.NewPipeConn(outR, inW), done
}

func TestServeStdio(t *testing.T) {
	srv, hostKey, client := serveNewServer(t)
	clientSide, done := serveOverPipes(t, srv)
	if out := serveSSHExec(t, clientSide, hostKey, client, "echo over-stdio"); out != "over-stdio\n" {
		t.Fatalf("got %q", out)
	}
	_ = clientSide.Close()
	if err := <-done; err != nil {
		t.Fatalf("ServeStdio: %v", err)
	}
}

// --shell picks the shell commands run under (sshd would take the login
// shell; the agent's default is /bin/sh).
func TestServeShell(t *testing.T) {
	dir := t.TempDir()
	shell := filepath.Join(dir, "myshell")
	if err := os.WriteFile(shell, []byte("#!/bin/sh\necho \"myshell $*\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	srv, hostKey, client := serveNewServer(t, func(c *ServeConfig) { c.Shell = shell })
	clientSide, done := serveOverPipes(t, srv)
	if out := serveSSHExec(t, clientSide, hostKey, client, "echo hi | cat"); out != "myshell -c echo hi | cat\n" {
		t.Fatalf("through --shell: %q", out)
	}
	_ = clientSide.Close()
	if err := <-done; err != nil {
		t.Fatalf("ServeStdio: %v", err)
	}
	for _, bad := range []string{"sh", filepath.Join(dir, "missing"), dir} {
		if err := CheckShell(bad); err == nil {
			t.Errorf("CheckShell(%q) accepted", bad)
		}
	}
}

func TestParseKeys(t *testing.T) {
	k1, k2 := serveKey(t).PublicKey(), serveKey(t).PublicKey()
	good := fmt.Sprintf("# comment\n\n%s  # trailing\n%s", bytes.TrimSpace(ssh.MarshalAuthorizedKey(k1)), ssh.MarshalAuthorizedKey(k2))
	keys, err := ParseKeys([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || !bytes.Equal(keys[0].Marshal(), k1.Marshal()) || !bytes.Equal(keys[1].Marshal(), k2.Marshal()) {
		t.Fatalf("parsed %d keys, want the 2 given in order", len(keys))
	}
	if _, err := ParseKeys([]byte(good + "\nssh-ed25519 AAAAnot-base64\n")); err == nil || !strings.Contains(err.Error(), "line 6") {
		t.Fatalf("bad line: %v, want an error naming line 6", err)
	}
	// Options would restrict the key (or make it a CA); the server cannot
	// honour them, so the file is refused rather than the key let in
	// unrestricted.
	for _, opts := range []string{"restrict,pty", `command="true"`, `from="10.0.0.1"`, "no-pty", "cert-authority"} {
		_, err := ParseKeys([]byte(good + opts + " " + string(ssh.MarshalAuthorizedKey(k1))))
		if err == nil || !strings.Contains(err.Error(), "line 5") || !strings.Contains(err.Error(), "options") {
			t.Errorf("key with options %s: %v, want an error naming line 5", opts, err)
		}
	}
	if keys, err := ParseKeys(nil); err != nil || len(keys) != 0 {
		t.Fatalf("empty: %v %v", keys, err)
	}
}

func FuzzParseKeys(f *testing.F) {
	f.Add([]byte("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGvL9Dd3n6H6Wv5n0u8E6JeYtB9mOb7M0f1GfW0i2c3S c\n# x\n"))
	f.Add([]byte("command=\"x\",no-pty ssh-rsa AAAA\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		keys, err := ParseKeys(b)
		if err != nil {
			return
		}
		// Every key parsed is one a server could compare: it re-marshals.
		for _, k := range keys {
			if _, err := ssh.ParsePublicKey(k.Marshal()); err != nil {
				t.Fatalf("key does not round-trip: %v", err)
			}
		}
	})
}

func TestRunServeRefusesBadFlags(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	if err := os.WriteFile(keys, ssh.MarshalAuthorizedKey(serveKey(t).PublicKey()), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("# nothing\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), serveWait)
	defer cancel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--authorized-keys", keys}, "exactly one of --listen"},
		{[]string{"--listen", "127.0.0.1:0", "--stdio", "--authorized-keys", keys}, "exactly one of --listen"},
		{[]string{"--listen", "127.0.0.1:0", "--mux", "--authorized-keys", keys}, "--mux needs --stdio"},
		{[]string{"--listen", "127.0.0.1:0"}, "no keys"},
		{[]string{"--listen", "127.0.0.1:0", "--authorized-keys", empty}, "no keys"},
		{[]string{"--listen", "127.0.0.1:0", "--authorized-keys", filepath.Join(dir, "missing")}, "no such file"},
		{[]string{"--listen", "127.0.0.1:0", "--trusted-ca-key", "not a key"}, "--trusted-ca-key"},
		{[]string{"--listen", "127.0.0.1:0", "--trusted-ca-key", "principals=\"x\" " + string(ssh.MarshalAuthorizedKey(serveKey(t).PublicKey()))}, "options are not supported"},
		{[]string{"--listen", "127.0.0.1:0", "--trusted-ca-key", " "}, "--trusted-ca-key"},
		{[]string{"--listen", "127.0.0.1:0", "--authorized-keys", keys, "--log-format", "xml"}, "--log-format"},
		{[]string{"--listen", "127.0.0.1:0", "--authorized-keys", keys, "extra"}, "unexpected arguments"},
	} {
		var stderr bytes.Buffer
		err := RunServe(ctx, append(tc.args, "--state-dir", filepath.Join(dir, "state")), &ServeIO{Stderr: &stderr})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

// TestRunServeListenFromEnv: flags come from HOSTGATE_* when not given,
// the command line wins over the environment, and cancelling stops the
// server.
func TestRunServeListenFromEnv(t *testing.T) {
	dir := t.TempDir()
	client := serveKey(t)
	keys := filepath.Join(dir, "keys")
	if err := os.WriteFile(keys, ssh.MarshalAuthorizedKey(client.PublicKey()), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOSTGATE_AUTHORIZED_KEYS", keys)
	t.Setenv("HOSTGATE_STATE_DIR", filepath.Join(dir, "state"))
	t.Setenv("HOSTGATE_LISTEN", "256.0.0.1:bad") // overridden by --listen below
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &serveLogBuffer{ready: make(chan string, 1)}
	done := make(chan error, 1)
	go func() { done <- RunServe(ctx, []string{"--listen", "127.0.0.1:0"}, &ServeIO{Stderr: stderr}) }()
	var addr string
	select {
	case addr = <-stderr.ready:
	case err := <-done:
		t.Fatalf("RunServe: %v; log %s", err, stderr.String())
	case <-time.After(serveWait):
		t.Fatal("no listen address logged")
	}
	hk, err := sshlayer.LoadOrCreateHostKey(filepath.Join(dir, "state", HostKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if out := serveSSHExec(t, conn, hk.PublicKey(), client, "echo env-ok"); out != "env-ok\n" {
		t.Fatalf("got %q", out)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("RunServe after cancel: %v", err)
	}
}

// serveLogBuffer collects logs and reports the listen address once.
type serveLogBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	ready chan string
	sent  bool
}

func (l *serveLogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
	if !l.sent {
		if _, after, ok := strings.Cut(l.b.String(), "listen="); ok {
			if addr, _, ok := strings.Cut(after, "\n"); ok {
				l.sent = true
				l.ready <- addr
			}
		}
	}
	return len(p), nil
}

func (l *serveLogBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

func TestEnvFlags(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	a := fs.String("state-dir", "default", "")
	b := fs.String("host-id", "default", "")
	n := fs.Int("count", 1, "")
	t.Setenv("HOSTGATE_STATE_DIR", "from-env")
	t.Setenv("HOSTGATE_HOST_ID", "from-env")
	t.Setenv("HOSTGATE_COUNT", "7")
	if err := fs.Parse([]string{"--host-id", "from-flag"}); err != nil {
		t.Fatal(err)
	}
	if err := EnvFlags(fs); err != nil {
		t.Fatal(err)
	}
	if *a != "from-env" || *b != "from-flag" || *n != 7 {
		t.Fatalf("state-dir %q host-id %q count %d", *a, *b, *n)
	}
	t.Setenv("HOSTGATE_COUNT", "seven")
	fs2 := flag.NewFlagSet("y", flag.ContinueOnError)
	fs2.Int("count", 1, "")
	_ = fs2.Parse(nil)
	if err := EnvFlags(fs2); err == nil || !strings.Contains(err.Error(), "HOSTGATE_COUNT") {
		t.Fatalf("bad env value: %v", err)
	}
}

// An agent that makes a new host key says so, with where and its
// fingerprint: after a rotation or a lost state dir, that line is what an
// operator looks for (found by the operator34 audit). Loading the key it
// made says nothing.
func TestNewHostKeyIsLogged(t *testing.T) {
	dir := t.TempDir()
	user := mustLoadHostKey(t, filepath.Join(t.TempDir(), "user_key")).PublicKey()
	for i, want := range []bool{true, false} {
		var logs testenv.LogBuffer
		if _, err := NewServer(&ServeConfig{StateDir: dir, AuthorizedKeys: []ssh.PublicKey{user}, Logger: slog.New(slog.NewTextHandler(&logs, nil))}); err != nil {
			t.Fatal(err)
		}
		fp := ssh.FingerprintSHA256(mustLoadHostKey(t, filepath.Join(dir, HostKeyFile)).PublicKey())
		if got := strings.Contains(logs.String(), "made a new host key") && strings.Contains(logs.String(), fp); got != want {
			t.Errorf("start %d: logged a new key %v, want %v:\n%s", i, got, want, logs.String())
		}
	}
}

func mustLoadHostKey(t *testing.T, path string) ssh.Signer {
	t.Helper()
	s, err := sshlayer.LoadOrCreateHostKey(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRunServeFlagErrorsNameTheFlag: a file of keys that cannot be read
// or parsed, a --listen address that cannot be bound and a --log-level
// not known say which flag is at fault and what it takes, where they said
// "agent serve: agent: keys: open …", "listen tcp …: address already in
// use" and "slog: level string …: unknown name".
func TestRunServeFlagErrorsNameTheFlag(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	if err := os.WriteFile(keys, ssh.MarshalAuthorizedKey(serveKey(t).PublicKey()), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("ssh-ed25519 notbase64\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	missing := filepath.Join(dir, "missing")
	ctx, cancel := context.WithTimeout(context.Background(), serveWait)
	defer cancel()
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--listen", "127.0.0.1:0", "--authorized-keys", missing}, []string{"--authorized-keys", missing, "no such file"}},
		{[]string{"--listen", "127.0.0.1:0", "--authorized-keys", bad}, []string{"--authorized-keys", bad, "line 1"}},
		{[]string{"--listen", "127.0.0.1:0", "--trusted-ca", missing}, []string{"--trusted-ca:", missing, "no such file"}},
		{[]string{"--listen", taken.Addr().String(), "--authorized-keys", keys}, []string{"--listen", "address already in use"}},
		{[]string{"--listen", "127.0.0.1:0", "--authorized-keys", keys, "--log-level", "verbose"}, []string{"--log-level", "debug, info, warn or error"}},
	} {
		var stderr bytes.Buffer
		err := RunServe(ctx, append(tc.args, "--state-dir", filepath.Join(dir, "state")), &ServeIO{Stderr: &stderr})
		if err == nil {
			t.Errorf("%q accepted", tc.args)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: %v, want it to say %q", tc.args, err, w)
			}
		}
		if strings.Count(err.Error(), "agent") > 1 {
			t.Errorf("%q: %v names the agent twice", tc.args, err)
		}
	}
}
