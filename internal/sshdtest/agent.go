package sshdtest

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/internal/shell"
	"github.com/hostgate/hostgate/internal/testenv"
)

// agentWait bounds ssh-agent's exit once killed.
const agentWait = 10 * time.Second

// Agent is OpenSSH's ssh-agent holding one fresh ed25519 key, whose
// private half is on no disk: whatever signs with Key went through the
// agent.
type Agent struct {
	Sock    string        // the agent's socket, for SSH_AUTH_SOCK
	PubFile string        // Key in authorized_keys form, comment "sshdtest-agent"
	Key     ssh.PublicKey // the key the agent holds
}

// StartAgent runs ssh-agent in the foreground on a socket in dir until
// t's cleanup, and adds a new key to it. Without OpenSSH's agent tools it
// skips t (fails it when HOSTGATE_E2E=require).
func StartAgent(t testing.TB, ctx context.Context, dir string) *Agent {
	t.Helper()
	for _, tool := range []string{"ssh-agent", "ssh-add", "ssh-keygen"} {
		_, err := exec.LookPath(tool)
		testenv.RequirePeer(t, "OpenSSH "+tool, err == nil)
	}
	a := &Agent{Sock: filepath.Join(dir, "agent.sock")}
	cmd := exec.CommandContext(ctx, "ssh-agent", "-D", "-a", a.Sock)
	cmd.WaitDelay = agentWait
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	// It prints SSH_AUTH_SOCK=… once it listens.
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || !strings.HasPrefix(line, "SSH_AUTH_SOCK=") {
		t.Fatalf("ssh-agent: %q %v", line, err)
	}
	key := filepath.Join(dir, "agent_key")
	if out, err := exec.CommandContext(ctx, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "sshdtest-agent", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v %s", err, out)
	}
	add := exec.CommandContext(ctx, "ssh-add", key)
	add.Env = append(os.Environ(), "SSH_AUTH_SOCK="+a.Sock)
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("ssh-add: %v %s", err, out)
	}
	if err := os.Remove(key); err != nil {
		t.Fatal(err)
	}
	a.PubFile = key + ".pub"
	b, err := os.ReadFile(a.PubFile)
	if err != nil {
		t.Fatal(err)
	}
	if a.Key, _, _, _, err = ssh.ParseAuthorizedKey(b); err != nil {
		t.Fatal(err)
	}
	return a
}

// Listed is what `ssh-add -l` prints for Key, the fingerprint and comment.
func (a *Agent) Listed() string { return ssh.FingerprintSHA256(a.Key) + " sshdtest-agent" }

// SignCommand is a shell command that signs file (writing file.sig) with
// Key through the agent SSH_AUTH_SOCK names, as a program on a host that
// was forwarded the agent would.
func (a *Agent) SignCommand(file string) string {
	return "ssh-keygen -q -Y sign -n file -f " + shell.Quote(a.PubFile) + " " + shell.Quote(file)
}

// CheckSignature fails t unless file.sig is Key's signature of file.
func (a *Agent) CheckSignature(t testing.TB, ctx context.Context, file string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	check := exec.CommandContext(ctx, "ssh-keygen", "-Y", "check-novalidate", "-n", "file", "-s", file+".sig")
	check.Stdin = f
	out, err := check.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Good") {
		t.Errorf("%s.sig is not the agent key's signature of %s: %v %s", file, file, err, out)
	}
}
