package sshlayer

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWaitGroupGoneBothScans: both ways of finding the group's members
// (probing the pids allocated since the leader, and listing /proc when that
// range is long) wait for a background member the leader left behind.
func TestWaitGroupGoneBothScans(t *testing.T) {
	defer func(old int) { maxPIDProbe = old }(maxPIDProbe)
	for _, probe := range []int{1 << 30, -1} { // -1: always list /proc
		maxPIDProbe = probe
		cmd := exec.Command("sh", "-c", "sleep 1 & echo $!")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		bg, err := strconv.Atoi(strings.TrimSpace(line))
		if err != nil {
			t.Fatalf("background pid %q: %v", line, err)
		}
		leader := cmd.Process.Pid
		waitExited(leader)
		waitGroupGone(leader, leader, 30*time.Second)
		// bg was reparented; a zombie its new parent has not reaped yet
		// counts as gone.
		if st, err := os.ReadFile("/proc/" + strconv.Itoa(bg) + "/stat"); err == nil {
			if state, _, ok := parseProcStat(st); ok && state != 'Z' && state != 'X' {
				t.Errorf("probe limit %d: background pid %d still running (%c) after waitGroupGone", probe, bg, state)
			}
		}
		_ = cmd.Wait()
	}
}
