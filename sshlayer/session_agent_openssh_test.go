//go:build linux

package sshlayer

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/internal/sshdtest"
	"github.com/hostgate/hostgate/internal/testenv"
)

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
// command: ssh-add -l lists the key, and ssh-keygen signs with it there, a
// signature that checks on this side. Without forwarding, or with a certificate lacking
// permit-agent-forwarding, the command has no SSH_AUTH_SOCK.
func TestOpenSSHAgentForwarding(t *testing.T) {
	t.Parallel()
	ctx := srvTestCtx(t)
	dir := t.TempDir()
	ag := sshdtest.StartAgent(t, ctx, dir)
	data := filepath.Join(dir, "data")
	if err := os.WriteFile(data, []byte("signed through a forwarded agent\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, o := srvOpenSSHServer(t, &ServerConfig{AgentForwarding: true})

	out, err := agentCommand(ctx, o, ag.Sock, "-A", "127.0.0.1", "ssh-add -l && "+ag.SignCommand(data)).CombinedOutput()
	if err != nil {
		t.Fatalf("ssh -A: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte(ag.Listed())) {
		t.Errorf("ssh-add -l on the host does not list %s:\n%s", ag.Listed(), out)
	}
	ag.CheckSignature(t, ctx, data)

	// The same ssh, with the agent, but without -A.
	out, err = agentCommand(ctx, o, ag.Sock, "127.0.0.1", `echo "sock=[$SSH_AUTH_SOCK]"`).CombinedOutput()
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
	ag := sshdtest.StartAgent(t, ctx, t.TempDir())
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
		out, err := agentCommand(ctx, o, ag.Sock, "-A", "-o", "CertificateFile="+certFile, "127.0.0.1", `echo "sock=[$SSH_AUTH_SOCK]"; ssh-add -l`).CombinedOutput()
		if granted := err == nil && !bytes.Contains(out, []byte("sock=[]")); granted != tc.granted {
			t.Errorf("certificate with %v: %v\n%s\nwant agent forwarded: %v", tc.ext, err, out, tc.granted)
		}
	}
	if !strings.Contains(logs.String(), "agent forwarding refused: key lacks permit-agent-forwarding") {
		t.Errorf("no log line for the refusal:\n%s", logs.String())
	}
}
