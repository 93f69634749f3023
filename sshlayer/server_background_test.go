//go:build unix

package sshlayer

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/internal/testenv"
)

// TestLeaveBackground: with LeaveBackground a command's background
// process outlives it (docker exec's behaviour, for sandbox containers),
// the exit status arrives without waiting for it, and a background writer
// that keeps the output open delays the status by the drain grace only.
// Without the option the same command's background process is killed.
func TestLeaveBackground(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, leave bool, cmd string) (pid int, took time.Duration) {
		t.Helper()
		ts := srvStartServer(t, &ServerConfig{LeaveBackground: leave})
		c := srvDialServer(t, ts)
		s, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		start := time.Now()
		out, err := s.Output(cmd)
		took = time.Since(start)
		if err != nil {
			t.Fatalf("%q: %v (output %q)", cmd, err, out)
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil {
			t.Fatalf("output %q", out)
		}
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
		return pid, took
	}
	t.Run("quiet background process lives on", func(t *testing.T) {
		pid, took := run(t, true, `sleep 300 >/dev/null 2>&1 & echo $!`)
		if !testenv.Alive(pid) {
			t.Fatal("the background process was killed with its command")
		}
		// Not a timing assertion either: waiting for the background
		// process takes its 300 s; 10 s could pass on a loaded machine.
		t.Logf("exit status took %v", took)
		if took > 60*time.Second {
			t.Fatalf("exit status took %v: it waited for the background process", took)
		}
	})
	t.Run("writer holding the output", func(t *testing.T) {
		// Not a timing assertion: without the drain grace Output would wait
		// 300 s for the background sleep to close stdout.
		_, took := run(t, true, `sleep 300 & echo $!`)
		t.Logf("exit status took %v", took)
		if took > 60*time.Second {
			t.Fatalf("exit status took %v", took)
		}
	})
	t.Run("default kills the group", func(t *testing.T) {
		pid, _ := run(t, false, `sleep 300 >/dev/null 2>&1 & echo $!`)
		if testenv.Alive(pid) {
			t.Fatal("without LeaveBackground the background process outlived its command")
		}
	})
}

// TestProcessGroupsReported: the server reports each command's process
// group when it starts and again once it is gone (what the agent's guard
// is told), and nothing else.
func TestProcessGroupsReported(t *testing.T) {
	t.Parallel()
	type call struct {
		pgid    int
		running bool
	}
	calls := make(chan call, 16)
	ts := srvStartServer(t, &ServerConfig{ProcessGroups: func(pgid int, running bool) { calls <- call{pgid, running} }})
	c := srvDialServer(t, ts)
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out, err := s.Output(`echo $$`)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("output %q", out)
	}
	for _, want := range []call{{pid, true}, {pid, false}} {
		select {
		case got := <-calls:
			if got != want {
				t.Fatalf("reported %+v, want %+v", got, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no report %+v", want)
		}
	}
	select {
	case extra := <-calls:
		t.Fatalf("unexpected report %+v", extra)
	default:
	}
}

// TestKeepBackground: with KeepBackground what a command started in the
// background with nohup outlives the command's connection going away, as
// under sshd (VS Code's Remote-SSH server, which its editor's reconnect
// must find), with a terminal and without; the command itself still ends,
// so the session's wait for it is bounded. Without the option the same
// background process is killed with its session.
func TestKeepBackground(t *testing.T) {
	t.Parallel()
	// The command prints its background process's pid and its own, then
	// runs until it is ended. It prints once nohup has made the
	// background process sleep, ignoring SIGHUP: a hangup before that
	// ended the shell nohup was forked as (Linux; elsewhere it does not
	// wait).
	const cmd = `nohup sleep 300 >/dev/null 2>&1 &
until [ "$(cat /proc/$!/comm 2>/dev/null || echo sleep)" = sleep ]; do sleep 0.01; done
echo $! $$; exec sleep 600`
	run := func(t *testing.T, keep, pty bool) (bg, leader int) {
		t.Helper()
		ts := srvStartServer(t, &ServerConfig{KeepBackground: keep})
		c := srvDialServer(t, ts)
		s, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		if pty {
			if err := s.RequestPty("xterm", 24, 80, ssh.TerminalModes{}); err != nil {
				t.Fatal(err)
			}
		}
		out, err := s.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(cmd); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if _, serr := fmt.Sscan(line, &bg, &leader); err != nil || serr != nil {
			t.Fatalf("first line %q: %v %v", line, err, serr)
		}
		t.Cleanup(func() { _ = syscall.Kill(bg, syscall.SIGKILL); _ = syscall.Kill(leader, syscall.SIGKILL) })
		// The connection goes away while the command runs.
		_ = c.Close()
		for end := time.Now().Add(30 * time.Second); testenv.Alive(leader); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatal("the command outlived its connection by 30 s")
			}
		}
		return bg, leader
	}
	for _, pty := range []bool{false, true} {
		t.Run(fmt.Sprintf("pty=%v", pty), func(t *testing.T) {
			t.Parallel()
			bg, _ := run(t, true, pty)
			// The session's end (the command's reaping) comes before this;
			// a kill of the group would have come with it.
			time.Sleep(200 * time.Millisecond)
			if !testenv.Alive(bg) {
				t.Fatal("with KeepBackground the nohup background process ended with its connection")
			}
			bg, _ = run(t, false, pty)
			for end := time.Now().Add(30 * time.Second); testenv.Alive(bg); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(end) {
					t.Fatal("without KeepBackground the background process outlived its connection by 30 s")
				}
			}
		})
	}
	t.Run("command exits", func(t *testing.T) {
		t.Parallel()
		ts := srvStartServer(t, &ServerConfig{KeepBackground: true})
		s, err := srvDialServer(t, ts).NewSession()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		out, err := s.Output(`sleep 300 >/dev/null 2>&1 & echo $!`)
		pid, perr := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil || perr != nil {
			t.Fatalf("output %q: %v", out, err)
		}
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
		if !testenv.Alive(pid) {
			t.Fatal("with KeepBackground the background process ended with its command")
		}
	})
}
