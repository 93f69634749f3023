package store

import (
	"errors"
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
