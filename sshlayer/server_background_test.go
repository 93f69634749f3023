package sshlayer

import (
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
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
		if !srvAlive(pid) {
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
		if srvAlive(pid) {
			t.Fatal("without LeaveBackground the background process outlived its command")
		}
	})
}
