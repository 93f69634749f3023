package main

// The agent binary's tests that read /proc (Linux only; main_test.go holds
// the rest).

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hostgate/hostgate/bytestream"
)

// Regression: the agent handed every command the descriptors it inherited
// (Go leaves them as they came, without close-on-exec), where sshd closes
// them: a command's background child held a supervisor's pipe open, or
// could write to a file the agent's parent opened. Started here with a file
// as its fd 3 and a pipe's write end as its fd 4, the agent runs a command
// that sees neither.
func TestServeCommandsDoNotInheritFDs(t *testing.T) {
	dir := t.TempDir()
	marker, err := os.Create(filepath.Join(dir, "inherited-marker"))
	if err != nil {
		t.Fatal(err)
	}
	defer marker.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	pipeName, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", pw.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	agent := startMuxAgent(t, dir, newKey(t), marker, pw)
	_ = pw.Close()
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
	defer s.Close()
	out, err := s.Output(`for fd in /proc/$$/fd/*; do echo "${fd##*/} $(readlink "$fd")"; done`)
	if err != nil {
		t.Fatalf("list the command's fds: %v\n%s", err, agent.logs.String())
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.HasSuffix(line, " "+marker.Name()) || strings.HasSuffix(line, " "+pipeName) {
			t.Errorf("the command holds the agent's inherited fd: %s", line)
		}
	}
	t.Logf("the command's fds:\n%s", out)
}

// TestServeStdioMuxPeerGone: a tunnel peer that stops reading before it
// leaves makes the agent's next write fail. The agent takes that as the
// peer leaving and exits 0; it is not killed by SIGPIPE, which the Go
// runtime sends itself for a broken pipe on fd 1 unless SIGPIPE is
// handled. Its commands still start with SIGPIPE at its default.
func TestServeStdioMuxPeerGone(t *testing.T) {
	dir := t.TempDir()
	user := newKey(t)

	// A command's SIGPIPE disposition, from /proc: bit 13-1 of SigIgn.
	agent := startMuxAgent(t, dir, user)
	sess, err := bytestream.MuxClient(bytestream.NewPipeConn(agent.out, agent.in), nil)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := agent.dialSSH(sess)
	if err != nil {
		t.Fatal(err)
	}
	s, err := cl.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Output("grep SigIgn /proc/self/status")
	_ = cl.Close()
	_ = sess.Close()
	if err != nil {
		t.Fatal(err)
	}
	var ign uint64
	if _, err := fmt.Sscanf(string(got), "SigIgn: %x", &ign); err != nil {
		t.Fatalf("SigIgn line %q: %v", got, err)
	}
	if ign&(1<<(syscall.SIGPIPE-1)) != 0 {
		t.Errorf("a command of the agent starts with SIGPIPE ignored (SigIgn %016x)", ign)
	}
	_ = agent.cmd.Wait()

	// The peer closes its read end, then pings: the agent's answer hits
	// the broken pipe.
	agent = startMuxAgent(t, dir, user)
	_ = agent.out.Close()
	ping := []byte{0, 2, 0, 1, 0, 0, 0, 0, 0, 0, 0, 7} // version 0, ping, SYN, stream 0, id 7
	if _, err := agent.in.Write(ping); err != nil {
		t.Fatal(err)
	}
	err = agent.cmd.Wait()
	_ = agent.in.Close()
	if err != nil {
		t.Fatalf("agent after its peer stopped reading: %v, want exit 0\n%s", err, agent.logs.String())
	}
}
