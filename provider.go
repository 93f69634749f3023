package hostgate

import (
	"context"
	"io"
	"io/fs"
	"time"
)

// Provider is a host's filesystem. Paths are the host's (absolute, or
// relative to the provider's working directory, usually home). Errors are
// *fs.PathError or *LinkError values wrapping the io/fs sentinels
// (fs.ErrNotExist, fs.ErrExist, fs.ErrPermission, ErrNotSupported), or the
// errno where the kernel's says more than those (syscall.ENOTDIR for a
// path through a file, syscall.ELOOP for one round a symlink loop, not
// fs.ErrNotExist), so errors.Is works whichever provider answers.
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
	// Mkdir creates a directory; with parents it is os.MkdirAll (no error
	// when it already exists as a directory; ENOTDIR where it, or a
	// directory on the way, is a file, where mkdir -p says EEXIST).
	Mkdir(ctx context.Context, name string, perm fs.FileMode, parents bool) error
	// Remove removes a file, a symlink or an empty directory; with
	// recursive it is rm -rf on a path that must exist, except that a
	// symlink is removed, not followed, also when named with a trailing
	// slash (as os.RemoveAll), and a name ending in "." or ".." is EINVAL.
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

// FileReader is a Provider that reads a whole file in fewer round trips
// than Open, Read and Close take: the synchronous filesystem's ReadFile
// uses it where the provider has it. A provider that wraps another should
// have it only where it forwards every call: the fast path goes around
// Open.
type FileReader interface {
	// ReadFile returns the contents of the file name, read to its end, as
	// Open and reading to EOF would; a directory fails with
	// syscall.EISDIR. progress, when not nil, is called as answers of a
	// long read arrive, so that a caller's idle timeout does not cut a
	// transfer that is moving.
	ReadFile(ctx context.Context, name string, progress func()) ([]byte, error)
}

// progressKey is the context key of WithProgress.
type progressKey struct{}

// WithProgress returns ctx carrying progress, which a Provider's call made
// with it calls as answers of a long call arrive (the pages of a directory
// listing, the names of a tree Remove removes: sshlayer's SFTP provider's
// ReadDir and Remove), so that a caller's idle
// timeout does not cut a call that is moving, as FileReader's progress
// does a read's. The synchronous filesystem passes it to every call. A
// provider need not call it; wrappers pass it on with ctx.
func WithProgress(ctx context.Context, progress func()) context.Context {
	return context.WithValue(ctx, progressKey{}, progress)
}

// ProgressOf returns the progress function ctx carries (WithProgress), or
// nil.
func ProgressOf(ctx context.Context) func() {
	f, _ := ctx.Value(progressKey{}).(func())
	return f
}

// FileWriter is a Provider that writes a whole file in fewer round trips
// than Create, Write and Close take: the synchronous filesystem's
// WriteFile uses it where the provider has it. As with FileReader, a
// wrapper should have it only where it forwards every call.
type FileWriter interface {
	// WriteFile creates name with perm (before umask) or truncates it, as
	// Create does, and writes what r yields until io.EOF. r is not read
	// after WriteFile returns. The data is complete on the host only when
	// it returns nil. progress is as for FileReader.
	WriteFile(ctx context.Context, name string, perm fs.FileMode, r io.Reader, progress func()) error
}

// TimeSetter is a Provider that sets a file's times: Upload's filesystem
// way uses it where the provider has it, so that modification times go
// with the files as they do with the tar stream. As with FileReader, a
// wrapper should have it only where it forwards every call.
type TimeSetter interface {
	// Chtimes sets the access and modification times of name, following
	// a symbolic link, as os.Chtimes; a zero time leaves that one as it
	// is. Times go to the second: what is finer may be dropped. A time
	// the provider cannot carry to the host fails with an error wrapping
	// ErrNotSupported.
	Chtimes(ctx context.Context, name string, atime, mtime time.Time) error
	// Lchtimes is Chtimes of name itself: a symbolic link's own times,
	// not its target's (as touch -h, utimensat's AT_SYMLINK_NOFOLLOW).
	// A host that cannot set a link's times (an SFTP server without
	// lsetstat@openssh.com, a touch without -h) fails with an error
	// wrapping ErrNotSupported.
	Lchtimes(ctx context.Context, name string, atime, mtime time.Time) error
}
