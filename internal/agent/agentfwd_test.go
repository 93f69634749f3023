package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/sshlayer"
)

// agentForwarded asks for agent forwarding (as ssh -A does) in a session
// of cl and runs a command there: it returns whether the server granted
// it and the SSH_AUTH_SOCK the command saw.
func agentForwarded(t *testing.T, cl *ssh.Client) (granted bool, sock string) {
	t.Helper()
	s, err := cl.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if granted, err = s.SendRequest("auth-agent-req@openssh.com", true, nil); err != nil {
		t.Fatal(err)
	}
	out, err := s.Output(`printf %s "$SSH_AUTH_SOCK"`)
	if err != nil {
		t.Fatal(err)
	}
	return granted, string(out)
}

// certPermitsAgent says whether a certificate (in authorized_keys form)
// has permit-agent-forwarding.
func certPermitsAgent(t *testing.T, cert string) bool {
	t.Helper()
	pk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(cert))
	if err != nil {
		t.Fatal(err)
	}
	c, ok := pk.(*ssh.Certificate)
	if !ok {
		t.Fatalf("%T, want a certificate", pk)
	}
	_, permits := c.Extensions["permit-agent-forwarding"]
	return permits
}

// TestConnectForwardsAgent: through the gateway, a caller's certificate
// from the gateway CA forwards its agent (ssh -A) to a machine's agent,
// unless the machine's owner turned it off (--no-agent-forwarding), which
// the agent tells the gateway: its certificates then lack
// permit-agent-forwarding.
func TestConnectForwardsAgent(t *testing.T) {
	for _, off := range []bool{false, true} {
		g := newGW(t)
		tunnels := runAgent(t, g.ctx, ConnectConfig{GatewayURL: g.ts.URL, Token: g.token(store.RoleAgent, "h1"), HostID: "h1", StateDir: t.TempDir(), NoAgentForwarding: off})
		waitTunnel(t, tunnels, "h1")
		c, err := g.dialSSH(g.token(store.RoleClient, "h1"), "h1")
		if err != nil {
			t.Fatal(err)
		}
		granted, sock := agentForwarded(t, c.SSH())
		_ = c.Close()
		if granted == off || (sock == "") != off {
			t.Errorf("NoAgentForwarding %v: granted %v, SSH_AUTH_SOCK %q", off, granted, sock)
		}
		_, cert, err := g.certificate(g.token(store.RoleClient, "h1"), "h1")
		if err != nil {
			t.Fatal(err)
		}
		if permits := certPermitsAgent(t, cert); permits == off {
			t.Errorf("NoAgentForwarding %v: the gateway's certificate permits agent forwarding: %v", off, permits)
		}
	}
}

// serveStdio runs `agent serve --stdio` with a new key authorized and
// args, and returns an SSH client of it, its log, and RunServe's end,
// once the client is closed.
func serveStdio(t *testing.T, args ...string) (*ssh.Client, *serveLogBuffer, <-chan error) {
	t.Helper()
	dir := t.TempDir()
	client := serveKey(t)
	keys := filepath.Join(dir, "keys")
	if err := os.WriteFile(keys, ssh.MarshalAuthorizedKey(client.PublicKey()), 0o600); err != nil {
		t.Fatal(err)
	}
	gwSide, agentSide := serveTCPPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), serveWait)
	t.Cleanup(cancel)
	logs := &serveLogBuffer{}
	done := make(chan error, 1)
	args = append([]string{"--stdio", "--authorized-keys", keys, "--state-dir", dir}, args...)
	go func() { done <- RunServe(ctx, args, &ServeIO{Conn: agentSide, Stderr: logs}) }()
	hk, err := sshlayer.LoadOrCreateHostKey(filepath.Join(dir, HostKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	return serveSSHClient(t, gwSide, hk.PublicKey(), client), logs, done
}

// TestRunServeAgentForwarding: `agent serve` forwards an authorized key's
// agent unless --no-agent-forwarding (or HOSTGATE_NO_AGENT_FORWARDING)
// says not to.
func TestRunServeAgentForwarding(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  string
		want bool
	}{
		{"default", nil, "", true},
		{"flag", []string{"--no-agent-forwarding"}, "", false},
		{"environment", nil, "true", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("HOSTGATE_NO_AGENT_FORWARDING", tc.env)
			}
			cl, logs, done := serveStdio(t, tc.args...)
			granted, sock := agentForwarded(t, cl)
			if granted != tc.want || (sock != "") != tc.want {
				t.Errorf("granted %v, SSH_AUTH_SOCK %q; want forwarded %v\n%s", granted, sock, tc.want, logs.String())
			}
			_ = cl.Close()
			if err := <-done; err != nil {
				t.Fatalf("RunServe: %v", err)
			}
		})
	}
}

// TestSandboxRefusesAgentForwarding: a sandbox's agent (the server a keys
// preamble describes, as dockerhost starts it) never forwards an agent,
// even to a certificate that permits it, and its log says so: a forwarded
// agent there would sign for whatever untrusted code runs.
func TestSandboxRefusesAgentForwarding(t *testing.T) {
	fx := newStdioKeysFixture(t)
	var preamble bytes.Buffer
	if err := WriteStdioKeys(&preamble, fx.keys); err != nil {
		t.Fatal(err)
	}
	var logs serveLogBuffer
	srv, _, _, err := stdioKeysServer(&preamble, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Close() }()
	clientSide, serverSide := serveTCPPair(t)
	done := make(chan error, 1)
	go func() { done <- srv.ServeConn(context.Background(), serverSide) }()

	user := serveKey(t)
	cert := &ssh.Certificate{
		Key: user.PublicKey(), CertType: ssh.UserCert, KeyId: "test",
		ValidPrincipals: []string{fx.keys.HostID},
		ValidAfter:      uint64(time.Now().Add(-time.Minute).Unix()),
		ValidBefore:     uint64(time.Now().Add(time.Hour).Unix()),
		Permissions:     ssh.Permissions{Extensions: map[string]string{"permit-agent-forwarding": ""}},
	}
	if err := cert.SignCert(rand.Reader, fx.ca); err != nil {
		t.Fatal(err)
	}
	cs, err := ssh.NewCertSigner(cert, user)
	if err != nil {
		t.Fatal(err)
	}
	cl := serveSSHClient(t, clientSide, fx.hostPub, cs)
	if granted, sock := agentForwarded(t, cl); granted || sock != "" {
		t.Errorf("sandbox: granted %v, SSH_AUTH_SOCK %q; want no agent", granted, sock)
	}
	_ = cl.Close()
	if err := <-done; err != nil {
		t.Fatalf("ServeConn: %v", err)
	}
	if !strings.Contains(logs.String(), "agent forwarding refused: off on this server (always in a sandbox") {
		t.Errorf("no log line for the refusal:\n%s", logs.String())
	}
}
