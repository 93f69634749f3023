package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// WriteError is a write the state database's disk refused: full,
// read-only, or failing. It names the database file and what to do, where
// SQLite's own message ("database or disk is full (13)") names neither.
type WriteError struct {
	Path string // the database file
	Kind string // "full", "read-only" or "i/o"
	Err  error
}

func (e *WriteError) Error() string {
	dir := filepath.Dir(e.Path)
	switch e.Kind {
	case "full":
		return fmt.Sprintf("store: cannot write %s: its disk is full; free space on the filesystem of %s (nothing was changed; the next write tries again): %v", e.Path, dir, e.Err)
	case "read-only":
		return fmt.Sprintf("store: cannot write %s: it or its filesystem is read-only; make it writable by the gateway's user (nothing was changed): %v", e.Path, e.Err)
	}
	return fmt.Sprintf("store: cannot write %s: the disk failed the write; check the filesystem of %s and the kernel log (nothing was changed): %v", e.Path, dir, e.Err)
}

func (e *WriteError) Unwrap() error { return e.Err }

// writeKind classifies err as a disk's refusal of a write, or "".
func writeKind(err error) string {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return ""
	}
	switch se.Code() & 0xff { // the primary code of an extended one
	case sqlite3.SQLITE_FULL:
		return "full"
	case sqlite3.SQLITE_READONLY:
		return "read-only"
	case sqlite3.SQLITE_IOERR:
		return "i/o"
	}
	return ""
}

// wrote is deferred by every write: a disk's refusal becomes a
// *WriteError.
func (s *SQLite) wrote(errp *error) {
	if kind := writeKind(*errp); kind != "" {
		*errp = &WriteError{Path: s.path, Kind: kind, Err: *errp}
	}
}

// probeID is the row the write probe inserts and deletes in one
// transaction: never visible to a reader.
const probeID = "hostgate-readiness-probe"

// probeBytes is the size of the probe's row: big enough to need pages the
// database does not have free (a row of a few bytes fits in a page it
// has, and passed on a disk where the audit log's inserts failed), small
// enough to write every few seconds.
const probeBytes = 64 << 10

// CheckWrite implements Store: it writes (a row of the tombstone table,
// inserted and deleted in one transaction, so it leaves nothing), because
// a full disk fails writes while reads go on.
func (s *SQLite) CheckWrite(ctx context.Context) (err error) {
	defer s.wrote(&err)
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: write probe: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO gone_executions (id, at_ms) VALUES (? || zeroblob(?), 0)`, probeID, probeBytes); err != nil {
		return fmt.Errorf("store: write probe: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM gone_executions WHERE id = ? || zeroblob(?)`, probeID, probeBytes); err != nil {
		return fmt.Errorf("store: write probe: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: write probe: %w", err)
	}
	return nil
}
