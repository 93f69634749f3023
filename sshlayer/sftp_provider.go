package sshlayer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hostgate/hostgate/third_party/github.com/pkg/sftp"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/rawio"
)

// sftpMaxPacket is the data size per SFTP read or write request. OpenSSH's
// sftp-server refuses messages of 256 KiB or more (SFTP_MAX_MSG_LENGTH), so
// leave 1 KiB for the request header and handle.
const sftpMaxPacket = 256<<10 - 1<<10

// sftpConcurrency is the number of requests in flight per file: 32 × 255
// KiB ≈ 8 MiB, enough to fill a fast link without unbounded memory.
const sftpConcurrency = 32

// SFTPClientOptions are the pkg/sftp options every hostgate SFTP client
// uses: concurrent reads and writes with large packets.
func SFTPClientOptions() []sftp.ClientOption {
	return []sftp.ClientOption{
		sftp.UseConcurrentReads(true),
		sftp.UseConcurrentWrites(true),
		sftp.MaxPacketUnchecked(sftpMaxPacket),
		sftp.MaxConcurrentRequestsPerFile(sftpConcurrency),
	}
}

// NewSFTPProvider returns a hostgate.Provider over c. It does not own c:
// closing c stays the caller's job. SFTP status codes map to io/fs errors
// (see mapSFTPErr); where OpenSSH answers a bare "Failure" the provider
// looks at the path to say which (EEXIST, ENOTEMPTY).
//
// pkg/sftp calls do not take a context: ctx is checked before each request,
// a call returns ctx's error as soon as ctx ends (its requests' answers are
// then awaited in the background; a file opened meanwhile is closed), and
// its end ends an open stream: the stream's calls in flight and later
// return ctx's error at once, the host answering or not, and the file is
// closed without waiting for the host's answer.
func NewSFTPProvider(c *sftp.Client) hostgate.Provider {
	return newSFTPProvider(c, nil)
}

func newSFTPProvider(c *sftp.Client, ended func() error) *sftpProvider {
	_, posix := c.HasExtension("posix-rename@openssh.com")
	_, lsetstat := c.HasExtension("lsetstat@openssh.com")
	_, statvfs := c.HasExtension("statvfs@openssh.com")
	return &sftpProvider{c: c, posixRename: posix, lsetstat: lsetstat, statvfs: statvfs, ended: ended}
}

type sftpProvider struct {
	c           *sftp.Client
	posixRename bool
	lsetstat    bool // the server sets a link's own times (Lchtimes)
	statvfs     bool // the server tells a filesystem's room (fullDisk)
	// ended, when set, says why a call failed with pkg/sftp's "connection
	// lost", which it returns for any end of the session: the SSH
	// connection's, or the server's sftp subsystem's alone.
	ended func() error
	// namesErrno: the server says "no such file" only for ENOENT
	// (sftpErrnoToken), so lookupErr has nothing to learn. Set before
	// the provider is used.
	namesErrno bool
	// holdAbort, when set, runs before a stream whose ctx ended is
	// aborted: a test's way to hold the abort back and see that the
	// stream's calls fail on ctx alone (sftpStream.ended).
	holdAbort func()
}

var _ hostgate.Provider = (*sftpProvider)(nil)

// SFTP status codes beyond v3 that some servers send (draft-ietf-secsh-filexfer-13).
const (
	fxFileAlreadyExists = 11
	fxDirNotEmpty       = 18
	fxNotADirectory     = 19
	fxFileIsADirectory  = 24
	fxOpUnsupported     = 8
	fxNoSuchFile        = 2
	fxPermissionDenied  = 3
)

// mappedErr keeps the SFTP error and adds the io/fs sentinel for errors.Is.
type mappedErr struct {
	sentinel error
	cause    error
}

func (e *mappedErr) Error() string   { return e.cause.Error() }
func (e *mappedErr) Unwrap() []error { return []error{e.sentinel, e.cause} }

// mapSFTPErr adds the io/fs sentinel matching an SFTP status.
func mapSFTPErr(err error) error {
	if err == nil {
		return nil
	}
	var se *sftp.StatusError
	if !errors.As(err, &se) {
		return err // pkg/sftp already returns os.ErrNotExist etc. for some calls
	}
	var s error
	switch se.Code {
	case fxNoSuchFile:
		s = fs.ErrNotExist
	case fxPermissionDenied:
		s = fs.ErrPermission
	case fxFileAlreadyExists:
		s = fs.ErrExist
	case fxOpUnsupported:
		s = hostgate.ErrNotSupported
	case fxDirNotEmpty:
		s = syscall.ENOTEMPTY
	case fxNotADirectory:
		s = syscall.ENOTDIR
	case fxFileIsADirectory:
		s = syscall.EISDIR
	case uint32(sftp.ErrSSHFxFailure):
		if s = failureErrno(se); s == nil {
			return err
		}
	default:
		return err
	}
	return &mappedErr{sentinel: s, cause: err}
}

// failureTexts are the errnos a bare Failure's message ends with, in the
// words Go gives them: SFTP v3 has no status for a full disk, a read-only
// filesystem and the like, so a Go server (the agent's, pkg/sftp's) sends
// Failure with the error's text ("write /workspace/f: no space left on
// device"), which errors.Is(err, syscall.ENOSPC) could not match. OpenSSH's
// sftp-server says only "Failure" for them.
var failureTexts = []struct {
	text  string
	errno syscall.Errno
}{
	{"no space left on device", syscall.ENOSPC},
	{"disk quota exceeded", syscall.EDQUOT},
	{"read-only file system", syscall.EROFS},
	{"file too large", syscall.EFBIG},
	{"file name too long", syscall.ENAMETOOLONG},
	{"too many levels of symbolic links", syscall.ELOOP},
	{"directory not empty", syscall.ENOTEMPTY},
	{"not a directory", syscall.ENOTDIR},
	{"is a directory", syscall.EISDIR},
	{"invalid cross-device link", syscall.EXDEV},
	{"invalid argument", syscall.EINVAL}, // readlink of no link, a directory renamed into itself
}

// failureErrno is the errno a Failure's message names, or nil.
func failureErrno(se *sftp.StatusError) error {
	msg := se.Error() // sftp: "MESSAGE" (SSH_FX_FAILURE)
	for _, f := range failureTexts {
		if strings.Contains(msg, ": "+f.text+`" (`) {
			return f.errno
		}
	}
	return nil
}

// saysErrno reports whether err is a Failure whose text names its errno,
// as the agent's server words every errno SFTP v3 has no status for
// ("rename a file/x: not a directory"): looking the names up to learn
// which would cost round trips and tell nothing more.
func saysErrno(err error) bool {
	var se *sftp.StatusError
	return errors.As(err, &se) && se.FxCode() == sftp.ErrSSHFxFailure && failureErrno(se) != nil
}

// fullDisk is err, a write's to name, as ENOSPC where the server
// answered it a bare Failure and its statvfs@openssh.com says the
// filesystem holding name has no more room than one write: OpenSSH's
// sftp-server answers a full disk "Failure" and nothing more (SFTP v3 has
// no status for it), so a full sandbox workspace matched no errno, where
// the agent's server says it in words (failureTexts). Only a failed write
// pays the round trip; a server without the extension, or a disk with
// room left (another cause), keeps err.
func (p *sftpProvider) fullDisk(ctx context.Context, name string, err error) error {
	if !p.statvfs || !isFailure(err) || saysErrno(err) {
		return err
	}
	st, serr := p.c.StatVFSContext(ctx, name)
	if serr != nil || st.Frsize == 0 || st.Bavail > sftpMaxPacket/st.Frsize {
		return err
	}
	return withErrno(err, syscall.ENOSPC)
}

func isFailure(err error) bool {
	var se *sftp.StatusError
	return errors.As(err, &se) && se.FxCode() == sftp.ErrSSHFxFailure
}

func (p *sftpProvider) pathErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	return &fs.PathError{Op: op, Path: name, Err: p.mapErr(unwrapPathErr(err))}
}

// mapErr is mapSFTPErr, with the end of the session said as what it was.
func (p *sftpProvider) mapErr(err error) error {
	if !errors.Is(err, sftp.ErrSSHFxConnectionLost) {
		return mapSFTPErr(err)
	}
	if p.ended != nil {
		return p.ended()
	}
	return &sftpEndedError{}
}

// ErrSFTPSessionEnded: the SFTP session ended under a call. With the SSH
// connection still up (a Client's errors then match this and not
// ErrConnectionLost), the server's sftp subsystem exited: it was killed, or
// quit on a request it could not take. The next call through the Client's
// provider opens a new session.
var ErrSFTPSessionEnded = errors.New("sshlayer: sftp session ended")

// sftpEndedError is why a call failed on an ended SFTP session. It matches
// ErrSFTPSessionEnded and pkg/sftp's ErrSSHFxConnectionLost.
type sftpEndedError struct {
	reopens bool // the connection is up, and the provider opens a new session on the next call
}

func (e *sftpEndedError) Error() string {
	if e.reopens {
		return ErrSFTPSessionEnded.Error() + ": the server's sftp subsystem exited; the SSH connection is up, and the next call opens a new sftp session"
	}
	return ErrSFTPSessionEnded.Error()
}

func (e *sftpEndedError) Unwrap() []error {
	return []error{ErrSFTPSessionEnded, sftp.ErrSSHFxConnectionLost}
}

// unwrapPathErr takes off the *fs.PathError pkg/sftp wraps some errors in.
func unwrapPathErr(err error) error {
	if pe, ok := err.(*fs.PathError); ok {
		return pe.Err
	}
	return err
}

// errPathNUL refuses a path with a NUL byte before it is sent: no file
// name can hold one, and OpenSSH's sftp-server ends the whole session on
// it, failing every other call in flight.
var errPathNUL = fmt.Errorf("%w: the path contains a NUL byte, which no file name can hold", fs.ErrInvalid)

// errPathEmpty refuses an empty path before it is sent, as the kernel
// does (ENOENT) and so ExecProvider and OpenSSH's sftp-server: pkg/sftp's
// server, the agent's, takes "" for its working directory, the user's
// home, so that a caller's path built from an empty variable had
// Remove(ctx, "", true) empty the whole home, and Chmod change its mode.
var errPathEmpty = fmt.Errorf("%w (an empty path names no file; the working directory is \".\")", syscall.ENOENT)

// callErr is why a call must not be sent: ctx ended, or a path is invalid.
func callErr(ctx context.Context, names ...string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, n := range names {
		if strings.IndexByte(n, 0) >= 0 {
			return errPathNUL
		}
		if n == "" {
			return errPathEmpty
		}
	}
	return nil
}

func (p *sftpProvider) Stat(ctx context.Context, name string) (fs.FileInfo, error) {
	if err := callErr(ctx, name); err != nil {
		return nil, p.pathErr("stat", name, err)
	}
	fi, err := p.c.StatContext(ctx, name)
	return fi, p.lookupErr(ctx, true, p.pathErr("stat", name, err), name)
}

func (p *sftpProvider) Lstat(ctx context.Context, name string) (fs.FileInfo, error) {
	if err := callErr(ctx, name); err != nil {
		return nil, p.pathErr("lstat", name, err)
	}
	fi, err := p.c.LstatContext(ctx, name)
	return fi, p.lookupErr(ctx, false, p.pathErr("lstat", name, err), name)
}

func (p *sftpProvider) ReadDir(ctx context.Context, name string) ([]fs.DirEntry, error) {
	if err := callErr(ctx, name); err != nil {
		return nil, p.pathErr("readdir", name, err)
	}
	// Each page says the listing moves (hostgate.WithProgress): a
	// directory of more pages than fit in the sync filesystem's timeout
	// timed out there however fast each came.
	fis, err := p.c.ReadDirProgress(ctx, name, hostgate.ProgressOf(ctx))
	if err != nil {
		if isFailure(err) || errors.Is(mapSFTPErr(unwrapPathErr(err)), fs.ErrNotExist) {
			// pkg/sftp answers a file with a bare Failure, OpenSSH with
			// "no such file" (its mapping of ENOTDIR): ENOTDIR, as the
			// other providers say, when name is there but no directory.
			if fi, serr := p.c.StatContext(ctx, name); serr == nil && !fi.IsDir() {
				if isFailure(err) {
					err = &mappedErr{sentinel: syscall.ENOTDIR, cause: err}
				} else {
					// OpenSSH's "no such file" is no cause to keep: it
					// read "file does not exist" and matched ErrNotExist
					// of a file that is there.
					err = syscall.ENOTDIR
				}
			}
		}
		return nil, p.lookupErr(ctx, true, p.pathErr("readdir", name, err), name)
	}
	ents := make([]fs.DirEntry, 0, len(fis))
	for _, fi := range fis {
		if n := fi.Name(); n == "." || n == ".." {
			continue
		}
		ents = append(ents, fs.FileInfoToDirEntry(fi))
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	return ents, nil
}

// Open returns the *sftp.File wrapped so that Close also drops the ctx
// watch; its WriteTo reads with concurrent requests, so io.Copy from it is
// fast.
func (p *sftpProvider) Open(ctx context.Context, name string) (io.ReadCloser, error) {
	if err := callErr(ctx, name); err != nil {
		return nil, p.pathErr("open", name, err)
	}
	f, err := p.openContext(ctx, name, os.O_RDONLY)
	if err != nil {
		return nil, p.lookupErr(ctx, true, p.pathErr("open", name, err), name)
	}
	return &sftpReader{sftpStream: p.stream(ctx, name, f)}, nil
}

// abortFile ends a stream whose ctx ended: its calls waiting for the
// host's replies return ctx's error at once (pkg/sftp fork change 15;
// Close alone waited for its own reply, behind the reads', for as long as
// a stopped host kept the connection), and the file is closed without
// waiting for the host. The connection's other calls go on; replies that
// come late are dropped.
func abortFile(ctx context.Context, f *sftp.File) {
	f.Abort(ctx.Err())
	_ = f.Close()
}

// ctxErr is err, a stream call's, as the call returns it: ctx's error as
// pathErr says it when the call failed because ctx ended (abortFile).
func (p *sftpProvider) ctxErr(ctx context.Context, op, name string, err error) error {
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return p.pathErr(op, name, ctx.Err())
	}
	return err
}

// sftpStream is file name opened under ctx, which aborts it when it ends
// (abortFile) until stop. Its reads and writes fail once ctx is done
// (ended), not only once the abort ran: that runs a moment later, in a
// goroutine of its own, and a call in between could still succeed.
type sftpStream struct {
	*sftp.File
	p    *sftpProvider
	ctx  context.Context
	name string
	stop func() bool
}

func (p *sftpProvider) stream(ctx context.Context, name string, f *sftp.File) sftpStream {
	return sftpStream{File: f, p: p, ctx: ctx, name: name, stop: context.AfterFunc(ctx, func() {
		if p.holdAbort != nil {
			p.holdAbort()
		}
		abortFile(ctx, f)
	})}
}

// ended is the error of a call op made once ctx is done, nil before.
func (s *sftpStream) ended(op string) error {
	if err := s.ctx.Err(); err != nil {
		return s.p.pathErr(op, s.name, err)
	}
	return nil
}

// sftpReader is an sftpStream opened for reading. Its first read asks for
// the file's start (headSize) with the fstat whose size says whether that
// was all, as ReadFile does: a small file read through Open, Read and
// Close takes two round trips, the open's and these, where reading on to
// the EOF's answer and waiting for the close's took four.
type sftpReader struct {
	sftpStream
	started bool
	head    []byte // what the first read got that no Read has returned yet
	headBuf *[headSize]byte
	eof     bool // head reaches the end of the file
}

// headSize is what a stream's first read asks for: room for most of the
// small files a program reads whole (configuration, sources, manifests),
// without holding a full request's buffer per open stream.
const headSize = 32 << 10

var headPool = sync.Pool{New: func() any { return new([headSize]byte) }}

func (r *sftpReader) Read(p []byte) (int, error) {
	if err := r.ended("read"); err != nil {
		return 0, err
	}
	if err := r.readHead(); err != nil {
		return 0, err
	}
	if len(r.head) > 0 {
		n := copy(p, r.head)
		r.take(n)
		return n, nil
	}
	if r.eof {
		return 0, io.EOF
	}
	n, err := r.File.Read(p)
	return n, r.p.ctxErr(r.ctx, "read", r.name, r.readErr(err))
}

// readHead makes the first read, once: the start of the file and its
// fstat, together. Where the answer ends at the size of a regular file,
// the file was read whole; otherwise the file's offset moves past it, for
// the reads after.
func (r *sftpReader) readHead() error {
	if r.started {
		return nil
	}
	r.started = true
	// Not past ctx: a host that offers its limits and never answers
	// them (pkg/sftp change 27).
	size, err := r.p.c.ReadSizeContext(r.ctx)
	if err != nil {
		return r.p.pathErr("read", r.name, err)
	}
	r.headBuf = headPool.Get().(*[headSize]byte)
	stat := r.File.StatNoWait()
	n, err := r.File.ReadAtNoWait(r.headBuf[:min(headSize, size)], 0).WaitContext(r.ctx)
	fi, serr := stat.WaitContext(r.ctx)
	switch {
	case err == io.EOF:
		r.eof = true
		r.release()
		return nil
	case err != nil:
		if serr == nil && fi.IsDir() {
			r.release()
			return r.p.pathErr("read", r.name, syscall.EISDIR)
		}
		r.release()
		return r.p.ctxErr(r.ctx, "read", r.name, r.readErr(err))
	}
	r.head = r.headBuf[:n]
	if _, err := r.File.Seek(int64(n), io.SeekStart); err != nil {
		r.release()
		return r.p.streamErr("read", r.name, err)
	}
	r.eof = serr == nil && fi.Mode().IsRegular() && int64(n) == fi.Size() && n > 0
	if n == 0 {
		r.release()
	}
	return nil
}

// Seek moves the stream (the synchronous filesystem's files seek), what
// the first read got ahead dropped: the file's offset is past it, where
// the stream is len(head) before.
func (r *sftpReader) Seek(offset int64, whence int) (int64, error) {
	if whence == io.SeekCurrent {
		offset -= int64(len(r.head))
	}
	r.release()
	r.started, r.eof = true, false
	return r.File.Seek(offset, whence)
}

// take drops the first n bytes of head, giving its buffer back once it is
// all returned.
func (r *sftpReader) take(n int) {
	r.head = r.head[n:]
	if len(r.head) == 0 {
		r.release()
	}
}

func (r *sftpReader) release() {
	if r.headBuf != nil {
		headPool.Put(r.headBuf)
		r.headBuf, r.head = nil, nil
	}
}

// readErr is streamErr for a read, and EISDIR for a directory: SFTP opens
// one and fails its reads with a bare Failure (OpenSSH's sftp-server), as
// ReadFile says too.
func (r *sftpReader) readErr(err error) error {
	if isFailure(err) {
		if fi, serr := r.p.c.StatContext(r.ctx, r.name); serr == nil && fi.IsDir() {
			return r.p.pathErr("read", r.name, syscall.EISDIR)
		}
	}
	return r.p.streamErr("read", r.name, err)
}

func (r *sftpReader) WriteTo(w io.Writer) (int64, error) {
	if err := r.ended("read"); err != nil {
		return 0, err
	}
	if err := r.readHead(); err != nil {
		return 0, err
	}
	var wrote int64
	if len(r.head) > 0 {
		n, err := w.Write(r.head)
		wrote += int64(n)
		r.take(n)
		if err != nil {
			return wrote, err
		}
	}
	if r.eof {
		return wrote, nil
	}
	n, err := r.File.WriteTo(w)
	return wrote + n, r.p.ctxErr(r.ctx, "read", r.name, r.readErr(err))
}

// streamErr leaves a stream's errors as pkg/sftp gives them (io.EOF must
// stay bare) but for the end of the session and the server's statuses
// (a write to a full disk), said as pathErr says them, for errors.Is.
func (p *sftpProvider) streamErr(op, name string, err error) error {
	var se *sftp.StatusError
	if errors.Is(err, sftp.ErrSSHFxConnectionLost) || errors.As(err, &se) {
		return p.pathErr(op, name, err)
	}
	return err
}

// Close sends the file's close without waiting for its answer, as
// ReadFile does: a read handle's close says nothing of what was read (as
// with os.ReadFile, a failed close after a complete read is no error),
// and its round trip was the caller's to wait out.
func (r *sftpReader) Close() error {
	r.release()
	r.File.CloseNoWait()
	r.stop()
	return nil
}

// Create opens name for writing, creating it with perm &^ umask as
// os.Create would, or truncating it (keeping its mode). SFTP open carries no
// umask, so the provider learns it from the mode the server gave the new
// file (0666 &^ umask) and narrows that by perm.
//
// The open is WriteFile's, one round trip (openForWrite), and the writer's
// writes and its close are sent without waiting for their answers, which
// Close waits for: a small file written through Create, Write and Close
// takes two round trips, where the lstat, the open, each write and the
// close were each waited for (four, five for a new file). A failed write
// is the next Write's error, or Close's.
func (p *sftpProvider) Create(ctx context.Context, name string, perm fs.FileMode) (io.WriteCloser, error) {
	f, chmod, err := p.openForWrite(ctx, name, perm)
	if errors.Is(err, errDangling) {
		f, err = p.create(ctx, name, perm)
		err = p.pathErr("create", name, err)
	}
	if err != nil {
		return nil, p.lookupErr(ctx, true, err, name)
	}
	return &sftpWriter{sftpStream: p.stream(ctx, name, f), chmod: chmod}, nil
}

// create opens name for Create, giving a file it makes perm &^ umask:
// the lstat, the open and the new file's mode in turn, which the target
// of a dangling symlink needs. Each goes only while ctx has not ended,
// and the call returns at ctx's end: none goes after the caller was
// told it failed (a truncating open behind an lstat the host answered
// late did, from the goroutine the call was left to).
func (p *sftpProvider) create(ctx context.Context, name string, perm fs.FileMode) (*sftp.File, error) {
	lfi, serr := p.c.LstatContext(ctx, name)
	isNew := errors.Is(serr, fs.ErrNotExist)
	f, err := p.openContext(ctx, name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		if isFailure(err) && serr == nil && p.isDir(ctx, lfi, name) {
			return nil, syscall.EISDIR // OpenSSH's bare Failure for open(2)'s EISDIR
		}
		return nil, err
	}
	if isNew {
		// The handle's requests are bounded by its Abort, not by ctx.
		stop := context.AfterFunc(ctx, func() { f.Abort(ctx.Err()) })
		err := newFileMode(ctx, f, perm)
		if !stop() && err == nil {
			err = ctx.Err()
		}
		if err != nil {
			f.CloseNoWait()
			return nil, err
		}
	}
	return f, nil
}

// newFileMode gives f, a file the server just created with 0666 &^
// umask, perm &^ umask. A mode the server does not tell is left as it
// is; no chmod goes once ctx has ended.
func newFileMode(ctx context.Context, f *sftp.File, perm fs.FileMode) error {
	fi, err := f.Stat()
	if err != nil {
		return ctx.Err()
	}
	created := fi.Mode().Perm()
	want := createMode(created, perm)
	if want == created {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return f.Chmod(want)
}

// isDir reports whether name, whose Lstat is fi, is a directory or a
// symlink to one.
func (p *sftpProvider) isDir(ctx context.Context, fi fs.FileInfo, name string) bool {
	if fi.Mode()&fs.ModeSymlink != 0 {
		fi, _ = p.c.StatContext(ctx, name)
	}
	return fi != nil && fi.IsDir()
}

// createMode is the mode a file the server created with created (0666 &^
// umask: SFTP open carries no umask) must get for perm: perm &^ umask, as
// os.Create gives, its setuid, setgid and sticky bits too (open(2) keeps
// them; they were dropped). The umask's execute bits are unseen: assume
// each follows its read bit (true of 022, 027, 077, 002).
func createMode(created, perm fs.FileMode) fs.FileMode {
	umask := ^created & 0o666
	umask |= umask & 0o444 >> 2
	return perm & (fs.ModePerm | specialBits) &^ umask
}

// specialBits are the mode bits past the permissions that open(2) and
// chmod(2) take.
const specialBits = fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// sftpWriter is an sftpStream opened for writing. Its writes go out as
// they are made, up to sftpConcurrency in flight, and their answers are
// taken when that many wait, at ReadFrom and at Close.
type sftpWriter struct {
	sftpStream
	chmod *sftp.Pending[struct{}] // a new file's mode, sent with the open; nil: none
	off   int64                   // where the next write goes
	queue []*sftp.Pending[int]    // writes whose answers are not taken yet
	err   error                   // the first failed write's, returned from then on
}

func (w *sftpWriter) Write(p []byte) (int, error) {
	if err := w.ended("write"); err != nil {
		return 0, err
	}
	if w.err != nil {
		return 0, w.err
	}
	// WriteAtNoWait sends at most the client's WriteSize and drops the
	// rest: no more than that a request. Not past ctx (pkg/sftp change 27).
	size, err := w.p.c.WriteSizeContext(w.ctx)
	if err != nil {
		return 0, w.p.pathErr("write", w.name, err)
	}
	size = min(sftpMaxPacket, size)
	written := 0
	for len(p) > 0 {
		if len(w.queue) >= sftpConcurrency {
			if err := w.takeOne(); err != nil {
				return written, err
			}
		}
		n := min(len(p), size)
		w.queue = append(w.queue, w.File.WriteAtNoWait(p[:n], w.off))
		w.off += int64(n)
		written += n
		p = p[n:]
	}
	return written, nil
}

// drain takes the answers of the writes sent ahead. A server may run a
// handle's writes in any order (pkg/sftp's server runs them on several
// workers), so a write that may overlap them (after a Seek, a WriteAt)
// waits for them first.
func (w *sftpWriter) drain() error {
	for len(w.queue) > 0 {
		if err := w.takeOne(); err != nil {
			return err
		}
	}
	return w.err
}

// WriteAt writes p at off once the writes sent ahead are answered.
func (w *sftpWriter) WriteAt(p []byte, off int64) (int, error) {
	if err := w.ended("write"); err != nil {
		return 0, err
	}
	if err := w.drain(); err != nil {
		return 0, err
	}
	n, err := w.File.WriteAt(p, off)
	return n, w.p.fullDisk(w.ctx, w.name, w.p.ctxErr(w.ctx, "write", w.name, w.p.streamErr("write", w.name, err)))
}

// Seek moves where the next write goes, as the file's own Seek would,
// once the writes sent ahead are answered.
func (w *sftpWriter) Seek(offset int64, whence int) (int64, error) {
	if err := w.drain(); err != nil {
		return w.off, err
	}
	if whence == io.SeekCurrent {
		offset, whence = offset+w.off, io.SeekStart
	}
	off, err := w.File.Seek(offset, whence)
	if err == nil {
		w.off = off
	}
	return off, err
}

// takeOne takes the oldest write's answer.
func (w *sftpWriter) takeOne() error {
	q := w.queue[0]
	w.queue = w.queue[1:]
	if _, err := q.WaitContext(w.ctx); err != nil && w.err == nil {
		if w.ctx.Err() != nil && errors.Is(err, w.ctx.Err()) {
			err = w.ctx.Err() // not wrapped twice (abortFile)
		}
		w.err = w.p.fullDisk(w.ctx, w.name, w.p.pathErr("write", w.name, err))
	}
	return w.err
}

// ReadFrom writes r with concurrent requests whatever r is (pkg/sftp's own
// ReadFrom goes sequential when it cannot learn r's size). A local file
// is read from the page cache by raw syscalls (rawio.CachedReader).
func (w *sftpWriter) ReadFrom(r io.Reader) (int64, error) {
	if err := w.ended("write"); err != nil {
		return 0, err
	}
	if err := w.drain(); err != nil {
		return 0, err
	}
	if _, err := w.File.Seek(w.off, io.SeekStart); err != nil {
		return 0, w.p.pathErr("write", w.name, err)
	}
	n, err := w.File.ReadFromWithConcurrency(rawio.CachedReader(r), 0)
	w.off += n
	if err != nil {
		if w.ctx.Err() != nil && errors.Is(err, w.ctx.Err()) {
			err = w.ctx.Err() // not wrapped twice (abortFile)
		}
		w.err = w.p.fullDisk(w.ctx, w.name, w.p.pathErr("write", w.name, err))
		return n, w.err
	}
	return n, nil
}

// Close sends the file's close behind its writes (a server takes a
// handle's requests in order: OpenSSH's one at a time, pkg/sftp's closes
// after the handle's reads and writes), then takes the writes', the
// mode's and the close's answers, before it stops watching ctx, as
// sftpReader's does. A ctx that ended first, or while the close waited,
// aborted the file: what was written may not all be there, and Close says
// so.
func (w *sftpWriter) Close() error {
	closing := w.File.CloseNoWait()
	for len(w.queue) > 0 {
		_ = w.takeOne()
	}
	err := w.err
	if w.chmod != nil {
		if _, cerr := w.chmod.WaitContext(w.ctx); cerr != nil && err == nil {
			err = w.p.pathErr("create", w.name, cerr)
		}
		w.chmod = nil
	}
	_, cerr := closing.WaitContext(w.ctx)
	if !w.stop() {
		return w.p.pathErr("create", w.name, context.Canceled) // ctx aborted the file
	}
	if err != nil {
		return err
	}
	return w.p.pathErr("close", w.name, cerr)
}

// Mkdir creates name. The new directory gets perm &^ umask, as os.Mkdir
// gives: the server creates it with 0777 &^ umask, and the provider narrows
// that by perm. Its errors are os.Mkdir's and, with parents,
// os.MkdirAll's: ENOTDIR under a file, which OpenSSH's sftp-server answers
// as "no such file" (lookupErr), and with parents at a file too.
func (p *sftpProvider) Mkdir(ctx context.Context, name string, perm fs.FileMode, parents bool) error {
	if err := callErr(ctx, name); err != nil {
		return p.pathErr("mkdir", name, err)
	}
	err := p.ctxErr(ctx, "mkdir", name, p.mkdir(ctx, name, perm, parents))
	if parents && errors.Is(err, fs.ErrExist) && p.lookupErrno(ctx, name, true, nil) == syscall.ELOOP {
		// A symlink on the way that is a loop: mkdir -p says ELOOP of
		// it, where the walk's Mkdir of it said EEXIST (as os.MkdirAll).
		return &fs.PathError{Op: "mkdir", Path: name, Err: syscall.ELOOP}
	}
	return p.lookupErr(ctx, false, err, name)
}

func (p *sftpProvider) mkdir(ctx context.Context, name string, perm fs.FileMode, parents bool) error {
	if err := callErr(ctx, name); err != nil {
		return p.pathErr("mkdir", name, err)
	}
	// A file in the way: EEXIST as mkdir(2) says, but with parents ENOTDIR,
	// at name or on the way to it, as os.MkdirAll says (mkdir -p says
	// EEXIST).
	inTheWay := fs.ErrExist
	if parents {
		inTheWay = syscall.ENOTDIR
		// Stat, not Lstat: a symlink to a directory is that directory, on
		// the way or at name, as for mkdir -p and os.MkdirAll.
		fi, err := p.c.StatContext(ctx, name)
		switch {
		case err == nil && fi.IsDir():
			return nil
		case err == nil:
			return p.pathErr("mkdir", name, inTheWay)
		}
		// The parents get perm too, as os.MkdirAll gives them: with
		// the server's default a private tree (0o700) was readable by
		// all above its last directory.
		if up := path.Dir(name); up != name && up != "." && up != "/" {
			if err := p.mkdir(ctx, up, perm, true); err != nil {
				return err
			}
		}
	}
	if err := p.c.MkdirContext(ctx, name); err != nil {
		// OpenSSH answers EEXIST with a bare Failure.
		if _, lerr := p.c.LstatContext(ctx, name); lerr == nil {
			fi, _ := p.c.StatContext(ctx, name)
			if parents && fi != nil && fi.IsDir() {
				return nil // created concurrently
			}
			if fi != nil && !fi.IsDir() {
				return p.pathErr("mkdir", name, inTheWay)
			}
			return p.pathErr("mkdir", name, fs.ErrExist)
		}
		return p.pathErr("mkdir", name, err) // ENOTDIR under a file is lookupErr's
	}
	// mkdir(2) on Linux keeps the sticky bit of the mode it is given
	// (os.Mkdir sets it where it does not), not setuid or setgid; a
	// setgid the directory took from its parent stays.
	sticky := perm & fs.ModeSticky
	if perm.Perm() == 0o777 && sticky == 0 {
		return nil
	}
	fi, err := p.c.LstatContext(ctx, name)
	if err != nil {
		return p.pathErr("mkdir", name, err)
	}
	if want := fi.Mode().Perm()&perm.Perm() | sticky | fi.Mode()&fs.ModeSetgid; want != fi.Mode()&(fs.ModePerm|specialBits) {
		return p.pathErr("mkdir", name, p.c.ChmodContext(ctx, name, want))
	}
	return nil
}

func (p *sftpProvider) Remove(ctx context.Context, name string, recursive bool) error {
	if err := callErr(ctx, name); err != nil {
		return p.pathErr("remove", name, err)
	}
	if recursive && dotName(name) {
		// The walk would empty the directory before its rmdir failed:
		// "d/." emptied d, "." the working directory.
		return p.pathErr("remove", name, fmt.Errorf("%w: a name ending in \".\" or \"..\" is not removed recursively (as rm -rf and os.RemoveAll refuse it): name the directory itself", syscall.EINVAL))
	}
	if trimmed := strings.TrimRight(name, "/"); recursive && trimmed != name && trimmed != "" {
		// A symlink named "link/" is removed, as os.RemoveAll removes
		// it: the server's Lstat follows it through the slash, and the
		// walk emptied the directory it leads to, then failed to
		// remove "link/" (no such file).
		if fi, err := p.c.LstatContext(ctx, trimmed); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			name = trimmed
		}
	}
	err := p.ctxErr(ctx, "remove", name, p.remove(ctx, name, recursive, 0))
	return p.lookupErr(ctx, false, err, name)
}

// dotName reports whether name's last element, past any trailing
// slashes, is "." or "..", as rm's check of its operands reads it.
func dotName(name string) bool {
	base := name
	if t := strings.TrimRight(name, "/"); t != "" {
		base = t
	}
	if i := strings.LastIndexByte(base, '/'); i >= 0 {
		base = base[i+1:]
	}
	return base == "." || base == ".."
}

// maxRemoveDepth and maxRemovePath bound a recursive Remove's descent:
// a host that lists a fresh subdirectory at every level (broken, or
// hostile) otherwise took it down until the caller's ctx ended, its
// memory growing with the square of the depth as each level's path is
// longer. No tree a host's sftp server can name is cut: OpenSSH's takes
// paths of up to PATH_MAX (4096 bytes on Linux, so at most 2048 levels)
// and hands longer ones to the kernel, which refuses them; a host that
// takes paths past that (Windows' 32767 UTF-16 units) nests few trees
// deeper than 16 KiB. At the bounds the paths held are 32 MiB at most
// (2048 of up to 16 KiB; a host's long first name makes each level's
// long), and a walk of ordinary names' depth holds a few KiB.
const (
	maxRemoveDepth = 2048
	maxRemovePath  = 16 << 10
)

// remove is Remove of name, depth levels below the one asked for.
func (p *sftpProvider) remove(ctx context.Context, name string, recursive bool, depth int) error {
	if err := callErr(ctx, name); err != nil {
		return p.pathErr("remove", name, err)
	}
	fi, err := p.c.LstatContext(ctx, name)
	if err != nil {
		return p.pathErr("remove", name, err)
	}
	// Each name of a tree costs round trips of its own: each answer says
	// the removal moves (hostgate.WithProgress), or the sync filesystem's
	// timeout cut a tree of more names than fit in it, every time.
	progress := hostgate.ProgressOf(ctx)
	if progress != nil {
		progress()
	}
	if !fi.IsDir() {
		return p.pathErr("remove", name, p.c.RemoveContext(ctx, name))
	}
	if recursive {
		ents, err := p.c.ReadDirProgress(ctx, name, progress)
		if err != nil {
			return p.pathErr("remove", name, err)
		}
		for _, e := range ents {
			if n := e.Name(); n == "." || n == ".." {
				continue
			}
			if strings.Contains(e.Name(), "/") {
				// pkg/sftp names an entry by the last element of what the
				// host sent, so only "/" gets here: joined, it is name
				// again, and a host that listed it recursed the caller
				// into the same directory until its ctx ended or its
				// stack ran out, which ends the whole process.
				return p.pathErr("remove", name, fmt.Errorf("the host listed an entry named %q in the directory, which no file system holds (a broken or hostile host); the removal stopped there", e.Name()))
			}
			sub := path.Join(name, e.Name())
			if depth >= maxRemoveDepth || len(sub) > maxRemovePath {
				return &fs.PathError{Op: "remove", Path: pathStart(sub), Err: &mappedErr{sentinel: syscall.ENAMETOOLONG, cause: fmt.Errorf("the host listed directories nested %d levels (a path of %d bytes) below the one to remove, past the %d levels or %d bytes a removal descends (a broken or hostile host, or a tree no sftp server can name whole); the removal stopped there, what is above it kept", depth+1, len(sub), maxRemoveDepth, maxRemovePath)}}
			}
			// e comes from lstat: a symlink to a directory is removed, not
			// followed.
			if err := p.remove(ctx, sub, true, depth+1); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	err = p.c.RemoveDirectoryContext(ctx, name)
	if err != nil && isFailure(err) {
		if ents, rerr := p.c.ReadDirContext(ctx, name); rerr == nil && len(ents) > 0 {
			return p.pathErr("remove", name, &mappedErr{sentinel: syscall.ENOTEMPTY, cause: unwrapPathErr(err)})
		}
	}
	return p.pathErr("remove", name, err)
}

// pathStart is name, cut to its first 128 bytes (and "…") when longer:
// an error that names a path of thousands of bytes is read by no one.
func pathStart(name string) string {
	if len(name) <= 128 {
		return name
	}
	return strings.ToValidUTF8(name[:128], "") + "…"
}

// Rename replaces newname like rename(2), through OpenSSH's
// posix-rename@openssh.com where the server has it (SFTP v3 rename refuses
// an existing target).
func (p *sftpProvider) Rename(ctx context.Context, oldname, newname string) error {
	if err := callErr(ctx, oldname, newname); err != nil {
		return &hostgate.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	err := p.rename(ctx, oldname, newname)
	if cerr := ctx.Err(); err != nil && cerr != nil && errors.Is(err, cerr) {
		err = &hostgate.LinkError{Op: "rename", Old: oldname, New: newname, Err: cerr}
	}
	return p.lookupErr(ctx, false, err, oldname, newname)
}

func (p *sftpProvider) rename(ctx context.Context, oldname, newname string) error {
	var err error
	if p.posixRename {
		err = p.c.PosixRenameContext(ctx, oldname, newname)
	} else {
		err = p.c.RenameContext(ctx, oldname, newname)
	}
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		if saysErrno(err) {
			return &hostgate.LinkError{Op: "rename", Old: oldname, New: newname, Err: p.mapErr(err)}
		}
		var se *sftp.StatusError
		if errors.As(err, &se) && se.FxCode() == sftp.ErrSSHFxBadMessage {
			// OpenSSH's sftp-server says rename(2)'s EINVAL (a directory
			// into itself) so (errno_to_portable).
			return &hostgate.LinkError{Op: "rename", Old: oldname, New: newname, Err: &mappedErr{sentinel: syscall.EINVAL, cause: err}}
		}
		if isFailure(err) || errors.Is(mapSFTPErr(err), fs.ErrNotExist) {
			if errno := p.renameErrno(ctx, oldname, newname); errno != nil {
				return &hostgate.LinkError{Op: "rename", Old: oldname, New: newname, Err: errno}
			}
		}
		if isFailure(err) {
			if _, lerr := p.c.LstatContext(ctx, oldname); errors.Is(lerr, fs.ErrNotExist) {
				err = &mappedErr{sentinel: fs.ErrNotExist, cause: err}
			}
		}
		return &hostgate.LinkError{Op: "rename", Old: oldname, New: newname, Err: p.mapErr(err)}
	}
	return nil
}

// renameErrno is the errno rename(2) failed with, where SFTP v3 has no
// status for it and the names tell: OpenSSH's sftp-server answers EISDIR
// and ENOTEMPTY with a bare Failure and ENOTDIR with "no such file", of a
// source that exists. Nil when they do not tell.
func (p *sftpProvider) renameErrno(ctx context.Context, oldname, newname string) error {
	from, err := p.c.LstatContext(ctx, oldname)
	if err != nil {
		return nil
	}
	to, err := p.c.LstatContext(ctx, newname) // rename(2) replaces a symlink, not what it points at
	if err != nil {
		return nil
	}
	switch {
	case !from.IsDir() && to.IsDir():
		return syscall.EISDIR
	case from.IsDir() && !to.IsDir():
		return syscall.ENOTDIR
	case from.IsDir():
		// Onto a directory with entries ("." and ".." are listed by some
		// servers).
		ents, err := p.c.ReadDirContext(ctx, newname)
		if err == nil && slices.ContainsFunc(ents, func(e fs.FileInfo) bool { return e.Name() != "." && e.Name() != ".." }) {
			return syscall.ENOTEMPTY
		}
	}
	return nil
}

func (p *sftpProvider) Symlink(ctx context.Context, oldname, newname string) error {
	if err := callErr(ctx, oldname, newname); err != nil {
		return &hostgate.LinkError{Op: "symlink", Old: oldname, New: newname, Err: err}
	}
	err := p.symlink(ctx, oldname, newname)
	if cerr := ctx.Err(); err != nil && cerr != nil && errors.Is(err, cerr) {
		err = &hostgate.LinkError{Op: "symlink", Old: oldname, New: newname, Err: cerr}
	}
	return p.lookupErr(ctx, false, err, newname) // oldname is the link's text, not looked up
}

func (p *sftpProvider) symlink(ctx context.Context, oldname, newname string) error {
	if err := p.c.SymlinkContext(ctx, oldname, newname); err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		if isFailure(err) && !saysErrno(err) {
			if _, lerr := p.c.LstatContext(ctx, newname); lerr == nil {
				err = &mappedErr{sentinel: fs.ErrExist, cause: err}
			}
		}
		return &hostgate.LinkError{Op: "symlink", Old: oldname, New: newname, Err: p.mapErr(err)}
	}
	return nil
}

func (p *sftpProvider) Readlink(ctx context.Context, name string) (string, error) {
	if err := callErr(ctx, name); err != nil {
		return "", p.pathErr("readlink", name, err)
	}
	s, err := p.c.ReadLinkContext(ctx, name)
	var se *sftp.StatusError
	if err != nil && !saysErrno(err) && errors.As(err, &se) && (se.FxCode() == sftp.ErrSSHFxFailure || se.Code == fxBadMessage) {
		// Readlink of no link is EINVAL, as os.Readlink says and as
		// callers telling links from the rest test for: OpenSSH's
		// sftp-server says it SSH_FX_BAD_MESSAGE (its errno_to_portable),
		// another server a bare Failure.
		if fi, lerr := p.c.LstatContext(ctx, name); lerr == nil && fi.Mode()&fs.ModeSymlink == 0 {
			err = &mappedErr{sentinel: syscall.EINVAL, cause: unwrapPathErr(err)}
		}
	}
	return s, p.lookupErr(ctx, false, p.pathErr("readlink", name, err), name)
}

func (p *sftpProvider) Realpath(ctx context.Context, name string) (string, error) {
	if name == "" {
		name = "." // as OpenSSH's sftp-server takes it, and ExecProvider
	}
	if err := callErr(ctx, name); err != nil {
		return "", p.pathErr("realpath", name, err)
	}
	s, err := p.c.RealPathContext(ctx, name)
	return s, p.lookAround(ctx, true, p.pathErr("realpath", name, err), name)
}

func (p *sftpProvider) Chmod(ctx context.Context, name string, mode fs.FileMode) error {
	if err := callErr(ctx, name); err != nil {
		return p.pathErr("chmod", name, err)
	}
	return p.lookupErr(ctx, true, p.pathErr("chmod", name, p.c.ChmodContext(ctx, name, mode)), name)
}

var _ hostgate.TimeSetter = (*sftpProvider)(nil)

// Chtimes sends one SETSTAT, which in SFTP version 3 carries both times
// as unsigned 32-bit seconds: a zero time is read first (a STAT), and a
// time outside 1970 to 2106 is refused, as it would wrap.
func (p *sftpProvider) Chtimes(ctx context.Context, name string, atime, mtime time.Time) error {
	return p.chtimes(ctx, "chtimes", true, name, atime, mtime)
}

// Lchtimes is Chtimes through OpenSSH's lsetstat@openssh.com (its
// sftp-server's since 8.0, the agent's server's), SETSTAT of the path
// itself; SFTP version 3 has no other way to a link's times, so a server
// without it is ErrNotSupported, said without a request.
func (p *sftpProvider) Lchtimes(ctx context.Context, name string, atime, mtime time.Time) error {
	if !p.lsetstat {
		return p.pathErr("lchtimes", name, fmt.Errorf("%w: the SFTP server does not offer lsetstat@openssh.com, the one request that sets a symbolic link's own times", hostgate.ErrNotSupported))
	}
	return p.chtimes(ctx, "lchtimes", false, name, atime, mtime)
}

func (p *sftpProvider) chtimes(ctx context.Context, op string, follow bool, name string, atime, mtime time.Time) error {
	if err := callErr(ctx, name); err != nil {
		return p.pathErr(op, name, err)
	}
	if atime.IsZero() || mtime.IsZero() {
		stat := p.c.StatContext
		if !follow {
			stat = p.c.LstatContext
		}
		fi, err := stat(ctx, name)
		if err != nil {
			return p.lookupErr(ctx, follow, p.pathErr(op, name, err), name)
		}
		st, ok := fi.Sys().(*sftp.FileStat)
		if !ok {
			return p.pathErr(op, name, fmt.Errorf("%w: the host's stat has no times", hostgate.ErrNotSupported))
		}
		if atime.IsZero() {
			atime = time.Unix(int64(st.Atime), 0)
		}
		if mtime.IsZero() {
			mtime = time.Unix(int64(st.Mtime), 0)
		}
	}
	for _, t := range []time.Time{atime, mtime} {
		if s := t.Unix(); s < 0 || s > math.MaxUint32 {
			return p.pathErr(op, name, fmt.Errorf("%w: SFTP carries times from 1970 to 2106 only, not %s", hostgate.ErrNotSupported, t.UTC().Format(time.RFC3339)))
		}
	}
	var err error
	if follow {
		err = p.c.ChtimesContext(ctx, name, atime, mtime)
	} else {
		err = p.c.LchtimesContext(ctx, name, atime, mtime)
	}
	return p.lookupErr(ctx, follow, p.pathErr(op, name, err), name)
}

// String names the provider in logs.
func (p *sftpProvider) String() string {
	return fmt.Sprintf("sftp provider (posix-rename %v)", p.posixRename)
}

// openContext opens name with flags, the open sent only while ctx has not
// ended, and waited for no longer than ctx (pkg/sftp change 29): a host
// that stopped answering would otherwise keep the caller until the
// connection's keepalive ended it, a minute past its deadline. A handle
// the host gives after is closed.
func (p *sftpProvider) openContext(ctx context.Context, name string, flags int) (*sftp.File, error) {
	open := p.c.OpenFileNoWaitContext(ctx, name, flags)
	f, err := open.WaitContext(ctx)
	if err != nil && ctx.Err() != nil && err == ctx.Err() {
		go func() {
			if f, err := open.Wait(); err == nil {
				closeFile(f)
			}
		}()
	}
	return f, err
}

// closeFile closes a file its caller gave up waiting for.
func closeFile(f *sftp.File) { _ = f.Close() }
