package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/client"
	"github.com/hostgate/hostgate/internal/testenv"
)

// startDirectAgent runs `agent connect --direct 127.0.0.1:0` for host id
// (and extra flags), waits for it, and returns it with the address the
// gateway publishes for it.
func (g *gw) startDirectAgent(id string, extra ...string) (*proc, []string) {
	g.t.Helper()
	tok := g.token("agent", id)
	args := append([]string{"connect", "--gateway", g.url, "--token", tok, "--host-id", id, "--state-dir", g.t.TempDir(), "--direct", "127.0.0.1:0"}, extra...)
	p := start(g.t, "agent "+id, bin.agent, nil, args...)
	g.waitConnected(id, true, 30*time.Second)
	rec, err := g.hostRecord(id)
	if err != nil {
		g.t.Fatal(err)
	}
	return p, rec.Direct
}

// createToken runs `gateway token create` for a named client token of
// host, and returns the token and its id.
func (g *gw) createToken(t *testing.T, name, host string) (tok, id string) {
	t.Helper()
	out, err := exec.Command(bin.gateway, "token", "create", "--role", "client", "--host", host, "--name", name, "--state-dir", g.stateDir).Output()
	if err != nil {
		t.Fatal(err)
	}
	m := tokenIDRE.FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("no token id in %q", out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1]), m[1]
}

// TestDirectSessions: an agent started with --direct is published with
// its address; the Go client runs its session straight to it (the gateway
// relays nothing) and exec, SFTP and forwarding work over it; OpenSSH's
// ssh does too, with a certificate from the gateway, dialing the listener
// itself or through gateway proxy, which finds it; the gateway admits
// and audits each, and a revoked token ends its direct session as it
// ends a relayed one. When the gateway stops, so do the direct sessions
// it admitted: nobody could end them any more.
func TestDirectSessions(t *testing.T) {
	testenv.RequirePeer(t, "OpenSSH ssh", lookPath("ssh"))
	g := startGateway(t, "", "--token-recheck", "200ms")
	_, direct := g.startDirectAgent("alpha")
	if len(direct) != 1 || !strings.HasPrefix(direct[0], "127.0.0.1:") || strings.HasSuffix(direct[0], ":0") {
		t.Fatalf("the host record's direct addresses: %q, want the agent's bound loopback port", direct)
	}
	ctx := testCtx(t, 2*time.Minute)
	doomed, doomedID := g.createToken(t, "doomed", "alpha")
	c, err := client.New(g.url, doomed, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	h, err := c.Dial(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if addr, err := c.DirectPath("alpha"); err != nil || addr != direct[0] {
		t.Fatalf("DirectPath: %q, %v; want the session at %s", addr, err, direct[0])
	}
	res, err := h.Exec(ctx, []string{"sh", "-c", "echo $SSH_CONNECTION"}, hostgate.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if f := strings.Fields(string(res.Stdout)); len(f) != 4 || f[0] != "127.0.0.1" || net.JoinHostPort(f[2], f[3]) != direct[0] {
		t.Fatalf("SSH_CONNECTION %q: want the caller on loopback, the agent's own listener as the server", res.Stdout)
	}
	// SFTP over the same session.
	path := filepath.Join(t.TempDir(), "direct.txt")
	fsys, err := h.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fw0, ok := fsys.(hostgate.FileWriter)
	if !ok {
		t.Fatalf("the SFTP provider %T writes no whole files", fsys)
	}
	if err := fw0.WriteFile(ctx, path, 0o600, strings.NewReader("straight\n"), nil); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "straight\n" {
		t.Fatalf("the file written over the direct session: %q, %v", b, err)
	}
	// A local forward to a web server on the host's side.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "preview") })}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	fw, err := h.Forward(ctx, hostgate.ForwardSpec{Kind: hostgate.ForwardLocal, Listen: "127.0.0.1:0", Connect: ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + fw.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	_ = fw.Close()
	if string(body) != "preview" {
		t.Fatalf("through the forward: %q", body)
	}

	// OpenSSH's ssh straight to the agent's listener, with the gateway's
	// certificate and the pinned key.
	{
		dir := t.TempDir()
		sshConfig(t, g, "alpha", dir)
		host, port, _ := net.SplitHostPort(direct[0])
		cfg := filepath.Join(dir, "direct_config")
		must(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`Host alpha-direct
  HostName %s
  Port %s
  HostKeyAlias alpha
  IdentityFile %[3]s/id_ed25519
  CertificateFile %[3]s/id_ed25519-cert.pub
  UserKnownHostsFile %[3]s/known_hosts
  StrictHostKeyChecking yes
  BatchMode yes
`, host, port, dir)), 0o600))
		out, err := exec.CommandContext(ctx, "ssh", "-F", cfg, "alpha-direct", "echo from-openssh").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "from-openssh" {
			t.Fatalf("OpenSSH ssh to the direct listener: %v\n%s", err, out)
		}
	}

	// OpenSSH's ssh with gateway proxy as its ProxyCommand, as the README
	// sets it up: the proxy finds the agent's address and joins ssh to it.
	if server := proxiedServer(t, ctx, sshConfig(t, g, "alpha", t.TempDir()), "alpha"); server != direct[0] {
		t.Fatalf("ssh through gateway proxy reached %s, want the agent's direct listener %s", server, direct[0])
	}
	// With ProxyUseFdpass and --fdpass the proxy hands ssh the agent's
	// socket and exits.
	if server := proxiedServerFdpass(t, ctx, sshConfig(t, g, "alpha", t.TempDir()), "alpha"); server != direct[0] {
		t.Fatalf("ssh through gateway proxy --fdpass reached %s, want the agent's direct listener %s", server, direct[0])
	}

	// None of it went through the relay; the gateway admitted each.
	logs := g.proc.output()
	if strings.Contains(logs, "relay start") {
		t.Fatalf("the gateway relayed a session:\n%s", logs)
	}
	if n := strings.Count(logs, "direct start"); n < 4 {
		t.Fatalf("%d direct sessions admitted in the gateway's log, want at least 4 (Go, OpenSSH, OpenSSH through gateway proxy, and with --fdpass):\n%s", n, logs)
	}
	out, err := exec.Command(bin.gateway, "audit", "--state-dir", g.stateDir).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ssh-direct") || !strings.Contains(string(out), "doomed") {
		t.Fatalf("gateway audit: %v, want the direct sessions of token doomed\n%s", err, out)
	}

	// A revoked token ends its direct session.
	p, err := h.Spawn(ctx, []string{"sleep", "600"}, hostgate.SpawnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, p.Stdout()) }()
	go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
	if out, err := exec.Command(bin.gateway, "token", "revoke", doomedID, "--state-dir", g.stateDir).CombinedOutput(); err != nil {
		t.Fatalf("revoke: %v: %s", err, out)
	}
	waitLost(t, p, "the revoked token's direct session")
	if _, err := client.Dial(ctx, g.url, doomed, "alpha"); err == nil {
		t.Fatal("the revoked token dials again")
	}

	// The gateway stopping ends the direct sessions it admitted.
	admin, err := client.New(g.url, g.admin, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.CloseIdleConnections()
	ha, err := admin.Dial(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	defer ha.Close()
	if addr, err := admin.DirectPath("alpha"); addr == "" {
		t.Fatalf("the admin's session is not direct: %v", err)
	}
	p, err = ha.Spawn(ctx, []string{"sleep", "600"}, hostgate.SpawnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, p.Stdout()) }()
	go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
	g.proc.stop()
	waitLost(t, p, "a direct session after its gateway stopped")
}

// proxiedServer runs `echo $SSH_CONNECTION` on host id with OpenSSH's
// ssh and config (sshConfig's: ProxyCommand gateway proxy), with extra
// environment variables, and returns the server's end it names
// (host:port): the agent's direct listener when the proxy joined ssh to
// it, the agent's end of its tunnel when the gateway relayed.
func proxiedServer(t *testing.T, ctx context.Context, config, id string, env ...string) string {
	t.Helper()
	return proxiedServerOpts(t, ctx, config, id, nil, env...)
}

// proxiedServerFdpass is proxiedServer with ssh's ProxyUseFdpass and
// gateway proxy --fdpass, which hands ssh its socket and exits; it also
// fails the test when a process of the run (the proxy, or the relay it
// started) outlives ssh by 5 s.
func proxiedServerFdpass(t *testing.T, ctx context.Context, config, id string, env ...string) string {
	t.Helper()
	mark := fmt.Sprintf("HOSTGATE_TEST_RUN=fdpass-%d-%d", os.Getpid(), time.Now().UnixNano())
	server := proxiedServerOpts(t, ctx, config, id, []string{"-o", "ProxyUseFdpass=yes"}, append(env, "HOSTGATE_FDPASS=1", mark)...)
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := processesWithEnv(mark)
		if len(left) == 0 {
			return server
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of an ssh run through gateway proxy --fdpass outlived it by 5 s: %v", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// processesWithEnv lists the processes whose environment holds kv
// ("NAME=value"), with their command lines.
func processesWithEnv(kv string) []string {
	dirs, _ := os.ReadDir("/proc")
	var found []string
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
		if err != nil || !slices.Contains(strings.Split(string(env), "\x00"), kv) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		found = append(found, d.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	return found
}

// proxiedServerOpts is proxiedServer with ssh's options opts.
func proxiedServerOpts(t *testing.T, ctx context.Context, config, id string, opts []string, env ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, "ssh", append(append([]string{"-F", config}, opts...), id, "echo $SSH_CONNECTION")...)
	// A process of the run that outlives ssh holds its stderr open: the
	// wait for it ends here, not at the test's timeout.
	cmd.WaitDelay = 10 * time.Second
	// The proxy's memory of failed direct paths is the test's, not the
	// user's cache.
	cmd.Env = append(append(os.Environ(), "XDG_CACHE_HOME="+t.TempDir()), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	f := strings.Fields(string(out))
	if err != nil || len(f) != 4 {
		t.Fatalf("ssh through gateway proxy: %v: SSH_CONNECTION %q\n%s", err, out, stderr.String())
	}
	return net.JoinHostPort(f[2], f[3])
}

// waitLost waits for p to end with a lost connection, not an exit.
func waitLost(t *testing.T, p hostgate.Process, what string) {
	t.Helper()
	waited := make(chan error, 1)
	go func() { waited <- p.Wait() }()
	select {
	case err := <-waited:
		var ee *hostgate.ExitError
		if err == nil || errors.As(err, &ee) {
			t.Fatalf("%s: the command ended with %v, want a lost connection", what, err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("%s: the command still runs after 60 s", what)
	}
}

// TestDirectFallsBackToTheRelay: a client that cannot reach the agent's
// direct address (here one the agent advertises but does not listen on)
// uses the relay and works all the same, the Go client and OpenSSH's ssh
// through gateway proxy alike; gateway proxy --relay-only uses the relay
// even to a live direct listener; a gateway started with
// --direct-sessions=off publishes no address, and every session is relayed.
func TestDirectFallsBackToTheRelay(t *testing.T) {
	testenv.RequirePeer(t, "OpenSSH ssh", lookPath("ssh"))
	ctx := testCtx(t, 2*time.Minute)
	deadAddr := testenv.RefusedAddr(t) // held for the test: no other listener takes its port

	g := startGateway(t, "")
	_, direct := g.startDirectAgent("alpha", "--direct-advertise", deadAddr)
	if len(direct) != 1 || direct[0] != deadAddr {
		t.Fatalf("published %q, want the advertised %s", direct, deadAddr)
	}
	c := dialEcho(t, ctx, g, "alpha")
	if _, err := c.DirectPath("alpha"); err == nil || !strings.Contains(err.Error(), deadAddr) {
		t.Fatalf("DirectPath: %v, want why %s failed", err, deadAddr)
	}
	if !strings.Contains(g.proc.output(), "relay start") {
		t.Fatal("no relay in the gateway's log")
	}
	// OpenSSH's ssh through gateway proxy, which finds the address dead.
	relays := strings.Count(g.proc.output(), "relay start")
	if server := proxiedServer(t, ctx, sshConfig(t, g, "alpha", t.TempDir()), "alpha"); server == deadAddr {
		t.Fatalf("ssh through gateway proxy reached the dead address %s", server)
	}
	if n := strings.Count(g.proc.output(), "relay start"); n != relays+1 {
		t.Fatalf("%d relays for ssh through gateway proxy to a dead direct address, want 1", n-relays)
	}
	// The same with --fdpass: one relay, from the process it starts.
	relays = strings.Count(g.proc.output(), "relay start")
	if server := proxiedServerFdpass(t, ctx, sshConfig(t, g, "alpha", t.TempDir()), "alpha"); server == deadAddr {
		t.Fatalf("ssh through gateway proxy --fdpass reached the dead address %s", server)
	}
	if n := strings.Count(g.proc.output(), "relay start"); n != relays+1 {
		t.Fatalf("%d relays for ssh through gateway proxy --fdpass to a dead direct address, want 1", n-relays)
	}
	// The relay it started tells the gateway why the direct path failed,
	// as the proxy's own relay does.
	if logs := g.proc.output(); !strings.Contains(logs[strings.LastIndex(logs, "relay start"):], "directFailed=") {
		t.Fatalf("the --fdpass relay's start names no direct failure:\n%s", logs[strings.LastIndex(logs, "relay start"):])
	}
	// gateway proxy --relay-only does not try a live direct listener.
	_, live := g.startDirectAgent("gamma")
	relays = strings.Count(g.proc.output(), "relay start")
	if server := proxiedServer(t, ctx, sshConfig(t, g, "gamma", t.TempDir()), "gamma", "HOSTGATE_RELAY_ONLY=1"); server == live[0] {
		t.Fatalf("ssh through gateway proxy --relay-only reached the direct listener %s", server)
	}
	if n := strings.Count(g.proc.output(), "relay start"); n != relays+1 {
		t.Fatalf("%d relays for ssh through gateway proxy --relay-only, want 1", n-relays)
	}
	// And with --fdpass: no question to the gateway, one relay.
	relays = strings.Count(g.proc.output(), "relay start")
	if server := proxiedServerFdpass(t, ctx, sshConfig(t, g, "gamma", t.TempDir()), "gamma", "HOSTGATE_RELAY_ONLY=1"); server == live[0] {
		t.Fatalf("ssh through gateway proxy --relay-only --fdpass reached the direct listener %s", server)
	}
	if n := strings.Count(g.proc.output(), "relay start"); n != relays+1 {
		t.Fatalf("%d relays for ssh through gateway proxy --relay-only --fdpass, want 1", n-relays)
	}

	off := startGateway(t, "", "--direct-sessions=off")
	_, direct = off.startDirectAgent("beta")
	if len(direct) != 0 {
		t.Fatalf("a --direct-sessions=off gateway published %q", direct)
	}
	// --fdpass to a host without direct addresses: the gateway's 204,
	// and one relay.
	relays = strings.Count(off.proc.output(), "relay start")
	if server := proxiedServerFdpass(t, ctx, sshConfig(t, off, "beta", t.TempDir()), "beta"); server == "" {
		t.Fatal("ssh through gateway proxy --fdpass to a host without direct addresses")
	}
	if n := strings.Count(off.proc.output(), "relay start"); n != relays+1 {
		t.Fatalf("%d relays for ssh through gateway proxy --fdpass to a host without direct addresses, want 1", n-relays)
	}
	c2 := dialEcho(t, ctx, off, "beta")
	if addr, err := c2.DirectPath("beta"); addr != "" || err != nil {
		t.Fatalf("DirectPath through a --direct-sessions=off gateway: %q, %v; want none tried", addr, err)
	}
}

// dialEcho dials host id through g with the admin token and runs echo
// there; the client and its host go with the test.
func dialEcho(t *testing.T, ctx context.Context, g *gw, id string) *client.Client {
	t.Helper()
	c, err := client.New(g.url, g.admin, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	h, err := c.Dial(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	if res, err := h.Exec(ctx, []string{"echo", "hi"}, hostgate.ExecOptions{}); err != nil || string(res.Stdout) != "hi\n" {
		t.Fatalf("exec on %s: %q, %v", id, res.Stdout, err)
	}
	return c
}
