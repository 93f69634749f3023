package dockerhost

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestLocalStoreSweepsOnlyItsDir: a checkpoint dir whose path holds a
// glob pattern's characters has its own leftovers swept, and no other
// directory's. The sweep globbed Dir/*.partial, so for a dir "cp[1]" it
// removed an old partial file and an orphan tar of "cp1", a directory of
// someone else's, and left its own.
func TestLocalStoreSweepsOnlyItsDir(t *testing.T) {
	base := t.TempDir()
	dir, other := filepath.Join(base, "cp[1]"), filepath.Join(base, "cp1")
	long := time.Now().Add(-time.Hour)
	leftovers := func(d string) []string {
		t.Helper()
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		partial := filepath.Join(d, newCheckpointID()+".tar.123.partial")
		orphan := filepath.Join(d, newCheckpointID()+".tar")
		for _, n := range []string{partial, orphan} {
			if err := os.WriteFile(n, []byte("half"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(n, long, long); err != nil {
				t.Fatal(err)
			}
		}
		return []string{partial, orphan}
	}
	mine, theirs := leftovers(dir), leftovers(other)
	if _, err := NewLocalStore(dir); err != nil {
		t.Fatal(err)
	}
	for _, n := range mine {
		if _, err := os.Stat(n); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the store's own leftover %s: %v, want it removed", n, err)
		}
	}
	for _, n := range theirs {
		if _, err := os.Stat(n); err != nil {
			t.Errorf("another directory's file %s: %v, want it kept", n, err)
		}
	}
}

// TestSweepSpoolOnlyItsDir: the output spool's sweep at a host's start
// removes a killed run's spool files in its own directory, and none of
// another's: it globbed Dir/output-*, so for a dir "out[1]" it removed
// "out1"'s files and left its own.
func TestSweepSpoolOnlyItsDir(t *testing.T) {
	base := t.TempDir()
	dir, other := filepath.Join(base, "out[1]"), filepath.Join(base, "out1")
	left := func(d string) string {
		t.Helper()
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		f, err := os.CreateTemp(d, outputSpoolPattern)
		if err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
		return f.Name()
	}
	mine, theirs := left(dir), left(other)
	sweepSpool(dir)
	if _, err := os.Stat(mine); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the spool's own leftover %s: %v, want it removed", mine, err)
	}
	if _, err := os.Stat(theirs); err != nil {
		t.Errorf("another directory's file %s: %v, want it kept", theirs, err)
	}
}
