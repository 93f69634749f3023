package agent

import (
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
	tl := childTaskLimit(unix.Rlimit{Cur: 224, Max: 256}, []string{none, v1, v2})
	if tl == nil || tl.Max != 224 || tl.Count == nil {
		t.Fatalf("soft 224, hard 256: %+v, want Max 224 and a count", tl)
	}
	if n, err := tl.Count(); n != 17 || err != nil {
		t.Errorf("Count: %d %v, want pids.current's 17", n, err)
	}
	if tl := childTaskLimit(unix.Rlimit{Cur: 14, Max: 16}, []string{none}); tl == nil || tl.Max != 14 || tl.Count != nil {
		t.Errorf("no pids cgroup: %+v, want Max 14 and no count", tl)
	}
	for _, lim := range []unix.Rlimit{{Cur: 96362, Max: 96362}, {Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY}, {Cur: 0, Max: 16}} {
		if tl := childTaskLimit(lim, []string{v2}); tl != nil {
			t.Errorf("RLIMIT_NPROC %+v: %+v, want no bound", lim, tl)
		}
	}
}
