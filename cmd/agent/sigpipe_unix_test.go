//go:build unix

package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hostgate/hostgate/sshlayer"
	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

// An agent whose log reader went away (`agent connect 2>&1 | logger`, the
// logger restarted or killed) keeps serving, as sshd, which ignores
// SIGPIPE, does: its next log line went to a broken pipe on fd 2, and the
// Go runtime ended the agent with SIGPIPE for it, its sessions cut, no
// cleanup run and no word said.
func TestServeSurvivesItsLogReaderGone(t *testing.T) {
	needOpenSSH(t)
	dir, work := t.TempDir(), t.TempDir()
	user := newKey(t)
	key := writeFile(t, filepath.Join(dir, "id"), user.pem)
	authKeys := writeFile(t, filepath.Join(dir, "authorized_keys"), ssh.MarshalAuthorizedKey(user.signer.PublicKey()))
	state := filepath.Join(dir, "state")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	agent := exec.CommandContext(testCtx(t), agentBin(t), "serve", "--listen", "127.0.0.1:0", "--authorized-keys", authKeys, "--state-dir", state)
	agent.Dir = work
	agent.Env = append(os.Environ(), "HOME="+work)
	agent.Stderr = w
	err = agent.Start()
	_ = w.Close()
	if err != nil {
		_ = r.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.Process.Kill(); _ = agent.Wait() })
	logs := bufio.NewReader(r)
	var addr string
	for addr == "" {
		line, err := logs.ReadString('\n')
		if err != nil {
			t.Fatalf("agent exited before listening: %v", err)
		}
		if _, after, ok := strings.Cut(line, "listen="); ok {
			addr = strings.TrimSpace(after)
		}
	}
	_ = r.Close() // the log's reader is gone

	hk, err := sshlayer.LoadOrCreateHostKey(filepath.Join(state, "host_key"))
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(addr, ":")
	kh := writeFile(t, filepath.Join(dir, "known_hosts"), fmt.Appendf(nil, "[%s]:%s %s", host, port, ssh.MarshalAuthorizedKey(hk.PublicKey())))
	// Logged by the agent ("ssh connection"), into the broken pipe.
	out, err := exec.CommandContext(testCtx(t), "ssh", append(sshArgs(kh, key), "-p", port, "-l", "anyone", host, "echo hello")...).CombinedOutput()
	if err != nil || string(out) != "hello\n" {
		t.Fatalf("ssh after the agent's log reader left: %q %v, want hello", out, err)
	}
	// Its commands still die of SIGPIPE, as under sshd.
	out, err = exec.CommandContext(testCtx(t), "ssh", append(sshArgs(kh, key), "-p", port, "-l", "anyone", host, "kill -PIPE $$; echo survived")...).CombinedOutput()
	if strings.Contains(string(out), "survived") {
		t.Fatalf("a command survived SIGPIPE: %q %v", out, err)
	}
	if err := agent.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("agent gone: %v", err)
	}
	if err := agent.Wait(); err != nil {
		t.Fatalf("agent after SIGTERM: %v, want a clean exit", err)
	}
}
