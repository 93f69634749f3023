package store

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fillDisk makes every write that needs a new page fail as a full disk
// fails it: SQLite's max_page_count refuses with SQLITE_FULL, the code
// ENOSPC gives. The pragma is per connection, so the pool keeps one.
func fillDisk(t *testing.T, s *SQLite) {
	t.Helper()
	s.db.SetMaxOpenConns(1)
	var pages int
	if err := s.db.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(`PRAGMA max_page_count = ` + itoa(pages)); err != nil {
		t.Fatal(err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestFullDiskNamesTheFile: a write to a database whose disk is full
// failed with SQLite's "database or disk is full (13)", which names
// neither the file nor what to do. It is a *WriteError naming both, and
// CheckWrite (readiness) sees it while reads still work.
func TestFullDiskNamesTheFile(t *testing.T) {
	s, path := openTemp(t)
	ctx := t.Context()
	if err := s.CheckWrite(ctx); err != nil {
		t.Fatalf("write probe of a healthy store: %v", err)
	}
	fillDisk(t, s)
	var err error
	for i := 0; i < 10000 && err == nil; i++ {
		err = s.RecordSession(ctx, Session{Time: time.Now(), TokenName: strings.Repeat("t", 500), HostID: "h", Kind: "ssh"})
	}
	var we *WriteError
	if !errors.As(err, &we) || we.Kind != "full" {
		t.Fatalf("a write to a full database: %v, want a *WriteError of kind full", err)
	}
	if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, "free space") {
		t.Errorf("error %q names neither the file %s nor what to do", msg, path)
	}
	if err := s.CheckWrite(ctx); !errors.As(err, &we) {
		t.Errorf("write probe of a full store: %v, want a *WriteError", err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Errorf("reads stop too: %v", err)
	}
	if _, err := s.db.Exec(`PRAGMA max_page_count = 1000000`); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckWrite(ctx); err != nil {
		t.Errorf("write probe after space came back: %v", err)
	}
}

// TestOpenOnFullDiskSaysSo: a gateway restarted on a full state disk
// failed to start with "store: migrate …/gateway.db: disk I/O error
// (4874)", SQLite's code for a -shm file it could not grow, which names
// neither the full disk nor what to do (found by the audit32 audit). A
// write Open cannot make is a *WriteError that says so, "full" whatever
// SQLite's code while the filesystem has no space left. A -shm that is a
// directory stands in for the full disk: the open's first write fails.
func TestOpenOnFullDiskSaysSo(t *testing.T) {
	s, path := openTemp(t)
	_ = s.Close()
	for _, f := range []string{path + "-wal", path + "-shm"} {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(path+"-shm", 0o700); err != nil {
		t.Fatal(err)
	}
	defer func(f func(string) (uint64, error)) { dirFree = f }(dirFree)
	for _, c := range []struct {
		free uint64
		kind string
		says string
	}{{0, "full", "its disk is full; free space on the filesystem of " + filepath.Dir(path)}, {1 << 30, "read-only", "make them writable"}} {
		dirFree = func(string) (uint64, error) { return c.free, nil }
		_, err := Open(t.Context(), path)
		var we *WriteError
		if !errors.As(err, &we) || !we.Opening || we.Kind != c.kind {
			t.Fatalf("open with %d bytes free: %v, want a *WriteError of kind %s", c.free, err, c.kind)
		}
		if msg := err.Error(); !strings.Contains(msg, "cannot open "+path) || !strings.Contains(msg, c.says) {
			t.Errorf("open with %d bytes free: %q, want the file and %q", c.free, msg, c.says)
		}
	}
}
