//go:build unix

package sshlayer

import (
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

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
		if took > 10*time.Second {
			t.Fatalf("exit status took %v: it waited for the background process", took)
		}
	})
	t.Run("writer holding the output", func(t *testing.T) {
		// Not a timing assertion: without the drain grace Output would wait
		// 300 s for the background sleep to close stdout.
		_, took := run(t, true, `sleep 300 & echo $!`)
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
