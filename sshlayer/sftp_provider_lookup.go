package sshlayer

import (
	"context"
	"errors"
	"io/fs"
	"path"
	"strings"
	"syscall"

	"github.com/hostgate/hostgate"
)

// maxSymlinks is how many symlinks a lookup follows before it is ELOOP,
// as Linux's (MAXSYMLINKS).
const maxSymlinks = 40

// lookupErr is err, a call's that looked up names, with the errno the
// lookup failed with where the server said "no such file" for it: ENOTDIR
// where it went through something that is no directory (file/x, or a
// symlink to a file), ELOOP where it went round a symlink loop (a -> b ->
// a, at the name where the call follows it, or on the way: a/x), as the
// kernel, ExecProvider and the agent's server say. SFTP v3 has no status
// for either, and OpenSSH's sftp-server answers both as "no such file"
// (errno_to_portable). follow says whether the call follows a symlink at
// the name itself (Stat, Open, Chmod) or not (Lstat, Remove, Rename).
//
// A server that announced sftpErrnoToken (the agent) said ENOTDIR or
// ELOOP where it was either: its "no such file" is ENOENT, and costs no
// more requests.
//
// Otherwise only a failed call pays: a Stat of each ancestor that is
// missing too, up to the first that is there (one round trip when the
// parent is), with an Lstat of the name beside the first where the call
// follows it; and where a symlink is found on the way that Stat said
// missing, a Readlink and the same walk again for its target, per link
// followed.
func (p *sftpProvider) lookupErr(ctx context.Context, follow bool, err error, names ...string) error {
	if p.namesErrno {
		return err
	}
	return p.lookAround(ctx, follow, err, names...)
}

// lookAround is lookupErr whatever the server announced: for REALPATH,
// which every server answers "no such file" for ENOTDIR and ELOOP too
// (the agent keeps OpenSSH's wording there, which OpenSSH's sftp prints).
func (p *sftpProvider) lookAround(ctx context.Context, follow bool, err error, names ...string) error {
	if err == nil || !errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ELOOP) {
		return err
	}
	for _, name := range names {
		if errno := p.lookupErrno(ctx, name, follow, nil); errno != 0 {
			return withErrno(err, errno)
		}
	}
	return err
}

// lookupErrno is why the lookup of name failed, which the server said
// "no such file" of: ENOTDIR, ELOOP, or 0 for ENOENT (or what the
// provider cannot tell). seen holds the paths the lookup was restarted at
// after a symlink: one met again is a loop, which the kernel would follow
// to its limit.
func (p *sftpProvider) lookupErrno(ctx context.Context, name string, follow bool, seen map[string]bool) syscall.Errno {
	if seen[name] || len(seen) >= maxSymlinks {
		return syscall.ELOOP
	}
	// The name itself, when the call follows it, may be the link: ask
	// beside its parent, in the same round trip.
	var named chan fs.FileInfo
	if follow {
		named = make(chan fs.FileInfo, 1)
		go func() {
			fi, err := p.c.LstatContext(ctx, name)
			if err != nil {
				fi = nil
			}
			named <- fi
		}()
		defer func() {
			if named != nil {
				<-named // its answer was not needed: wait for it, as for the others
			}
		}()
	}
	// below is where the lookup failed: the first name under the deepest
	// ancestor that is there.
	below, followBelow := name, follow
	for dir := path.Dir(name); ; dir = path.Dir(dir) {
		fi, err := p.c.StatContext(ctx, dir)
		if err == nil {
			if !fi.IsDir() {
				return syscall.ENOTDIR
			}
			break
		}
		// A server that says the errno (the agent's, in a Failure's
		// text) said it of dir, on the way to name.
		err = p.mapErr(unwrapPathErr(err))
		for _, errno := range []syscall.Errno{syscall.ENOTDIR, syscall.ELOOP} {
			if errors.Is(err, errno) {
				return errno
			}
		}
		if !errors.Is(err, fs.ErrNotExist) || dir == "/" || dir == "." {
			return 0
		}
		below, followBelow = dir, true
	}
	var fi fs.FileInfo
	if below == name && named != nil {
		fi = <-named
		named = nil
	} else if followBelow {
		fi, _ = p.c.LstatContext(ctx, below)
	}
	if fi == nil || fi.Mode()&fs.ModeSymlink == 0 {
		return 0 // missing, as the server said
	}
	// A symlink whose parent is there and that Stat says is missing:
	// dangling or a loop. The lookup goes on at its target, with what
	// followed it in name.
	target, err := p.c.ReadLinkContext(ctx, below)
	if err != nil {
		return 0
	}
	if !path.IsAbs(target) {
		target = path.Join(path.Dir(below), target)
	}
	if seen == nil {
		seen = map[string]bool{}
	}
	seen[name] = true
	return p.lookupErrno(ctx, path.Clean(target+strings.TrimPrefix(name, below)), follow, seen)
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
