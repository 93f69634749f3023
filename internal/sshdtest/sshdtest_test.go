package sshdtest

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
	"go.uber.org/goleak"

	"github.com/hostgate/hostgate/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A client holding the generated user key and pinning HostPub runs a
// command, and once it hangs up the server goes idle.
func TestServerRunsCommand(t *testing.T) {
	s := Start(t, Options{LogLevel: "INFO"})
	signer, err := ssh.ParsePrivateKey(s.UserKey)
	if err != nil {
		t.Fatal(err)
	}
	conn := s.Dial(t)
	cc, chans, reqs, err := ssh.NewClientConn(conn, s.Addr(), &ssh.ClientConfig{
		User: "root", Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.FixedHostKey(s.HostPub), Timeout: 30 * time.Second,
	})
	if err != nil {
		conn.Close()
		t.Fatalf("handshake: %v\n%s", err, s.Log())
	}
	c := ssh.NewClient(cc, chans, reqs)
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, err := sess.Output("echo hello")
	if err != nil || string(out) != "hello\n" {
		t.Fatalf("echo = %q, %v", out, err)
	}
	_ = c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s.Log(), "Accepted publickey") {
		t.Errorf("sshd log does not show the login:\n%s", s.Log())
	}
}

// The written files are what OpenSSH's own client needs: -i UserKeyFile
// and a known_hosts that pins the host key.
func TestOpenSSHClientAccepted(t *testing.T) {
	s := Start(t, Options{LogLevel: "INFO", Ciphers: "aes128-gcm@openssh.com"})
	sshPath, err := exec.LookPath("ssh")
	testenv.RequirePeer(t, "OpenSSH ssh", err == nil)
	host, port, _ := strings.Cut(s.Addr(), ":")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, sshPath, "-F", "/dev/null", "-o", "BatchMode=yes",
		"-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile="+s.KnownHosts,
		"-i", s.UserKeyFile, "-p", port, "root@"+host, "echo ok").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("ssh: %v\n%s", err, out)
	}
}
