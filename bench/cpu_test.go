package bench

import (
	"errors"
	"os"
	"runtime"
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
	if want := uint64(3278063 + 9176 + 2037870 + 0 + 230554 + 4575); got != want {
		t.Fatalf("busy = %d, want %d (idle and iowait left out)", got, want)
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
	got, err := parsePidStat([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if got != 22 {
		t.Fatalf("utime+stime = %d, want 22", got)
	}
	for _, bad := range []string{"", "4242 no name", "4242 (x) S 1 2", "4242 (x) S 1 4242 4242 0 -1 0 0 0 0 0 u s"} {
		if _, err := parsePidStat([]byte(bad)); !errors.Is(err, ErrProcFormat) {
			t.Errorf("%q: err = %v, want ErrProcFormat", bad, err)
		}
	}
}

// TestCPUMeterSeesBusyProcess: a goroutine spinning for 200 ms shows up in
// this process's CPU time and the machine's, and nowhere near the meter's
// resolution of one clock tick.
func TestCPUMeterSeesBusyProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	m, err := StartCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); {
		x++
	}
	machine, procs, err := m.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if procs[0] < 100*time.Millisecond {
		t.Fatalf("process CPU %v after spinning 200 ms (x=%d)", procs[0], x)
	}
	if machine < procs[0]-2*clockTick {
		t.Fatalf("machine CPU %v is less than the process's %v", machine, procs[0])
	}
}

func FuzzParseProcStat(f *testing.F) {
	f.Add([]byte("cpu  1 2 3 4 5 6 7 8 9 10\n"))
	f.Add([]byte("cpu 18446744073709551615 1 2 3 4 5 6 7"))
	f.Fuzz(func(t *testing.T, b []byte) { _, _ = parseProcStat(b) })
}

func FuzzParsePidStat(f *testing.F) {
	f.Add([]byte("1 (init) S 0 1 1 0 -1 4194560 1066 0 0 0 17 5 0 0 20 0 1 0 3 1 2"))
	f.Add([]byte("1 ()) S"))
	f.Fuzz(func(t *testing.T, b []byte) { _, _ = parsePidStat(b) })
}
