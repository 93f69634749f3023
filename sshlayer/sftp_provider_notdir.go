package sshlayer

import (
	"context"
	"errors"
	"io/fs"
	"path"
	"syscall"

	"github.com/hostgate/hostgate"
)

// notDir is err, a call's that looked up names, with ENOTDIR for "no such
// file" where the lookup went through something that is no directory (a
// file, a symlink to one): file/x is ENOTDIR, as the kernel, ExecProvider
// and the agent's server say. SFTP v3 has no status for ENOTDIR, and
// OpenSSH's sftp-server answers it as "no such file" (errno_to_portable).
//
// Only a failed call pays: a Stat of each ancestor that is missing too,
// up to the first that is there (one round trip when the parent is).
func (p *sftpProvider) notDir(ctx context.Context, err error, names ...string) error {
	if err == nil || !errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return err
	}
	for _, name := range names {
		if p.throughNonDir(ctx, name) {
			return withErrno(err, syscall.ENOTDIR)
		}
	}
	return err
}

// throughNonDir reports whether name's lookup goes through a non-directory:
// its nearest ancestor that is there is not a directory. Stat, not Lstat:
// the lookup follows a symlink on the way.
func (p *sftpProvider) throughNonDir(ctx context.Context, name string) bool {
	for dir := path.Dir(name); ; dir = path.Dir(dir) {
		fi, err := p.c.StatContext(ctx, dir)
		if err == nil {
			return !fi.IsDir()
		}
		// A server that says ENOTDIR (the agent's, in a Failure's text)
		// said it of dir, through a non-directory further up.
		err = p.mapErr(unwrapPathErr(err))
		if errors.Is(err, syscall.ENOTDIR) {
			return true
		}
		if !errors.Is(err, fs.ErrNotExist) || dir == "/" || dir == "." {
			return false
		}
	}
}

// withErrno is err, a provider call's *fs.PathError or
// *hostgate.LinkError, with errno for its cause: not also ErrNotExist,
// which the server's status said.
func withErrno(err error, errno syscall.Errno) error {
	var pe *fs.PathError
	var le *hostgate.LinkError
	switch {
	case errors.As(err, &pe):
		return &fs.PathError{Op: pe.Op, Path: pe.Path, Err: errno}
	case errors.As(err, &le):
		return &hostgate.LinkError{Op: le.Op, Old: le.Old, New: le.New, Err: errno}
	}
	return errno
}
