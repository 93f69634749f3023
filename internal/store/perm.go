package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// TightenedFile is a file of the database that Open found open to group
// or others and made its owner's alone.
type TightenedFile struct {
	Path     string
	Was, Now fs.FileMode
}

// dbFiles are the database's files: SQLite's write-ahead log, its index
// and a rollback journal sit beside it, and hold the same rows.
func dbFiles(path string) []string {
	return []string{path, path + "-wal", path + "-shm", path + "-journal"}
}

// protect creates the database file at path 0600 when there is none,
// before SQLite does (it creates it 0644 less the umask, and its WAL and
// index files with the database's mode), and takes group and others'
// permissions off any of its files that has them: the database holds
// token hashes, pinned host keys and the audit log.
func protect(path string) ([]TightenedFile, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		return nil, f.Close()
	}
	if !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("store: create %s: %w", path, err)
	}
	var done []TightenedFile
	for _, p := range dbFiles(path) {
		st, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return done, fmt.Errorf("store: %w", err)
		}
		if !st.Mode().IsRegular() || st.Mode().Perm()&0o077 == 0 {
			continue // SQLite refuses what is not a file
		}
		now := st.Mode().Perm() &^ 0o077
		if err := os.Chmod(p, now); err != nil {
			return done, fmt.Errorf("store: %s is open to group or others (%#o) and could not be made %#o: %w", p, st.Mode().Perm(), now, err)
		}
		done = append(done, TightenedFile{Path: p, Was: st.Mode().Perm(), Now: now})
	}
	return done, nil
}
