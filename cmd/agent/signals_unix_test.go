//go:build unix

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/testenv"
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

// SIGHUP stops the agent as SIGTERM does, its commands killed and
// awaited: OpenSSH sends it to its ProxyCommand as it exits (a `~.`, a
// killed ssh), and a closed terminal to an agent run in it. By the
// runtime's default it ended the agent at once, and a stdio agent's
// commands, which have no guard, ran on. Started with SIGHUP ignored (as
// under nohup), the agent keeps serving through one.
func TestServeStopsOnHangUp(t *testing.T) {
	dir := t.TempDir()
	user := newKey(t)
	agent := startMuxAgent(t, dir, user)
	sess, err := bytestream.MuxClient(bytestream.NewPipeConn(agent.out, agent.in), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	cl, err := agent.dialSSH(sess)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	s, err := cl.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start("echo $$; exec sleep 300"); err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Fscan(out, &pid); err != nil {
		t.Fatalf("the command's pid: %v\n%s", err, agent.logs.String())
	}
	if err := agent.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if err := agent.cmd.Wait(); err != nil {
		t.Fatalf("agent after SIGHUP: %v, want a clean stop\n%s", err, agent.logs.String())
	}
	testenv.WaitGone(t, pid, wait)

	// Under nohup: SIGHUP ignored, commands served after it.
	nohup := &muxAgent{logs: new(bytes.Buffer), user: user, hostKey: agent.hostKey}
	nohup.cmd = exec.CommandContext(testCtx(t), "/bin/sh", append([]string{"-c", `trap '' HUP; exec "$0" "$@"`}, agent.cmd.Args...)...)
	nohup.cmd.Stderr = nohup.logs
	if nohup.in, err = nohup.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if nohup.out, err = nohup.cmd.StdoutPipe(); err != nil {
		t.Fatal(err)
	}
	if err := nohup.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nohup.cmd.Process.Kill(); _ = nohup.cmd.Wait() })
	sess2, err := bytestream.MuxClient(bytestream.NewPipeConn(nohup.out, nohup.in), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess2.Close()
	for i := range 2 {
		cl, err := nohup.dialSSH(sess2)
		if err != nil {
			t.Fatalf("connection %d to an agent started with SIGHUP ignored: %v\n%s", i, err, nohup.logs.String())
		}
		s, err := cl.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		if got, err := s.Output("echo ok"); err != nil || string(got) != "ok\n" {
			t.Fatalf("command %d: %q %v\n%s", i, got, err, nohup.logs.String())
		}
		_ = cl.Close()
		if i == 0 {
			if err := nohup.cmd.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
		}
	}
}
