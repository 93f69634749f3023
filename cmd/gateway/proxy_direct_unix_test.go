//go:build unix

package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/agent"
	"github.com/hostgate/hostgate/internal/testenv"
)

// directBox is a gateway (logging to logs) with host box's agent
// listening for direct sessions.
type directBox struct {
	base, dir, clientTok string
	newToken             func(args ...string) string
	logs                 *testenv.LogBuffer
}

func startDirectGateway(t *testing.T) *directBox {
	t.Helper()
	ctx := testCtx(t)
	b := &directBox{dir: filepath.Join(t.TempDir(), "state"), logs: &testenv.LogBuffer{}}
	a, _ := serveWith(t, &serveConfig{Listen: "127.0.0.1:0", StateDir: b.dir, Docker: "off", CertTTL: time.Minute, LogFormat: "text"}, b.logs)
	b.base = "http://" + a.String()
	b.newToken = tokenMaker(t, ctx, b.dir)
	b.clientTok = b.newToken("--role", "client", "--host", "box")
	return b
}

// runDirectAgent runs an in-process agent of host id (its host key in
// stateDir) with its direct listener on 127.0.0.1 (advertising advertise when not
// empty), logging to logs, until the test ends; it answers the addresses
// the gateway publishes for it.
func (b *directBox) runDirectAgent(t *testing.T, id, stateDir, advertise string, logs io.Writer) []string {
	t.Helper()
	return b.runDirectAgentOn(t, id, stateDir, "127.0.0.1:0", advertise, logs)
}

// runDirectAgentOn is runDirectAgent with the direct listener on listen.
func (b *directBox) runDirectAgentOn(t *testing.T, id, stateDir, listen, advertise string, logs io.Writer) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(testCtx(t))
	up := make(chan string, 4)
	done := make(chan error, 1)
	go func() {
		done <- agent.Connect(ctx, &agent.ConnectConfig{GatewayURL: b.base, Token: b.newToken("--role", "agent", "--host", id), StateDir: stateDir,
			Direct: listen, DirectAdvertise: advertise,
			Logger: slog.New(slog.NewTextHandler(logs, nil)), OnTunnel: func(id string) { up <- id }})
	}()
	t.Cleanup(sync.OnceFunc(func() { cancel(); <-done }))
	select {
	case <-up:
	case err := <-done:
		t.Fatalf("agent %s: %v", id, err)
	case <-time.After(30 * time.Second):
		t.Fatal("agent did not connect")
	}
	code, body := apiDo(t, testCtx(t), b.base, "GET", "/v1/hosts/"+id, b.newToken("--role", "admin"), "")
	var rec struct{ Direct []string }
	if err := json.Unmarshal([]byte(body), &rec); code != 200 || err != nil || len(rec.Direct) == 0 {
		t.Fatalf("host %s's record: %d %s (%v): want its direct addresses", id, code, body, err)
	}
	return rec.Direct
}

// sshConnection runs `ssh box` through gateway proxy (--verbose by its
// environment variable, and extra ones) and answers the agent's port in
// SSH_CONNECTION (the port ssh reached) and the proxy's stderr.
func (b *directBox) sshConnection(t *testing.T, extraEnv ...string) (serverPort string, stderr string) {
	t.Helper()
	sshPath, err := exec.LookPath("ssh")
	testenv.RequirePeer(t, "openssh (ssh)", err == nil)
	ctx := testCtx(t)
	_, config, env := sshConfig(t, ctx, b.base, b.clientTok, "box")
	cmd := exec.CommandContext(ctx, sshPath, "-F", config, "box", `echo "$SSH_CONNECTION"`)
	cmd.Env = append(append(env, "HOSTGATE_VERBOSE=1"), extraEnv...)
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ssh: %v\n%s", err, errb.String())
	}
	f := strings.Fields(string(out))
	if len(f) != 4 {
		t.Fatalf("SSH_CONNECTION %q, want 4 fields", out)
	}
	return f[3], errb.String()
}

func portOf(t *testing.T, addr string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOpenSSHProxyDirect: OpenSSH's ssh through gateway proxy lands on
// the agent's direct listener, not the gateway's relay: SSH_CONNECTION
// names the listener's port, the gateway logs no relay but the direct
// session's start, and its audit log has an ssh-direct entry. The
// proxy's probe of the address (a key exchange it stops) leaves no line
// in the agent's log at the default level, as each ssh run would.
func TestOpenSSHProxyDirect(t *testing.T) {
	b := startDirectGateway(t)
	var agentLogs testenv.LogBuffer
	addrs := b.runDirectAgent(t, "box", t.TempDir(), "", &agentLogs)
	port, stderr := b.sshConnection(t)
	if want := portOf(t, addrs[0]); port != want {
		t.Fatalf("ssh reached the agent's port %s, want its direct listener's %s; proxy said:\n%s", port, want, stderr)
	}
	if want := "gateway: host box: direct session to " + addrs[0]; !strings.Contains(stderr, want) {
		t.Errorf("proxy --verbose said %q, want %q", stderr, want)
	}
	logs := b.logs.String()
	if strings.Contains(logs, `msg="relay start"`) || !strings.Contains(logs, `msg="direct start" host=box`) {
		t.Errorf("gateway log: want a direct start for box and no relay:\n%s", logs)
	}
	out, err := cli(t, testCtx(t), "audit", "--state-dir", b.dir)
	if err != nil || !strings.Contains(out, " ssh-direct ") || strings.Contains(out, " ssh ") {
		t.Errorf("gateway audit: %v\n%s\nwant an ssh-direct entry and no relayed ssh", err, out)
	}
	if l := agentLogs.String(); strings.Contains(l, "handshake") || strings.Contains(l, "level=WARN") {
		t.Errorf("the agent logged the proxy's probe:\n%s", l)
	}
}

// TestOpenSSHProxyDirectFallsBack: ssh through gateway proxy works through
// the relay when the direct path does not: an advertised address nobody
// listens on; one where another SSH server answers (another agent, with
// another host key: an agent's LAN address seen from another LAN); and
// --relay-only, which does not try. --verbose says why each time.
func TestOpenSSHProxyDirectFallsBack(t *testing.T) {
	b := startDirectGateway(t)
	deadAddr := testenv.RefusedAddr(t)
	other := b.runDirectAgent(t, "other", t.TempDir(), "", io.Discard)
	boxState := t.TempDir() // one host key for box's agents, which the gateway pins

	for _, tc := range []struct {
		name, advertise, want string
		env                   []string
		reported              bool // the relay's request says why the direct path failed
	}{
		{"dead address", deadAddr, "no direct session (direct: no address answered", nil, true},
		{"another SSH server", other[0], "not the host's pinned", nil, true},
		{"--relay-only", "", "through the gateway's relay (--relay-only)", []string{"HOSTGATE_RELAY_ONLY=1"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addrs := b.runDirectAgent(t, "box", boxState, tc.advertise, io.Discard)
			relaysBefore := strings.Count(b.logs.String(), `msg="relay start" host=box`)
			port, stderr := b.sshConnection(t, tc.env...)
			if port == portOf(t, addrs[0]) || port == portOf(t, other[0]) {
				t.Errorf("ssh reached port %s, a direct listener's (%q, other's %q); want the relay", port, addrs, other)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("proxy --verbose said %q, want %q", stderr, tc.want)
			}
			if n := strings.Count(b.logs.String(), `msg="relay start" host=box`); n != relaysBefore+1 {
				t.Errorf("%d relays to box, want 1", n-relaysBefore)
			}
			var start string
			for _, l := range strings.Split(b.logs.String(), "\n") {
				if strings.Contains(l, `msg="relay start" host=box`) {
					start = l
				}
			}
			if got := strings.Contains(start, "directFailed="); got != tc.reported {
				t.Errorf("the gateway's relay start line %q: says why the direct path failed %v, want %v", start, got, tc.reported)
			}
		})
	}
	if strings.Contains(b.logs.String(), `msg="direct start"`) {
		t.Errorf("a direct session started:\n%s", b.logs.String())
	}
}

// TestProxyDirectMendsKnownHosts: on the direct path too, gateway proxy
// --known-hosts rewrites a line naming another key than the one the
// gateway pins for the host (after gateway host reset-key) before ssh
// reads the host's key: the gateway's answer of addresses names the key,
// as the relay's answer does.
func TestProxyDirectMendsKnownHosts(t *testing.T) {
	ctx := testCtx(t)
	b := startDirectGateway(t)
	b.runDirectAgent(t, "box", t.TempDir(), "", io.Discard)
	code, body := apiDo(t, ctx, b.base, "GET", "/v1/hosts/box", b.clientTok, "")
	var rec struct{ HostPublicKey string }
	if err := json.Unmarshal([]byte(body), &rec); code != 200 || err != nil || rec.HostPublicKey == "" {
		t.Fatalf("host record: %d %s %v", code, body, err)
	}
	kh := filepath.Join(t.TempDir(), "known_hosts")
	const stale = "box ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n"
	if err := os.WriteFile(kh, []byte(stale), 0o600); err != nil {
		t.Fatal(err)
	}
	stderr := proxyVersionLine(t, ctx, "--url", b.base, "--token", b.clientTok, "--known-hosts", kh, "--verbose", "box")
	if !strings.Contains(stderr, "direct session to") {
		t.Fatalf("proxy stderr %q: want the direct path taken, for the test to mean anything", stderr)
	}
	got, err := os.ReadFile(kh)
	if err != nil || string(got) != "box "+rec.HostPublicKey+"\n" {
		t.Errorf("known_hosts after the proxy's direct run: %q, %v; want box's pinned key %q", got, err, rec.HostPublicKey)
	}
	if !strings.Contains(stderr, "updated") {
		t.Errorf("proxy stderr %q, want it to say the line was updated", stderr)
	}
}

// TestOpenSSHProxyDirectRemembersAFailure: after the direct path failed,
// the next ssh runs keep to the relay without trying it (an address
// behind a firewall that drops the packets costs each try the whole
// connect bound) until proxyDirectRetry has passed since the failure;
// then the proxy tries again, and a direct path that works is no longer
// remembered as failed.
func TestOpenSSHProxyDirectRemembersAFailure(t *testing.T) {
	b := startDirectGateway(t)
	deadAddr := testenv.RefusedAddr(t)
	state := t.TempDir()
	b.runDirectAgent(t, "box", state, deadAddr, io.Discard)
	cache := t.TempDir()
	memos := filepath.Join(cache, "hostgate", "direct-failed")
	run := func(want string) {
		t.Helper()
		_, stderr := b.sshConnection(t, "XDG_CACHE_HOME="+cache)
		if !strings.Contains(stderr, want) {
			t.Fatalf("proxy --verbose said %q, want %q", stderr, want)
		}
	}
	run("no direct session (direct: no address answered")
	run("the direct path failed from here (direct: no address answered")
	// Its time is the file's: a minute and more ago, it is tried again.
	files, err := os.ReadDir(memos)
	if err != nil || len(files) != 1 {
		t.Fatalf("%s: %v, %v; want one host's memo", memos, files, err)
	}
	old := time.Now().Add(-proxyDirectRetry - time.Second)
	if err := os.Chtimes(filepath.Join(memos, files[0].Name()), old, old); err != nil {
		t.Fatal(err)
	}
	run("no direct session (direct: no address answered")

	// The agent back on an address that answers: direct, and forgotten.
	b.runDirectAgent(t, "box", state, "", io.Discard)
	old = time.Now().Add(-proxyDirectRetry - time.Second)
	if err := os.Chtimes(filepath.Join(memos, files[0].Name()), old, old); err != nil {
		t.Fatal(err)
	}
	run("gateway: host box: direct session to ")
	if files, err := os.ReadDir(memos); err != nil || len(files) != 0 {
		t.Errorf("%s after a direct session: %v, %v; want no memo", memos, files, err)
	}
}
