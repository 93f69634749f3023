//go:build linux

package sshlayer

import (
	"bufio"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/internal/testenv"
)

// TestPTYBackgroundJobsEnd: a terminal's shell runs job control, so a job
// it starts in the background (`sleep 300 &`) gets a process group of its
// own, which killing the shell's group misses. When the shell exits, or
// its session is dropped, the server ends every process of the terminal's
// session, as it ends a command's whole group without a terminal.
func TestPTYBackgroundJobsEnd(t *testing.T) {
	t.Parallel()
	for _, end := range []string{"exit", "drop"} {
		t.Run(end, func(t *testing.T) {
			t.Parallel()
			ts := srvStartServer(t, nil)
			c := srvDialServer(t, ts)
			s, err := c.NewSession()
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = s.Close() }()
			if err := s.RequestPty("xterm", 24, 80, ssh.TerminalModes{ssh.ECHO: 0}); err != nil {
				t.Fatal(err)
			}
			in, _ := s.StdinPipe()
			outp, _ := s.StdoutPipe()
			if err := s.Shell(); err != nil {
				t.Fatal(err)
			}
			// Both jobs in groups of their own, one with a child.
			if _, err := io.WriteString(in, "sleep 300 & echo \"job=$!\"\n(sleep 301; true) & echo \"job=$!\"\necho done\n"); err != nil {
				t.Fatal(err)
			}
			out := srvReadUntil(t, bufio.NewReader(outp), "done")
			var pids []int
			for _, m := range regexp.MustCompile(`job=(\d+)`).FindAllStringSubmatch(out, -1) {
				pid, _ := strconv.Atoi(m[1])
				pids = append(pids, pid)
				t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
			}
			if len(pids) != 2 {
				t.Fatalf("shell output %q: want two job pids", out)
			}
			for _, pid := range pids {
				if !testenv.Alive(pid) {
					t.Fatalf("job %d is not running", pid)
				}
			}
			if end == "exit" {
				if _, err := io.WriteString(in, "exit\n"); err != nil {
					t.Fatal(err)
				}
				_ = s.Wait()
			} else {
				_ = c.Close()
			}
			for _, pid := range pids {
				for i := 0; testenv.Alive(pid); i++ {
					if i == 300 { // 30 s
						t.Fatalf("job %d outlived its terminal's shell (%s)", pid, end)
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
		})
	}
}

// TestJobControlBackgroundEnds: without a terminal too, a shell that turns
// job control on (`set -m`) puts its background jobs in groups of their
// own; they end with the command, as the rest of its group does.
func TestJobControlBackgroundEnds(t *testing.T) {
	t.Parallel()
	// bash: dash turns job control on only on a terminal.
	_, err := exec.LookPath("bash")
	testenv.RequirePeer(t, "bash", err == nil)
	ts := srvStartServer(t, nil)
	c := srvDialServer(t, ts)
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	out, err := s.Output(`bash -c 'set -m; sleep 300 >/dev/null 2>&1 & echo $!'`)
	if err != nil {
		t.Fatalf("%v (output %q)", err, out)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("output %q", out)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	for i := 0; testenv.Alive(pid); i++ {
		if i == 300 { // 30 s
			t.Fatal("a job in a group of its own outlived its command")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
