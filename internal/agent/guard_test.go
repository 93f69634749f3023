package agent

import (
	"errors"
	"os"
	"os/exec"
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
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	g, err := StartGuard(exe)
	if err != nil {
		t.Fatal(err)
	}
	doomed := startGroup(t, "sleep 300 & sleep 301")
	kept := startGroup(t, "sleep 302 & sleep 303")
	g.Track(doomed.Process.Pid, true)
	g.Track(kept.Process.Pid, true)
	g.Track(kept.Process.Pid, false)
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	err = doomed.Wait()
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
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	g, err := StartGuard(exe)
	if err != nil {
		t.Fatal(err)
	}
	_ = g.cmd.Process.Kill()
	_ = g.cmd.Wait()
	for i := range 10_000 { // more than a pipe buffer of lines
		g.Track(1000+i, true)
	}
	_ = g.Close() // its process is already reaped: only the pipe to close
}
