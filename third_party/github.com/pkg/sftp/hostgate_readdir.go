package sftp

import (
	"errors"
	"fmt"
)

// hostgate: change 36 (HOSTGATE.md). What ReadDir takes of one directory's
// listing: a server lists until it answers EOF, and one that never does
// (a hostile host, a broken server repeating itself) had the client
// collect entries until the process ran out of memory. Vars, not consts,
// so that tests can reach them without a million entries.
var (
	// maxReadDirEntries bounds the names a listing may send, "." and ".."
	// and empty replies included (each of those counts one): a
	// directory of a million files is rare, and larger ones are better
	// walked by other means than one list in memory.
	maxReadDirEntries = 1 << 20

	// maxReadDirBytes bounds the bytes of the entries ReadDir keeps
	// (names and attributes as sent; the long names it drops are not
	// counted): a million names of 100 bytes fit, a few names of 256 KiB
	// each repeated do not.
	maxReadDirBytes = 256 << 20
)

// ErrReadDirTooLarge is what ReadDir's error matches when a listing went
// past its bound.
var ErrReadDirTooLarge = errors.New("sftp: directory listing too large")

// dirBudget counts a listing against the bounds.
type dirBudget struct {
	dir            string
	entries, bytes int
}

// take counts entries names of bytes bytes, and fails past either bound,
// naming the directory and the bound.
func (b *dirBudget) take(entries, bytes int) error {
	b.entries += entries
	b.bytes += bytes
	switch {
	case b.entries > maxReadDirEntries:
		return fmt.Errorf("%w: read directory %s: the server listed more than %d entries, the most one ReadDir takes (a directory that large, or a server that lists it for ever)",
			ErrReadDirTooLarge, b.dir, maxReadDirEntries)
	case b.bytes > maxReadDirBytes:
		return fmt.Errorf("%w: read directory %s: the server listed more than %d MiB of names and attributes, the most one ReadDir takes (a directory that large, or a server that lists it for ever)",
			ErrReadDirTooLarge, b.dir, maxReadDirBytes>>20)
	}
	return nil
}
