package sshlayer

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
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
		mark := markPIDs()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
			b.Fatal(err)
		}
		leader := cmd.Process.Pid
		waitExited(leader)
		b.StartTimer()
		killSession(leader, leader, mark, 30*time.Second)
		b.StopTimer()
		_ = cmd.Wait()
		b.StartTimer()
	}
}

// countingWriter counts the writes it is given: each is an SSH packet
// the channel sends, and a message at every hop of a gateway path.
type countingWriter struct{ writes, bytes int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	w.bytes += int64(len(p))
	return len(p), nil
}

// BenchmarkCopyOutput: 64 MiB out of `head -c` (4 KiB writes) through
// copyOutput, with and without coalescing; writes/MiB is what the channel
// is given. On an idle machine the copy rarely outruns head and both are
// near 32 per MiB; run it beside a load to see the coalescing.
func BenchmarkCopyOutput(b *testing.B) {
	const size = 64 << 20
	for _, bc := range []struct {
		name string
		wait time.Duration
	}{{"coalesce", coalesceWait}, {"none", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(size)
			var w countingWriter
			var before, after syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
			for range b.N {
				cmd := exec.Command("head", "-c", strconv.Itoa(size), "/dev/zero")
				r, pw, err := os.Pipe()
				if err != nil {
					b.Fatal(err)
				}
				cmd.Stdout = pw
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				_ = pw.Close()
				copyOutput(&w, r, bc.wait, &outputWake{})
				_ = r.Close()
				if err := cmd.Wait(); err != nil {
					b.Fatal(err)
				}
			}
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
			cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
			if w.bytes != int64(b.N)*size {
				b.Fatalf("copied %d bytes, want %d", w.bytes, int64(b.N)*size)
			}
			b.ReportMetric(float64(w.writes)/float64(w.bytes>>20), "writes/MiB")
			b.ReportMetric(float64(cpu.Microseconds())/float64(w.bytes>>20), "cpu-µs/MiB")
		})
	}
}
