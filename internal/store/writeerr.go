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
	// Opening is set for a failure of Open: the gateway or command that
	// opens the database does not start until the disk takes writes.
	Opening bool
	Err     error
}

func (e *WriteError) Error() string {
	dir := filepath.Dir(e.Path)
	op, fix := "write", ""
	if e.Opening {
		op = "open"
	}
	switch e.Kind {
	case "full":
		fix = "its disk is full; free space on the filesystem of " + dir + " (nothing was changed; the next write tries again)"
		if e.Opening {
			fix = "its disk is full; free space on the filesystem of " + dir + ", then start again (opening writes to the database, its -wal and -shm files)"
		}
	case "read-only":
		fix = "it or its filesystem is read-only; make it writable by the gateway's user (nothing was changed)"
		if e.Opening {
			fix = "it, its -wal or -shm file or its filesystem is read-only; make them writable by the gateway's user"
		}
	default:
		fix = "the disk failed the write; check the filesystem of " + dir + " and the kernel log (nothing was changed)"
		if e.Opening {
			fix = "the disk failed a write; check the filesystem of " + dir + " and the kernel log"
		}
	}
	return fmt.Sprintf("store: cannot %s %s: %s: %v", op, e.Path, fix, e.Err)
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

// fullBelow is the free space under which a refused write is taken for
// a full disk whatever SQLite's code: growing the -shm file on a full
// filesystem fails as "disk I/O error (4874)" (SQLITE_IOERR_SHMSIZE), and
// a gateway restarted on a full disk said only that.
const fullBelow = 64 << 10

// writeErr makes err a *WriteError when the disk refused a write: its
// class, or "full" whatever the class while path's filesystem has
// (nearly) no space left.
func writeErr(path string, err error, opening bool) error {
	kind := writeKind(err)
	if kind == "" {
		return err
	}
	if free, ferr := dirFree(filepath.Dir(path)); ferr == nil && free < fullBelow {
		kind = "full"
	}
	return &WriteError{Path: path, Kind: kind, Opening: opening, Err: err}
}

// wrote is deferred by every write: a disk's refusal becomes a
// *WriteError.
func (s *SQLite) wrote(errp *error) {
	*errp = writeErr(s.path, *errp, false)
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

// newerSchemaError is a database whose schema a newer gateway made.
type newerSchemaError struct{ have, know int }

func (e *newerSchemaError) Error() string {
	return fmt.Sprintf("schema version %d is newer than this binary (%d)", e.have, e.know)
}

// unreadable is Open's error for a database it cannot take, saying what
// to do, or nil for another failure: SQLite's "database disk image is
// malformed (11)" and "file is not a database (26)", for a database cut
// short or another file in its place (a restore's copy gone wrong), and a
// newer schema named the file but neither the backup nor the binary that
// would read it.
func unreadable(path string, err error) error {
	if ne := (*newerSchemaError)(nil); errors.As(err, &ne) {
		return fmt.Errorf("store: %s: %w: a newer gateway version has opened it; run that version (gateway version names this one's), or, to go back to this one, stop the gateway and put the state dir back from the backup taken before the upgrade", path, err)
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return nil
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return fmt.Errorf("store: %s is damaged or not a gateway database (%w): a copy cut short, or another file in its place? Stop the gateway and put the state dir back from a whole backup (gateway backup's, or the state dir a restore moved aside)", path, err)
	}
	return nil
}
