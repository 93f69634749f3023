//go:build linux

package agent

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// TestGuardKillsTerminalJobs: a command with a terminal is a session of
// its own (the tracked group's id is the session's), and its shell's
// background jobs run in groups of their own within it. The guard of a
// killed agent ends them too, not only the tracked group.
func TestGuardKillsTerminalJobs(t *testing.T) {
	g := startTestGuard(t)
	// set -m: job control, as a shell on a terminal runs it.
	// The terminal's shell reports the job's pid on a pipe of its own.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command("sh", "-c", "set -m; sleep 300 & echo $! >&3; sleep 301")
	cmd.ExtraFiles = []*os.File{w}
	tty, err := pty.StartWithAttrs(cmd, nil, &syscall.SysProcAttr{Setsid: true, Setctty: true})
	_ = w.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	go func() { _, _ = io.Copy(io.Discard, tty) }()
	sid := cmd.Process.Pid
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	job, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("job pid %q", line)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-sid, syscall.SIGKILL)
		_ = syscall.Kill(job, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	if pgid, _ := syscall.Getpgid(job); pgid != job {
		t.Fatalf("job %d is in group %d, want a group of its own", job, pgid)
	}
	g.Track(sid, true)
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for groupAlive(job) {
		if time.Now().After(deadline) {
			t.Fatal("a job of the tracked terminal's session survived the guard")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
