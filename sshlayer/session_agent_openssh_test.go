//go:build linux

package sshlayer

import (
	"bufio"
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/internal/shell"
	"github.com/hostgate/hostgate/internal/testenv"
)

// startSSHAgent runs an ssh-agent in the foreground on a socket in dir,
// holding a fresh ed25519 key whose private half is then deleted, and
// returns the socket, the public key's file and the key. The agent ends
// with the test.
func startSSHAgent(t *testing.T, ctx context.Context, dir string) (sock, pubFile string, pub ssh.PublicKey) {
	t.Helper()
	srvNeedOpenSSH(t, "ssh-agent", "ssh-add", "ssh-keygen")
	sock = filepath.Join(dir, "agent.sock")
	agent := exec.CommandContext(ctx, "ssh-agent", "-D", "-a", sock)
	agent.WaitDelay = srvTestWait
	out, err := agent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = agent.Process.Kill()
		_ = agent.Wait()
	})
	// It says SSH_AUTH_SOCK=… once it listens.
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || !strings.HasPrefix(line, "SSH_AUTH_SOCK=") {
		t.Fatalf("ssh-agent: %q %v", line, err)
	}
	key := filepath.Join(dir, "user")
	if out, err := exec.CommandContext(ctx, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "agentfwd-test", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v %s", err, out)
	}
	add := exec.CommandContext(ctx, "ssh-add", key)
	add.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("ssh-add: %v %s", err, out)
	}
	// Only the agent can sign with it now.
	if err := os.Remove(key); err != nil {
		t.Fatal(err)
	}
	pubFile = key + ".pub"
	b, err := os.ReadFile(pubFile)
	if err != nil {
		t.Fatal(err)
	}
	if pub, _, _, _, err = ssh.ParseAuthorizedKey(b); err != nil {
		t.Fatal(err)
	}
	return sock, pubFile, pub
}

// agentCommand is o.command for ssh with the agent at sock as its own
// (IdentityAgent, in place of the harness's none, which ssh -A would take
// for no agent to forward; IdentitiesOnly keeps its keys out of
// authentication).
func agentCommand(ctx context.Context, o *srvOpenSSH, sock string, args ...string) *exec.Cmd {
	cmd := o.command(ctx, "ssh", args...)
	for i, a := range cmd.Args {
		if a == "IdentityAgent=none" {
			cmd.Args[i] = "IdentityAgent=" + sock
		}
	}
	return cmd
}

// TestOpenSSHAgentForwarding: ssh -A reaches the caller's agent from the
// command: ssh-add -l
// lists the key, and ssh-keygen signs with it there, a signature that
// checks on this side. Without forwarding, or with a certificate lacking
// permit-agent-forwarding, the command has no SSH_AUTH_SOCK.
func TestOpenSSHAgentForwarding(t *testing.T) {
	t.Parallel()
	ctx := srvTestCtx(t)
	dir := t.TempDir()
	sock, pubFile, pub := startSSHAgent(t, ctx, dir)
	data := filepath.Join(dir, "data")
	if err := os.WriteFile(data, []byte("signed through a forwarded agent\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, o := srvOpenSSHServer(t, &ServerConfig{AgentForwarding: true})

	cmd := `echo "sock=$SSH_AUTH_SOCK"; ssh-add -l && ssh-keygen -q -Y sign -n file -f ` + shell.Quote(pubFile) + " " + shell.Quote(data)
	out, err := agentCommand(ctx, o, sock, "-A", "127.0.0.1", cmd).CombinedOutput()
	if err != nil {
		t.Fatalf("ssh -A: %v\n%s", err, out)
	}
	if fp := ssh.FingerprintSHA256(pub); !bytes.Contains(out, []byte(fp+" agentfwd-test")) {
		t.Errorf("ssh-add -l on the host does not list %s:\n%s", fp, out)
	}
	check := exec.CommandContext(ctx, "ssh-keygen", "-Y", "check-novalidate", "-n", "file", "-s", data+".sig")
	f, err := os.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	check.Stdin = f
	if out, err := check.CombinedOutput(); err != nil || !bytes.Contains(out, []byte("Good")) {
		t.Errorf("the signature made on the host does not check: %v %s", err, out)
	}

	// The same ssh, with the agent, but without -A.
	out, err = agentCommand(ctx, o, sock, "127.0.0.1", `echo "sock=[$SSH_AUTH_SOCK]"`).CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("sock=[]")) {
		t.Errorf("ssh without -A: %v %q, want no SSH_AUTH_SOCK", err, out)
	}
}

// TestOpenSSHAgentForwardingCertificate: a certificate forwards an agent
// only with permit-agent-forwarding, as under sshd; without it, ssh -A's
// command has no SSH_AUTH_SOCK (ssh says nothing: it asks without wanting
// a reply) and the server's log says why.
func TestOpenSSHAgentForwardingCertificate(t *testing.T) {
	t.Parallel()
	ctx := srvTestCtx(t)
	sock, _, _ := startSSHAgent(t, ctx, t.TempDir())
	ca, _, _ := newEd25519Signer()
	var logs testenv.LogBuffer
	ts := srvStartServer(t, &ServerConfig{AgentForwarding: true, TrustedUserCAs: []ssh.PublicKey{ca.PublicKey()}, Principal: "host-1", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	for _, tc := range []struct {
		ext     []string
		granted bool
	}{
		{[]string{"permit-pty", "permit-port-forwarding", "permit-agent-forwarding"}, true},
		{[]string{"permit-pty", "permit-port-forwarding"}, false},
	} {
		key, keyPEM, _ := newEd25519Signer()
		o := srvNewOpenSSH(t, ts.Port, ts.HostPublicKey, keyPEM)
		cert := srvSignCert(t, ca, key.PublicKey(), func(c *ssh.Certificate) {
			c.Permissions.Extensions = map[string]string{}
			for _, e := range tc.ext {
				c.Permissions.Extensions[e] = ""
			}
		})
		certFile := filepath.Join(o.dir, "id-cert.pub")
		if err := os.WriteFile(certFile, ssh.MarshalAuthorizedKey(cert), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := agentCommand(ctx, o, sock, "-A", "-o", "CertificateFile="+certFile, "127.0.0.1", `echo "sock=[$SSH_AUTH_SOCK]"; ssh-add -l`).CombinedOutput()
		if granted := err == nil && !bytes.Contains(out, []byte("sock=[]")); granted != tc.granted {
			t.Errorf("certificate with %v: %v\n%s\nwant agent forwarded: %v", tc.ext, err, out, tc.granted)
		}
	}
	if !strings.Contains(logs.String(), "agent forwarding refused: key lacks permit-agent-forwarding") {
		t.Errorf("no log line for the refusal:\n%s", logs.String())
	}
}
