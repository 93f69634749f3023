package agent

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseGuardLine(t *testing.T) {
	for line, want := range map[string]int{"+123": 123, "-77": -77, "+2": 2} {
		if got, err := parseGuardLine(line); err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", line, got, err, want)
		}
	}
	for _, bad := range []string{"", "+", "123", "+0", "+1", "--5", "+-5", "++5", "+x", "+5 ", "*5", "+99999999999999999999"} {
		if _, err := parseGuardLine(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func FuzzParseGuardLine(f *testing.F) {
	for _, s := range []string{"+123", "-1", "+0", "--5", "+99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		n, err := parseGuardLine(line)
		if err != nil {
			return
		}
		// Never a group the guard must not kill: 0 (its own), 1, or -1
		// (every process).
		if n > -2 && n < 2 {
			t.Fatalf("%q parsed to %d", line, n)
		}
	})
}

// startGroup starts `sh -c script` in its own process group and returns
// it; the test kills the group at cleanup whatever happens.
func startGroup(t *testing.T, script string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL); _ = cmd.Wait() })
	return cmd
}

// groupAlive reports whether any process of group pgid is alive (zombies
// excluded).
func groupAlive(pgid int) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:]) // state ppid pgrp …
		if len(f) > 2 && f[0] != "Z" && f[2] == strconv.Itoa(pgid) {
			return true
		}
	}
	return false
}

// TestGuardKillsTrackedGroupsAtEOF: when the agent's end of the pipe
// closes without removing a group (the agent was killed), the guard kills
// the whole group, background children included; a group the agent
// removed is left alone.
func TestGuardKillsTrackedGroupsAtEOF(t *testing.T) {
	g := startTestGuard(t)
	doomed := startGroup(t, "sleep 300 & sleep 301")
	kept := startGroup(t, "sleep 302 & sleep 303")
	g.Track(doomed.Process.Pid, true)
	g.Track(kept.Process.Pid, true)
	g.Track(kept.Process.Pid, false)
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	err := doomed.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("tracked group leader: %v, want killed by SIGKILL", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for groupAlive(doomed.Process.Pid) {
		if time.Now().After(deadline) {
			t.Fatal("a background child of the tracked group survived the guard")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !groupAlive(kept.Process.Pid) {
		t.Fatal("the guard killed a group the agent had removed")
	}
}

// TestGuardGone: an agent whose guard died keeps serving: Track does not
// block or fail.
func TestGuardGone(t *testing.T) {
	g := startTestGuard(t)
	_ = g.cmd.Process.Kill()
	_ = g.cmd.Wait()
	for i := range 10_000 { // more than a pipe buffer of lines
		g.Track(1000+i, true)
	}
	_ = g.Close() // its process is already reaped: only the pipe to close
}

func TestParseGuardDir(t *testing.T) {
	for line, want := range map[string]bool{"+/tmp/ssh-abc": true, "-/tmp/x/ssh-1": false} {
		if dir, made, err := parseGuardDir(line); err != nil || made != want || dir != line[1:] {
			t.Errorf("%q: %q %v %v; want %q %v", line, dir, made, err, line[1:], want)
		}
	}
	for _, bad := range []string{"", "+", "/tmp/ssh-a", "+tmp/ssh-a", "+/tmp/x", "+/", "+/tmp/ssh-a/..", "+/tmp/../ssh-a/", "*/tmp/ssh-a", "+/tmp//ssh-a"} {
		if _, _, err := parseGuardDir(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func FuzzParseGuardDir(f *testing.F) {
	for _, s := range []string{"+/tmp/ssh-abc", "-/tmp/x/ssh-1", "+/", "+/tmp/../ssh-a", "+ssh-a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		dir, _, err := parseGuardDir(line)
		if err != nil {
			return
		}
		// Only a forwarded agent's directory, named plainly: the guard
		// removes it whole.
		if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir || !strings.HasPrefix(filepath.Base(dir), "ssh-") {
			t.Fatalf("%q parsed to %q", line, dir)
		}
	})
}

// TestGuardRemovesTrackedDirsAtEOF: when the agent is killed during an
// ssh -A session, its guard removes the forwarded agent's socket
// directory, which the session's own cleanup would have; one the agent
// removed itself, or one not named as such a directory, is left alone. A
// soak's 7 SIGKILLs of an agent left 6 such directories in its TMPDIR.
func TestGuardRemovesTrackedDirsAtEOF(t *testing.T) {
	g := startTestGuard(t)
	tmp := t.TempDir()
	mk := func(name string) string {
		dir := filepath.Join(tmp, name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "agent.1"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	left, removed, other := mk("ssh-left"), mk("ssh-removed"), mk("other")
	g.TrackDir(left, true)
	g.TrackDir(removed, true)
	g.TrackDir(removed, false)
	g.TrackDir(other, true) // not sent: not a forwarded agent's directory
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(left); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s after the agent's end: %v, want it removed", left, err)
	}
	for _, dir := range []string{removed, other} {
		if _, err := os.Lstat(filepath.Join(dir, "agent.1")); err != nil {
			t.Errorf("%s: %v, want it left alone", dir, err)
		}
	}
}

// startTestGuard starts a guard process from this test binary, which
// TestMain lets run as one.
func startTestGuard(t *testing.T) *Guard {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	g, err := StartGuard(exe)
	if err != nil {
		t.Fatal(err)
	}
	return g
}
