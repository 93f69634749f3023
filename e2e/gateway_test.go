package e2e

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/client"
	"github.com/hostgate/hostgate/internal/testenv"
	"github.com/hostgate/hostgate/sshlayer"
)

// TestTwoAgentsThroughGateway: two agents dial out to one gateway; the Go
// client runs exec, SFTP (bytes unchanged) and a local forward on each.
func TestTwoAgentsThroughGateway(t *testing.T) {
	g := startGateway(t, "")
	g.startAgent("alpha", "")
	g.startAgent("beta", "")
	ctx := testCtx(t, 2*time.Minute)

	// A server on this machine's loopback that the forwards reach through
	// each host.
	echo := echoServer(t)

	for _, id := range []string{"alpha", "beta"} {
		h, err := client.Dial(ctx, g.url, g.admin, id)
		if err != nil {
			t.Fatalf("dial %s: %v", id, err)
		}
		t.Cleanup(func() { h.Close() })

		res, err := h.Exec(ctx, []string{"sh", "-c", `printf '%s' "$HG_ID"; exit 7`}, hostgate.ExecOptions{SpawnOptions: hostgate.SpawnOptions{Env: map[string]string{"HG_ID": id}}})
		if err != nil || res.ExitCode != 7 || string(res.Stdout) != id {
			t.Fatalf("%s exec: %+v %v", id, res, err)
		}

		fsys, err := h.FS(ctx)
		if err != nil {
			t.Fatal(err)
		}
		data := make([]byte, 3<<20+17)
		_, _ = rand.Read(data)
		path := filepath.Join(t.TempDir(), id+" file with spaces")
		if err := writeAll(ctx, fsys, path, data); err != nil {
			t.Fatal(err)
		}
		got, err := readAll(ctx, fsys, path)
		if err != nil || sha256.Sum256(got) != sha256.Sum256(data) {
			t.Fatalf("%s sftp round trip: %d bytes, %v", id, len(got), err)
		}

		fw, err := h.Forward(ctx, hostgate.ForwardSpec{Kind: hostgate.ForwardLocal, Listen: "127.0.0.1:0", Connect: echo})
		if err != nil {
			t.Fatal(err)
		}
		c, err := net.Dial("tcp", fw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		msg := "through " + id
		fmt.Fprintln(c, msg)
		line := make([]byte, len(msg)+1)
		if _, err := io.ReadFull(c, line); err != nil || string(line) != msg+"\n" {
			t.Fatalf("%s forward: %q %v", id, line, err)
		}
		c.Close()
		fw.Close()
	}
}

// TestOpenSSHThroughProxy runs the README's ~/.ssh/config block: ssh, sftp
// and scp through `gateway proxy` with strict host key checking.
func TestOpenSSHThroughProxy(t *testing.T) {
	testenv.RequirePeer(t, "OpenSSH ssh/sftp/scp", lookPath("ssh") && lookPath("sftp") && lookPath("scp"))
	g := startGateway(t, "")
	g.startAgent("alpha", "")
	ctx := testCtx(t, 2*time.Minute)
	dir := t.TempDir()
	cfg := sshConfig(t, g, "alpha", dir)

	out, err := exec.CommandContext(ctx, "ssh", "-F", cfg, "alpha", "echo", "hello-$((40+2))", ";", "exit", "3").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || strings.TrimSpace(string(out)) != "hello-42" {
		t.Fatalf("ssh: %v %q", err, out)
	}
	// The command sees the caller as under sshd: `gateway proxy`'s
	// address and port, which the gateway names to the agent; and the
	// server's end as the agent's own end of its tunnel, the address the
	// gateway logged its tunnel from (it said UNKNOWN 65535).
	out, err = exec.CommandContext(ctx, "ssh", "-F", cfg, "alpha", `echo "$SSH_CONNECTION|$SSH_CLIENT"`).CombinedOutput()
	if err != nil {
		t.Fatalf("ssh: %v %q", err, out)
	}
	checkCallerEnv(t, string(out), "127.0.0.1", g.agentEnd("alpha"))

	local := filepath.Join(dir, "up.bin")
	data := make([]byte, 20<<20)
	_, _ = rand.Read(data)
	if err := os.WriteFile(local, data, 0o600); err != nil {
		t.Fatal(err)
	}
	remote := filepath.Join(t.TempDir(), "remote.bin")
	batch := fmt.Sprintf("put %s %s\nrename %s %s.moved\nls -l %s.moved\nget %s.moved %s.back\n", local, remote, remote, remote, remote, remote, local)
	cmd := exec.CommandContext(ctx, "sftp", "-F", cfg, "-b", "-", "alpha")
	cmd.Stdin = strings.NewReader(batch)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sftp: %v\n%s", err, out)
	}
	back, err := os.ReadFile(local + ".back")
	if err != nil || !bytes.Equal(back, data) {
		t.Fatalf("sftp round trip changed the bytes (%d bytes, %v)", len(back), err)
	}

	if out, err := exec.CommandContext(ctx, "scp", "-F", cfg, local, "alpha:"+remote+".scp").CombinedOutput(); err != nil {
		t.Fatalf("scp: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(remote + ".scp"); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("scp changed the bytes: %v", err)
	}

	// A known_hosts line with another key: strict checking refuses.
	other, err := sshlayer.GenerateSessionKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "known_hosts"), []byte("alpha "+other.PublicKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(ctx, "ssh", "-F", cfg, "alpha", "true").CombinedOutput(); err == nil || !strings.Contains(string(out), "HOST IDENTIFICATION HAS CHANGED") {
		t.Fatalf("ssh with a wrong known_hosts line: %v %q", err, out)
	}
}

// callerEnv matches `echo "$SSH_CONNECTION|$SSH_CLIENT"`: the caller's
// address and port, the server's, then the caller's again and the
// server's port.
var callerEnv = regexp.MustCompile(`^(\S+) ([0-9]+) (\S+) ([0-9]+)\|(\S+) ([0-9]+) ([0-9]+)$`)

// checkCallerEnv checks out, `echo "$SSH_CONNECTION|$SSH_CLIENT"` of a
// command, against sshd's form: the caller at ip with a port of its own
// (not 0 or 65535), the same in both, and server (the agent's end, "IP
// PORT"; UNKNOWN 65535 for a sandbox's stdio, which has no address) in
// both.
func checkCallerEnv(t testing.TB, out, ip, server string) {
	t.Helper()
	m := callerEnv.FindStringSubmatch(strings.TrimSpace(out))
	if m == nil || m[1] != ip || m[2] == "0" || m[2] == "65535" || m[5] != m[1] || m[6] != m[2] ||
		m[3]+" "+m[4] != server || m[7] != m[4] {
		t.Fatalf("SSH_CONNECTION|SSH_CLIENT = %q, want the caller %s and a port in both, and the server's end %q", out, ip, server)
	}
}

// tunnelUpRE is the gateway's log line for a host's tunnel: the address
// it came from.
var tunnelUpRE = regexp.MustCompile(`msg="tunnel up" host=(\S+) remote=(\S+)`)

// agentEnd is the agent's end of host id's newest tunnel as SSH_CONNECTION
// names it ("IP PORT"): the address the gateway logged the tunnel from.
func (g *gw) agentEnd(id string) string {
	g.t.Helper()
	end := ""
	for _, m := range tunnelUpRE.FindAllStringSubmatch(g.output(), -1) {
		if m[1] == id {
			end = m[2]
		}
	}
	ap, err := netip.ParseAddrPort(end)
	if err != nil {
		g.t.Fatalf("the gateway logged no tunnel from an address for %s (%q: %v):\n%s", id, end, err, g.output())
	}
	return ap.Addr().String() + " " + strconv.Itoa(int(ap.Port()))
}

// sshConfig writes the README's config block for host id into dir and
// returns its path: a session key with a gateway certificate, a known_hosts
// line from hostPublicKey, and `gateway proxy` as ProxyCommand.
func sshConfig(t testing.TB, g *gw, id, dir string) string {
	t.Helper()
	return sshConfigVia(t, g, id, dir, g.url)
}

// sshConfigVia is sshConfig with the ProxyCommand dialing proxyURL, the
// gateway's address as clients see it (e.g. a TLS proxy in front).
func sshConfigVia(t testing.TB, g *gw, id, dir, proxyURL string) string {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	c, err := client.New(g.url, g.admin, g.clientOptions())
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.Host(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	key, err := sshlayer.GenerateSessionKey()
	if err != nil {
		t.Fatal(err)
	}
	cert, err := c.Certificate(ctx, id, key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"id_ed25519":          string(key.PrivateKey),
		"id_ed25519-cert.pub": cert.Certificate,
		"known_hosts":         id + " " + rec.HostPublicKey + "\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The README shows this block; keep them the same.
	config := fmt.Sprintf(`Host %[1]s
  ProxyCommand %[2]s proxy --url %[3]s --token %[4]s %%n
  IdentityFile %[5]s/id_ed25519
  CertificateFile %[5]s/id_ed25519-cert.pub
  UserKnownHostsFile %[5]s/known_hosts
  StrictHostKeyChecking yes
  BatchMode yes
`, id, bin.gateway, proxyURL, g.admin, dir)
	path := filepath.Join(dir, "config")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// certPermits says whether the certificate sshConfig wrote in dir has
// extension ext (permit-agent-forwarding), as ssh-keygen -L lists it.
func certPermits(t testing.TB, dir, ext string) bool {
	t.Helper()
	out, err := exec.Command("ssh-keygen", "-L", "-f", filepath.Join(dir, "id_ed25519-cert.pub")).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "permit-pty") {
		t.Fatalf("ssh-keygen -L: %v\n%s", err, out)
	}
	return strings.Contains(string(out), ext)
}

// echoServer listens on loopback and echoes lines; it returns the address.
func echoServer(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

var _ = http.StatusOK

// TestLazyHostInfo: a lazy host's Info is what the gateway published about
// the host once its first use has connected. It stayed the zero Info for
// good, so Info().OS, Home and Persistent (the watchdog's switch) were
// empty on every host a caller made with LazyHost.
func TestLazyHostInfo(t *testing.T) {
	g := startGateway(t, "")
	g.startAgent("alpha", "")
	ctx := testCtx(t, time.Minute)
	c, err := client.New(g.url, g.admin, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.Host(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Info.OS == "" || rec.Info.Home == "" {
		t.Fatalf("the gateway published no info for alpha: %+v", rec.Info)
	}
	if !rec.Info.Persistent || rec.Info.Kind != "machine" {
		t.Errorf("a machine's agent outlives its sessions, so its host is a persistent machine: %+v", rec.Info)
	}
	h := c.LazyHost("alpha")
	defer h.Close()
	// Info does not dial: before the first use there is nothing to say.
	if got := h.Info(); got != (hostgate.Info{}) {
		t.Errorf("Info before any use: %+v, want the zero Info", got)
	}
	if _, err := h.Exec(ctx, []string{"true"}, hostgate.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := h.Info(); got != rec.Info {
		t.Errorf("Info once connected: %+v, want the gateway's %+v", got, rec.Info)
	}
}

// TestAgentDialsWebSocketURL: `agent connect --gateway` takes the
// gateway's ws:// address as DESIGN names it, not only its http:// one,
// and the host it attaches serves commands.
func TestAgentDialsWebSocketURL(t *testing.T) {
	g := startGateway(t, "")
	if !strings.HasPrefix(g.url, "http://") {
		t.Fatalf("gateway URL %q: want http://", g.url)
	}
	g.startAgentAt("ws://"+strings.TrimPrefix(g.url, "http://"), "alpha", "")
	ctx := testCtx(t, time.Minute)
	h, err := client.Dial(ctx, g.url, g.admin, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	res, err := h.Exec(ctx, []string{"echo", "over ws"}, hostgate.ExecOptions{})
	if err != nil || string(res.Stdout) != "over ws\n" {
		t.Fatalf("exec through an agent that dialed ws://: %q %v", res.Stdout, err)
	}
}
