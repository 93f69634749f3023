package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestChildTaskLimit: commands are held to the container's soft
// RLIMIT_NPROC when it is below the hard one (the gateway's ulimit),
// counted by the first pids cgroup found; a soft limit
// at the hard one (no ulimit) bounds nothing.
func TestChildTaskLimit(t *testing.T) {
	v1, v2, none := t.TempDir(), t.TempDir(), filepath.Join(t.TempDir(), "missing")
	if err := os.WriteFile(filepath.Join(v2, "pids.current"), []byte("17\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tl := childTaskLimit(unix.Rlimit{Cur: 224, Max: 256}, []string{none, v1, v2}, none)
	if tl == nil || tl.Max != 224 || tl.Count == nil {
		t.Fatalf("soft 224, hard 256: %+v, want Max 224 and a count", tl)
	}
	if n, err := tl.Count(); n != 17 || err != nil {
		t.Errorf("Count: %d %v, want pids.current's 17", n, err)
	}
	if tl := childTaskLimit(unix.Rlimit{Cur: 14, Max: 16}, []string{none}, none); tl == nil || tl.Max != 14 || tl.Count != nil {
		t.Errorf("no pids cgroup: %+v, want Max 14 and no count", tl)
	}
	for _, lim := range []unix.Rlimit{{Cur: 96362, Max: 96362}, {Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY}, {Cur: 0, Max: 16}} {
		if tl := childTaskLimit(lim, []string{v2}, none); tl != nil {
			t.Errorf("RLIMIT_NPROC %+v: %+v, want no bound", lim, tl)
		}
	}
}

// TestChildTaskLimitLessInit: the threads of a PID 1 of another uid (a
// sandbox's deadline under a uid of its own) are in the cgroup's count
// but not in the uid's RLIMIT_NPROC, so they do not count against Max;
// those of a PID 1 of the agent's own uid do, as the kernel counts them.
func TestChildTaskLimitLessInit(t *testing.T) {
	cg := t.TempDir()
	if err := os.WriteFile(filepath.Join(cg, "pids.current"), []byte("30\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	status := filepath.Join(t.TempDir(), "status")
	for uid, want := range map[int]int{os.Getuid(): 30, os.Getuid() + 1: 21} {
		s := fmt.Sprintf("Name:\tagent\nUid:\t%d\t%d\t%d\t%d\nThreads:\t9\n", uid, uid, uid, uid)
		if err := os.WriteFile(status, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		tl := childTaskLimit(unix.Rlimit{Cur: 14, Max: 16}, []string{cg}, status)
		if n, err := tl.Count(); n != want || err != nil {
			t.Errorf("PID 1 of uid %d with 9 threads, 30 tasks: Count %d %v, want %d", uid, n, err, want)
		}
	}
}
