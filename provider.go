package hostgate

import (
	"context"
	"io"
	"io/fs"
)

// Provider is a host's filesystem. Paths are the host's (absolute, or
// relative to the provider's working directory, usually home). Errors are
// *fs.PathError or *LinkError values wrapping the io/fs sentinels
// (fs.ErrNotExist, fs.ErrExist, fs.ErrPermission, ErrNotSupported) so
// errors.Is works whichever provider answers.
type Provider interface {
	Stat(ctx context.Context, name string) (fs.FileInfo, error)
	Lstat(ctx context.Context, name string) (fs.FileInfo, error)
	// ReadDir lists a directory sorted by name, without "." and "..".
	ReadDir(ctx context.Context, name string) ([]fs.DirEntry, error)
	// Open streams a file's contents. The caller must Close the reader.
	Open(ctx context.Context, name string) (io.ReadCloser, error)
	// Create creates or truncates a file with perm (before umask) and
	// streams into it. The data is complete on the host only when Close
	// returns nil.
	Create(ctx context.Context, name string, perm fs.FileMode) (io.WriteCloser, error)
	// Mkdir creates a directory; with parents it is mkdir -p (no error when
	// it already exists as a directory).
	Mkdir(ctx context.Context, name string, perm fs.FileMode, parents bool) error
	// Remove removes a file, a symlink or an empty directory; with
	// recursive it is rm -rf on a path that must exist.
	Remove(ctx context.Context, name string, recursive bool) error
	// Rename moves oldname to newname, replacing a file at newname.
	Rename(ctx context.Context, oldname, newname string) error
	// Symlink creates newname as a symbolic link to oldname.
	Symlink(ctx context.Context, oldname, newname string) error
	Readlink(ctx context.Context, name string) (string, error)
	// Realpath resolves name to an absolute path without symlinks.
	Realpath(ctx context.Context, name string) (string, error)
	Chmod(ctx context.Context, name string, mode fs.FileMode) error
}

// LinkError records an error during a rename or symlink, like os.LinkError.
type LinkError struct {
	Op  string
	Old string
	New string
	Err error
}

func (e *LinkError) Error() string { return e.Op + " " + e.Old + " " + e.New + ": " + e.Err.Error() }
func (e *LinkError) Unwrap() error { return e.Err }
