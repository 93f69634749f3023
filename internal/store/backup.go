package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
)

// Backup writes a consistent copy of the database at path to dst (a new
// file, 0600) with VACUUM INTO, while a gateway may be writing to it: in
// WAL mode the copy is one read transaction, which writers do not wait
// for. It neither creates nor migrates the database at path.
func Backup(ctx context.Context, path, dst string) (err error) {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("store: backup: %w", err)
	}
	// VACUUM INTO takes an empty file: made here, so it is 0600 from
	// the start and a dst that exists is refused, never overwritten.
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("store: backup: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("store: backup: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(dst)
		}
	}()
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Set("mode", "rw") // never create path
	db, err := sql.Open("sqlite", fileURI(path)+"?"+q.Encode())
	if err != nil {
		return fmt.Errorf("store: backup %s: %w", path, err)
	}
	defer func() { err = errors.Join(err, db.Close()) }()
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, dst); err != nil {
		if we := writeErr(dst, err, false); we != err {
			return we
		}
		return fmt.Errorf("store: backup %s into %s: %w", path, dst, err)
	}
	return nil
}
