//go:build unix

package bench

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	// A real first line (this machine): user nice system idle iowait irq
	// softirq steal guest guest_nice.
	in := "cpu  3278063 9176 2037870 3839206 81167 0 230554 4575 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n"
	got, err := parseProcStat([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(3278063 + 9176 + 2037870 + 0 + 230554); got != want {
		t.Fatalf("busy = %d, want %d (idle, iowait and steal left out)", got, want)
	}
	for _, bad := range []string{"", "intr 1 2 3", "cpu 1 2 3", "cpu a b c d e f g h i j"} {
		if _, err := parseProcStat([]byte(bad)); !errors.Is(err, ErrProcFormat) {
			t.Errorf("%q: err = %v, want ErrProcFormat", bad, err)
		}
	}
}

func TestParsePidStat(t *testing.T) {
	// A command name with a space and a parenthesis; utime 17, stime 5.
	in := "4242 (a) b) S 1 4242 4242 0 -1 4194560 1066 0 0 0 17 5 0 0 20 0 1 0 12345 1 2"
	st, err := parsePidStat([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if st != (pidStat{ppid: 1, ticks: 22, start: 12345}) {
		t.Fatalf("parsed %+v; want ppid 1, utime+stime 22, start 12345", st)
	}
	const tail = " 0 0 20 0 1 0 12345 1 2"
	for _, bad := range []string{"", "4242 no name", "4242 (x) S 1 2", "4242 (x) S 1 4242 4242 0 -1 0 0 0 0 0 u s" + tail,
		"4242 (x) S p 4242 4242 0 -1 0 0 0 0 0 1 2" + tail, "4242 (x) S -1 4242 4242 0 -1 0 0 0 0 0 1 2" + tail,
		"4242 (x) S 1 4242 4242 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 t 1 2", "4242 (x) S 1 4242 4242 0 -1 0 0 0 0 0 1 2 0 0 20 0 1"} {
		if _, err := parsePidStat([]byte(bad)); !errors.Is(err, ErrProcFormat) {
			t.Errorf("%q: err = %v, want ErrProcFormat", bad, err)
		}
	}
}

// TestCPUMeterAgreesWithRusage: this process spins until getrusage says it
// used 200 ms more CPU, and the meter's reading of /proc for it agrees with
// getrusage to within two clock ticks (each rounds to its own unit). The
// spin is bounded by CPU time, not wall time, so a loaded machine only
// makes it slower.
func TestCPUMeterAgreesWithRusage(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	used := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	m, err := StartCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	start := used()
	x := 0
	for deadline := time.Now().Add(30 * time.Second); used()-start < 200*time.Millisecond; x++ {
		if time.Now().After(deadline) {
			t.Fatalf("200 ms of CPU not used in 30 s (x=%d)", x)
		}
	}
	want := used() - start
	machine, procs, err := m.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if d := procs[0] - want; d < -2*clockTick || d > 2*clockTick {
		t.Fatalf("meter says this process used %v, getrusage %v", procs[0], want)
	}
	if machine < procs[0]-2*clockTick {
		t.Fatalf("machine CPU %v is less than the process's %v", machine, procs[0])
	}
}

// FuzzParsePidStat: whatever the command name holds (spaces, parentheses,
// digits), the times after it are read.
func FuzzParsePidStat(f *testing.F) {
	f.Add("init", uint32(17), uint32(5))
	f.Add("a) b (c", uint32(0), uint32(1))
	f.Add(") S 1 2 3 4 5 6 7 8 9 10 11 12 13", uint32(1<<31), uint32(7))
	f.Fuzz(func(t *testing.T, comm string, utime, stime uint32) {
		parent := int(utime % 4194304) // any pid; pid_max is at most 2^22
		start := uint64(stime) << 7
		in := fmt.Sprintf("42 (%s) S %d 42 42 0 -1 4194560 1066 0 0 0 %d %d 0 0 20 0 1 0 %d 1 2", comm, parent, utime, stime, start)
		want := pidStat{ppid: parent, ticks: uint64(utime) + uint64(stime), start: start}
		if got, err := parsePidStat([]byte(in)); err != nil || got != want {
			t.Fatalf("%q: %+v, %v; want %+v", in, got, err, want)
		}
	})
}

// FuzzParseProcStat: the busy sum is user+nice+system+irq+softirq for any
// values, and other lines after the first change nothing.
func FuzzParseProcStat(f *testing.F) {
	f.Add(uint32(1), uint32(2), uint32(3), uint32(4), uint32(5), uint32(6), uint32(7), uint32(8), "cpu0 9 9 9")
	f.Add(uint32(1<<31), uint32(0), uint32(1<<31), uint32(0), uint32(0), uint32(1<<31), uint32(1<<31), uint32(9), "")
	f.Fuzz(func(t *testing.T, user, nice, system, idle, iowait, irq, softirq, steal uint32, rest string) {
		in := fmt.Sprintf("cpu  %d %d %d %d %d %d %d %d 0 0\n%s", user, nice, system, idle, iowait, irq, softirq, steal, strings.ReplaceAll(rest, "\x00", ""))
		want := uint64(user) + uint64(nice) + uint64(system) + uint64(irq) + uint64(softirq)
		got, err := parseProcStat([]byte(in))
		if err != nil || got != want {
			t.Fatalf("%q: %d, %v; want %d", in, got, err, want)
		}
	})
}

// TestDescendants: a shell with two sleeping children and a grandchild
// (a subshell's sleep); Descendants of the shell finds all of them, and
// nothing of this test process's other children.
func TestDescendants(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	cmd := exec.Command("sh", "-c", "sleep 30 & (sleep 31; :) & sleep 32; wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}()
	comm := func(pid int) string {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		return strings.TrimSpace(string(b))
	}
	// Up to 200 looks, 10 ms apart: the shell forks as it reads its line.
	var got []int
	for range 200 {
		var err error
		if got, err = Descendants(cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
		sleeps := 0
		for _, p := range got {
			if comm(p) == "sleep" {
				sleeps++
			}
		}
		if sleeps == 3 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	var names []string
	for _, p := range got {
		names = append(names, comm(p))
	}
	// The subshell is a child and its sleep a grandchild: four below sh.
	if len(got) != 4 || strings.Count(strings.Join(names, " "), "sleep") != 3 {
		t.Fatalf("descendants of sh: %v %v, want 3 sleeps and the subshell", got, names)
	}
	leaf := got[slices.Index(names, "sleep")]
	none, err := Descendants(leaf)
	if err != nil || len(none) != 0 {
		t.Fatalf("descendants of a leaf: %v, %v; want none", none, err)
	}
}
