//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/agent"
	"github.com/hostgate/hostgate/internal/testenv"
	"github.com/hostgate/hostgate/sshlayer"
)

// TestOpenSSHThroughProxy runs the README's path with real OpenSSH: an
// agent enrolled through `gateway serve`, a certificate from the API,
// `ssh` with `ProxyCommand gateway proxy`, the host key from hostPublicKey
// in known_hosts and StrictHostKeyChecking yes; then `scp` both ways.
func TestOpenSSHThroughProxy(t *testing.T) {
	sshPath, err := exec.LookPath("ssh")
	scpPath, err2 := exec.LookPath("scp")
	testenv.RequirePeer(t, "openssh (ssh, scp)", err == nil && err2 == nil)
	ctx := testCtx(t)
	base, clientTok := startBox(t, "box")

	home, config, env := sshConfig(t, ctx, base, clientTok, "box")
	write := func(name, data string, mode os.FileMode) string {
		p := filepath.Join(home, name)
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	runCmd := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
		}
		return string(out)
	}
	if got := runCmd(sshPath, "-F", config, "box", "echo", "hello", "over", "ssh"); got != "hello over ssh\n" {
		t.Errorf("ssh output %q", got)
	}
	payload := bytes.Repeat([]byte("scp bytes\x00\xff"), 50000)
	local := write("payload", string(payload), 0o644)
	remote := filepath.Join(t.TempDir(), "copied")
	runCmd(scpPath, "-F", config, local, "box:"+remote)
	back := filepath.Join(home, "back")
	runCmd(scpPath, "-F", config, "box:"+remote, back)
	if got, err := os.ReadFile(back); err != nil || !bytes.Equal(got, payload) {
		t.Errorf("scp round trip changed the bytes (%d of %d) %v", len(got), len(payload), err)
	}
	// A wrong pinned host key: ssh refuses to connect.
	write("known_hosts", "box ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHR6hLlBlGxJg5jZfF7rsW1BJ1NdkVNw5D5bd3g2yhkF\n", 0o644)
	cmd := exec.CommandContext(ctx, sshPath, "-F", config, "box", "true")
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Errorf("ssh accepted a host key other than the pinned one: %s", out)
	}
}

// TestOpenSSHSessionNamesItsConnection: a command run through `gateway
// proxy` had no SSH_CONNECTION or SSH_CLIENT, which scripts, prompts and
// tmux test to know they run over SSH, so it looked like a local one. Then
// both named each end UNKNOWN and port 65535, as sshd on a transport
// without addresses (sshd -i on a pipe). Now the gateway names the caller
// to the agent (a PROXY line on each stream), so they carry `gateway
// proxy`'s address and port, as sshd's carry the client's; and the
// server's end is the agent's end of its tunnel, its TCP address (it said
// UNKNOWN 65535), as sshd's is the address the client reached.
func TestOpenSSHSessionNamesItsConnection(t *testing.T) {
	sshPath, err := exec.LookPath("ssh")
	testenv.RequirePeer(t, "openssh (ssh)", err == nil)
	ctx := testCtx(t)
	base, clientTok := startBox(t, "box")
	_, config, env := sshConfig(t, ctx, base, clientTok, "box")
	cmd := exec.CommandContext(ctx, sshPath, "-F", config, "box", `echo "$SSH_CONNECTION|$SSH_CLIENT"`)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("ssh: %v\n%s", err, out)
	}
	var port, agentPort int
	if _, err := fmt.Sscanf(string(out), "127.0.0.1 %d 127.0.0.1 %d|", &port, &agentPort); err != nil || port <= 0 || port == 65535 || agentPort <= 0 || agentPort == 65535 || agentPort == port {
		t.Fatalf("SSH_CONNECTION|SSH_CLIENT through the gateway: %q, want the caller's 127.0.0.1 and port, then the agent's (%v)", out, err)
	}
	if want := fmt.Sprintf("127.0.0.1 %d 127.0.0.1 %d|127.0.0.1 %d %d\n", port, agentPort, port, agentPort); string(out) != want {
		t.Errorf("SSH_CONNECTION|SSH_CLIENT through the gateway: %q, want %q", out, want)
	}
}

// TestOpenSSHCertMatchExec runs the README's renewing config with real
// OpenSSH: `Match exec "gateway cert …"` makes the session key, renews its
// certificate when it is short of --min-valid and writes the host's pinned
// key into known_hosts, so ssh keeps working after the 10-minute
// certificates expire. A fresh certificate is kept without a request.
func TestOpenSSHCertMatchExec(t *testing.T) {
	sshPath, err := exec.LookPath("ssh")
	testenv.RequirePeer(t, "openssh (ssh)", err == nil)
	ctx := testCtx(t)
	// An id with capitals: ssh lower-cases %h, and the README uses %n.
	base, clientTok := startBox(t, "Box3", func(c *serveConfig) { c.CertTTL = 5 * time.Minute })

	home := t.TempDir()
	keyFile, knownHosts := filepath.Join(home, "ssh", "hostgate_ed25519"), filepath.Join(home, "known_hosts")
	config := filepath.Join(home, "config")
	writeConfig := func(minValid string) {
		t.Helper()
		c := fmt.Sprintf(`Match host Box3 exec "%[1]s cert --key %[2]s --known-hosts %[3]s --min-valid %[4]s %%n"
Host Box3
  User me
  ProxyCommand %[1]s proxy %%n
  IdentityFile %[2]s
  CertificateFile %[2]s-%%n-cert.pub
  UserKnownHostsFile %[3]s
  StrictHostKeyChecking yes
  IdentitiesOnly yes
  BatchMode yes
`, os.Args[0], keyFile, knownHosts, minValid)
		if err := os.WriteFile(config, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "HOSTGATE_TEST_BE_GATEWAY=1", "HOSTGATE_URL="+base, "HOSTGATE_TOKEN="+clientTok)
	ssh := func() {
		t.Helper()
		cmd := exec.CommandContext(ctx, sshPath, "-F", config, "Box3", "echo", "renewed")
		cmd.Env = env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if out, err := cmd.Output(); err != nil || string(out) != "renewed\n" {
			kh, _ := os.ReadFile(knownHosts)
			t.Logf("known_hosts %q", kh)
			t.Fatalf("ssh: %q %v\n%s", out, err, stderr.String())
		}
	}
	cert := func() string {
		t.Helper()
		b, err := os.ReadFile(keyFile + "-Box3-cert.pub")
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	// Longer than the certificates live: every run renews.
	writeConfig("10m")
	ssh()
	first := cert()
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("session key: %v %v, want a 0600 file", fi, err)
	}
	ssh()
	second := cert()
	if first == second {
		t.Fatal("a certificate short of --min-valid was not renewed")
	}
	// Fresh enough: kept, with no request.
	writeConfig("1m")
	ssh()
	if cert() != second {
		t.Fatal("a fresh certificate was replaced")
	}
	// --force renews a fresh one (after a host key reset).
	if _, err := cli(t, ctx, "cert", "--url", base, "--token", clientTok, "--key", keyFile, "--known-hosts", knownHosts, "--force", "Box3"); err != nil {
		t.Fatal(err)
	}
	if cert() == second {
		t.Fatal("--force kept a fresh certificate")
	}
	kh, err := os.ReadFile(knownHosts)
	if err != nil || strings.Count(string(kh), "\n") != 1 || !strings.HasPrefix(string(kh), "Box3 ssh-") {
		t.Fatalf("known_hosts %q %v, want one line for Box3", kh, err)
	}
	// A renewal that fails leaves the settings in force: ssh goes through
	// the proxy and fails there, never straight to a host named Box3.
	writeConfig("10m")
	cmd := exec.CommandContext(ctx, sshPath, "-v", "-F", config, "Box3", "true")
	cmd.Env = append(os.Environ(), "HOSTGATE_TEST_BE_GATEWAY=1", "HOSTGATE_URL=http://127.0.0.1:1", "HOSTGATE_TOKEN="+clientTok)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "Executing proxy command") || strings.Contains(string(out), "Could not resolve hostname") {
		t.Fatalf("ssh with the gateway unreachable: %v\n%s", err, out)
	}
}

// TestOpenSSHSaysWhyWhenTheAgentStops: an agent stopped on purpose
// (SIGTERM, a systemctl restart: its context ends) closed each SSH
// connection before its tunnel, so the gateway took the session for one
// that had ended by itself, and ssh showed only "Connection closed". The
// tunnel now ends first, and ssh's stderr names the host and the cause.
func TestOpenSSHSaysWhyWhenTheAgentStops(t *testing.T) {
	sshPath, err := exec.LookPath("ssh")
	testenv.RequirePeer(t, "openssh (ssh)", err == nil)
	ctx := testCtx(t)
	base, agentTok, clientTok := serveHost(t, ctx, "box")
	stopAgent := runAgent(t, ctx, base, agentTok)
	defer stopAgent()
	_, config, env := sshConfig(t, ctx, base, clientTok, "box")
	cmd := exec.CommandContext(ctx, sshPath, "-F", config, "box", "echo ready; sleep 60")
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		t.Fatalf("ssh's first line %q %v\n%s", line, err, stderr.String())
	}
	stopAgent()
	_, _ = io.Copy(io.Discard, out)
	if err := cmd.Wait(); err == nil {
		t.Error("ssh exited 0 when the host's agent stopped under its command")
	}
	if want := "host box: its agent disconnected from the gateway"; !strings.Contains(stderr.String(), want) {
		t.Errorf("ssh's stderr %q lacks %q", stderr.String(), want)
	}
}

// sshConfig does what a user does, per the README: a session key, its
// certificate for host, the host's pinned key in known_hosts, and an
// ssh_config whose ProxyCommand is `gateway proxy` (this test binary). It
// returns the directory holding them, the config and ssh's environment.
func sshConfig(t *testing.T, ctx context.Context, base, clientTok, hostID string) (home, config string, env []string) {
	t.Helper()
	api := func(method, path string, body, v any) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequestWithContext(ctx, method, base+path, rd)
		req.Header.Set("Authorization", "Bearer "+clientTok)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if err := json.NewDecoder(res.Body).Decode(v); err != nil || res.StatusCode != 200 {
			t.Fatalf("%s %s: %d %v", method, path, res.StatusCode, err)
		}
	}
	var host struct{ HostPublicKey, HostKey string }
	api("GET", "/v1/hosts/"+hostID, nil, &host)
	key, err := sshlayer.GenerateSessionKey()
	if err != nil {
		t.Fatal(err)
	}
	var cert struct{ Certificate string }
	api("POST", "/v1/hosts/"+hostID+"/certificates", map[string]string{"publicKey": key.PublicKey}, &cert)
	home = t.TempDir()
	write := func(name, data string, mode os.FileMode) string {
		p := filepath.Join(home, name)
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	keyFile := write("id", string(key.PrivateKey), 0o600)
	write("id-cert.pub", cert.Certificate+"\n", 0o644)
	knownHosts := write("known_hosts", hostID+" "+host.HostPublicKey+"\n", 0o644)
	config = write("config", fmt.Sprintf(`Host %s
  User me
  ProxyCommand %s proxy %%h
  IdentityFile %s
  CertificateFile %s
  UserKnownHostsFile %s
  StrictHostKeyChecking yes
  IdentitiesOnly yes
  BatchMode yes
`, hostID, os.Args[0], keyFile, keyFile+"-cert.pub", knownHosts), 0o644)
	// The proxy's memory of failed direct paths (proxy_memo.go) is the
	// test's own, not the user's cache.
	env = append(os.Environ(), "HOSTGATE_TEST_BE_GATEWAY=1", "HOSTGATE_URL="+base, "HOSTGATE_TOKEN="+clientTok, "XDG_CACHE_HOME="+filepath.Join(home, "cache"))
	return home, config, env
}

// startBox runs `gateway serve` with host id enrolled by an in-process
// agent, and returns the gateway's URL and a client token for it.
func startBox(t *testing.T, id string, opts ...func(*serveConfig)) (string, string) {
	t.Helper()
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "state")
	base := startServe(t, dir, opts...)
	out, err := cli(t, ctx, "token", "create", "--role", "agent", "--host", id, "--state-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	agentTok := lastLine(out)
	out, err = cli(t, ctx, "token", "create", "--role", "client", "--host", id, "--state-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	clientTok := lastLine(out)
	t.Cleanup(runAgent(t, ctx, base, agentTok))
	return base, clientTok
}

// runAgent runs an in-process agent with a host key of its own (a fresh
// state dir) until its tunnel is up, and returns its stop.
func runAgent(t *testing.T, ctx context.Context, base, agentTok string) (stop func()) {
	t.Helper()
	up := make(chan string, 4)
	actx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- agent.Connect(actx, &agent.ConnectConfig{GatewayURL: base, Token: agentTok, StateDir: t.TempDir(),
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), OnTunnel: func(id string) { up <- id }})
	}()
	stop = sync.OnceFunc(func() { cancel(); <-done })
	select {
	case <-up:
	case <-time.After(30 * time.Second):
		stop()
		t.Fatal("agent did not connect")
	}
	return stop
}
