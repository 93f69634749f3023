// Package e2e runs the real binaries (gateway, agent) against real peers:
// OpenSSH's ssh, sftp and scp, a Docker engine, Chromium. A test whose peer
// is missing skips on a laptop and fails when HOSTGATE_E2E=require.
package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hostgate/hostgate/client"
)

// bin holds the binaries built once for the package.
var bin struct {
	dir     string
	gateway string
	agent   string
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hostgate-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin.dir = dir
	bin.gateway = filepath.Join(dir, "gateway")
	bin.agent = filepath.Join(dir, "agent")
	// A static agent: it is copied into containers that have no libc.
	for _, b := range []struct{ out, pkg string }{{bin.gateway, "./cmd/gateway"}, {bin.agent, "./cmd/agent"}} {
		cmd := exec.Command("go", "build", "-o", b.out, b.pkg)
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", b.pkg, err, out)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	// Tests run agents and clients in this process too (the load test):
	// every goroutine they start must be gone. Idle keep-alive
	// connections of the shared HTTP transport are not a leak.
	if code == 0 {
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// proc is a child process whose stderr is kept for failure reports.
type proc struct {
	t    testing.TB
	name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	log  bytes.Buffer
	done chan struct{}
	err  error
}

// start runs a binary with args; it is stopped (SIGTERM, then SIGKILL) at
// cleanup, and its stderr is printed when the test failed.
func start(t testing.TB, name, path string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, done: make(chan struct{})}
	p.cmd = exec.Command(path, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout = &lockedWriter{p: p}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		_, _ = io.Copy(&lockedWriter{p: p}, stderr)
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("--- %s output ---\n%s", name, p.output())
		}
	})
	return p
}

type lockedWriter struct{ p *proc }

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.p.log.Write(b)
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// stop ends the process gracefully and waits; after 10 s it kills the group.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// kill ends the process with SIGKILL, like a crash.
func (p *proc) kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// waitFor waits until output matches re, or fails after d.
func (p *proc) waitFor(re *regexp.Regexp, d time.Duration) []string {
	p.t.Helper()
	return p.waitForIn(p.t, re, d)
}

// waitForIn is waitFor failing t: a parallel subtest of the test that
// started p must fail itself, as only a test's own goroutine may end it.
func (p *proc) waitForIn(t testing.TB, re *regexp.Regexp, d time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if m := re.FindStringSubmatch(p.output()); m != nil {
			return m
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited (%v) before printing %v:\n%s", p.name, p.err, re, p.output())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not print %v within %v:\n%s", p.name, re, d, p.output())
		}
	}
}

// gw is a running gateway.
type gw struct {
	*proc
	t        testing.TB
	stateDir string
	url      string
	admin    string
	roots    *x509.CertPool // trust the certificate of a gateway serving TLS itself; nil: the system's
}

// clientOptions is the client.Options that reach g (nil for the default).
func (g *gw) clientOptions() *client.Options {
	if g.roots == nil {
		return nil
	}
	return &client.Options{RootCAs: g.roots}
}

var servingRE = regexp.MustCompile(`msg="gateway serving" addr=(\S+)`)

// startGateway runs `gateway serve` on a loopback port chosen by the kernel
// with its state in stateDir (a new one when empty).
func startGateway(t testing.TB, stateDir string, extra ...string) *gw {
	t.Helper()
	if stateDir == "" {
		stateDir = t.TempDir()
	}
	g := &gw{t: t, stateDir: stateDir}
	g.restart(extra...)
	g.admin = g.token("admin", "")
	return g
}

// restart starts the gateway process again on a new port (the old one must
// be stopped).
func (g *gw) restart(extra ...string) {
	g.t.Helper()
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--state-dir", g.stateDir, "--docker", "off"}, extra...)
	g.proc = start(g.t, "gateway", bin.gateway, nil, args...)
	m := g.waitFor(servingRE, 30*time.Second)
	scheme := "http://"
	if slices.Contains(args, "--tls-cert") {
		scheme = "https://"
	}
	g.url = scheme + m[1]
}

// token runs `gateway token create` and returns the token (its last line).
func (g *gw) token(role, host string) string {
	g.t.Helper()
	args := []string{"token", "create", "--role", role, "--state-dir", g.stateDir}
	if host != "" {
		args = append(args, "--host", host)
	}
	out, err := exec.Command(bin.gateway, args...).Output()
	if err != nil {
		g.t.Fatalf("gateway %v: %v", args, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// startAgent runs `agent connect` for host id with a fresh agent token and
// its own state dir (a new one when empty), and waits until the gateway
// shows the host connected.
func (g *gw) startAgent(id, stateDir string) *proc {
	g.t.Helper()
	return g.startAgentAt(g.url, id, stateDir)
}

// startAgentAt is startAgent with the gateway named by url, which may be
// any form `agent connect --gateway` takes.
func (g *gw) startAgentAt(url, id, stateDir string) *proc {
	g.t.Helper()
	if stateDir == "" {
		stateDir = g.t.TempDir()
	}
	tok := g.token("agent", id)
	p := start(g.t, "agent "+id, bin.agent, nil, "connect", "--gateway", url, "--token", tok, "--host-id", id, "--state-dir", stateDir)
	g.waitConnected(id, true, 30*time.Second)
	return p
}

// hostRecord fetches /v1/hosts/{id} with the admin token.
func (g *gw) hostRecord(id string) (*client.HostRecord, error) {
	c, err := client.New(g.url, g.admin, g.clientOptions())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Host(ctx, id)
}

// waitConnected waits until host id's connected flag is want.
func (g *gw) waitConnected(id string, want bool, d time.Duration) {
	g.t.Helper()
	deadline := time.Now().Add(d)
	for {
		rec, err := g.hostRecord(id)
		if err == nil && rec.Connected == want {
			return
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("host %s connected=%v not reached within %v (last: %+v, %v)", id, want, d, rec, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitHostGone waits until an ended execution's host record is deleted
// with it: the host list leaves it out, and /v1/hosts/{id} answers 410
// gone (the end this gateway saw) or 404 (one it did not).
func (g *gw) waitHostGone(id string, d time.Duration) {
	g.t.Helper()
	g.waitHostGoneIn(g.t, id, d)
}

// waitHostGoneIn is waitHostGone failing t, as waitForIn.
func (g *gw) waitHostGoneIn(t testing.TB, id string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		rec, err := g.hostRecord(id)
		var ae *client.APIError
		if errors.As(err, &ae) && (ae.Status == http.StatusNotFound || ae.Status == http.StatusGone) && !g.hostListed(id) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("host %s still listed %v after its execution ended: %+v %v", id, d, rec, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// hostListed reports whether GET /v1/hosts lists host id (or fails).
func (g *gw) hostListed(id string) bool {
	c, err := client.New(g.url, g.admin, g.clientOptions())
	if err != nil {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hosts, err := c.Hosts(ctx)
	if err != nil {
		return true
	}
	for _, h := range hosts {
		if h.ID == id {
			return true
		}
	}
	return false
}

// api does a JSON request with token and returns status and body.
func (g *gw) api(method, path, token string, body any) (int, []byte) {
	g.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, g.url+path, rd)
	if err != nil {
		g.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	hc := http.DefaultClient
	if g.roots != nil {
		hc = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: g.roots}, DisableKeepAlives: true}}
	}
	res, err := hc.Do(req)
	if err != nil {
		g.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// testCtx is a context bounded by the test's deadline (or d).
func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// lookPath reports whether a peer program exists.
func lookPath(name string) bool {
	_, err := exec.LookPath(name)
	return err == nil
}
