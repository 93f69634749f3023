package agent

import (
	"os/exec"
	"syscall"
	"testing"
)

// BenchmarkKillSessionsScan: the guard's scan on a machine with 300
// processes besides this one's, none of them in a tracked session (the
// agent stopped its commands before its guard ended).
func BenchmarkKillSessionsScan(b *testing.B) {
	for range 300 {
		cmd := exec.Command("sleep", "300")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
	// A session id no process holds: pid 1's children never get it.
	live := map[int]bool{1 << 30: true}
	for b.Loop() {
		killSessions(live)
	}
}
