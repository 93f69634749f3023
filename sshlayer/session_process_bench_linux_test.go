package sshlayer

import (
	"bufio"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// startBystanders starts n sleeping processes, each a session of its own,
// so that a scan of /proc sees a machine with a few hundred processes;
// they are killed when the benchmark ends.
func startBystanders(b *testing.B, n int) {
	b.Helper()
	for range n {
		cmd := exec.Command("sleep", "300")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
}

// BenchmarkKillSession: a command that exited leaving 8 background
// processes, among 300 others, on the /proc listing path: the scan,
// the kills and the waits, per command.
func BenchmarkKillSession(b *testing.B) {
	defer func(old int) { maxPIDProbe = old }(maxPIDProbe)
	maxPIDProbe = -1 // always list /proc, as on a busy machine
	startBystanders(b, 300)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		cmd := exec.Command("sh", "-c", "for i in 1 2 3 4 5 6 7 8; do sleep 300 & done; echo started")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
			b.Fatal(err)
		}
		leader := cmd.Process.Pid
		waitExited(leader)
		b.StartTimer()
		killSession(leader, leader, 30*time.Second)
		b.StopTimer()
		_ = cmd.Wait()
		b.StartTimer()
	}
}
