package syncfs

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"strings"
	"sync"
	"syscall"

	"github.com/hostgate/hostgate"
)

// An open file reads through its own buffer (a timed-out read may still
// write into it, so it is never the caller's slice). It starts at minBuf
// and grows to the caller's read size up to maxBuf — OpenSSH's largest read
// answer (SFTP_MAX_READ_LENGTH, 255 KiB) rounded up — so big reads take
// one round trip per answer while memory per file stays bounded.
const (
	minBuf = 32 << 10
	maxBuf = 256 << 10
)

// file is an open regular file. Its calls run on the session it was opened
// on. mu serializes them. A call that did not finish (a timeout, an
// abandoned session, Close) may still own buf and r: it leaves err set, and
// the file never touches them again.
type file struct {
	fsys     *FS
	s        *session
	name     string
	hostPath string
	info     fs.FileInfo

	mu  sync.Mutex
	r   io.ReadCloser // nil while a call has it (lent) or once it is gone
	buf []byte        // buf[off:] is read but not yet delivered
	off int
	pos int64 // offset of the next byte delivered
	end int64 // the file's size when last seen (at Open, a SeekEnd)
	eof bool  // r reached its end
	err error // sticky: the file is unusable

	// hand hands the reader between the file and a call's goroutine, so
	// that Close need not wait for mu (see call).
	hand    sync.Mutex
	lent    bool          // a call's goroutine has the reader
	closing bool          // Close was called
	stop    chan struct{} // closed by Close
}

var (
	_ fs.File        = (*file)(nil)
	_ io.Seeker      = (*file)(nil)
	_ fs.ReadDirFile = (*dir)(nil)
)

func (fl *file) Stat() (fs.FileInfo, error) { return fl.info, nil }

// Read delivers buffered bytes, refilling the buffer with one provider read
// (one round trip) when it is empty.
func (fl *file) Read(p []byte) (int, error) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if fl.isClosed() {
		return 0, fl.fsys.pathErr("read", fl.name, fs.ErrClosed)
	}
	if fl.off == len(fl.buf) {
		if fl.err != nil {
			return 0, fl.err
		}
		if fl.eof {
			return 0, io.EOF
		}
		if len(p) == 0 {
			return 0, nil
		}
		if err := fl.fill(len(p)); err != nil {
			return 0, err
		}
		if fl.off == len(fl.buf) {
			return 0, io.EOF
		}
	}
	n := copy(p, fl.buf[fl.off:])
	fl.off += n
	fl.pos += int64(n)
	return n, nil
}

// fill reads into the empty buffer, sized for a read of want bytes, until
// it gets bytes or the end.
func (fl *file) fill(want int) error {
	if size := min(max(want, minBuf), maxBuf); cap(fl.buf) < size {
		fl.buf = make([]byte, size)
	}
	buf, r := fl.buf[:cap(fl.buf)], fl.r
	var (
		n   int
		eof bool
	)
	err := fl.call(func(ctx context.Context, p hostgate.Provider, c *call) (io.ReadCloser, error) {
		var err error
		n, err = readSome(r, buf)
		if err == io.EOF {
			eof, err = true, nil
		}
		return r, err
	})
	if err != nil {
		return fl.fail("read", err)
	}
	fl.buf, fl.off, fl.eof = buf[:n], 0, eof
	return nil
}

// isClosed reports whether Close was called.
func (fl *file) isClosed() bool {
	fl.hand.Lock()
	defer fl.hand.Unlock()
	return fl.closing
}

// call runs do, which reads through fl.r and returns the reader the file
// reads through next, on the file's session; mu is held. Close does not
// wait for it: a Read or Seek under way on a host that does not answer held
// Close for as long as the timeout (an hour, if so set), where closing an
// os.File ends its pending reads. Such a call returns fs.ErrClosed at once
// and its goroutine, which keeps the reader, closes it on finishing. The
// file has the reader back (fl.r) only from a call that finished before
// Close.
func (fl *file) call(do func(ctx context.Context, p hostgate.Provider, c *call) (io.ReadCloser, error)) error {
	fl.hand.Lock()
	if fl.closing {
		fl.hand.Unlock()
		return fs.ErrClosed
	}
	fl.lent = true
	fl.hand.Unlock()
	fl.r = nil
	var kept io.ReadCloser
	err := fl.fsys.runStop(fl.s, fl.stop, func(ctx context.Context, p hostgate.Provider, c *call) error {
		r, err := do(ctx, p, c)
		fl.hand.Lock()
		fl.lent = false
		closing := fl.closing
		if !closing {
			kept = r
		}
		fl.hand.Unlock()
		if closing && r != nil {
			_ = r.Close()
		}
		return err
	})
	fl.hand.Lock()
	defer fl.hand.Unlock()
	if fl.lent {
		// Still under way (timed out, its session given up, or Close):
		// its goroutine keeps the reader. err is not nil.
		return err
	}
	fl.r = kept
	if kept == nil && fl.closing && err == nil {
		err = fs.ErrClosed // the call finished after Close and closed the reader
	}
	return err
}

// maxEmptyReads is how many reads in a row may return no bytes and no
// error before readSome gives up, as bufio's maxConsecutiveEmptyReads.
const maxEmptyReads = 100

// readSome reads into buf until it gets bytes or an error. A reader that
// keeps returning neither (a provider's bug) fails with io.ErrNoProgress,
// as io.ReadFull and bufio do: looping on it spun for ever, on after a
// timeout had given up the session, and FS.Close waited for it.
func readSome(r io.Reader, buf []byte) (int, error) {
	for range maxEmptyReads {
		n, err := r.Read(buf)
		if n > 0 || err != nil {
			return n, err
		}
	}
	return 0, io.ErrNoProgress
}

// fail makes err sticky and abandons buf to a call that may still run (r
// is the file's only when call gave it back, for Close to close).
func (fl *file) fail(op string, err error) error {
	fl.err = fl.fsys.pathErr(op, fl.name, err)
	fl.buf, fl.off = nil, 0
	return fl.err
}

// Seek sets the offset of the next Read. When the provider's reader seeks
// (SFTP files do) it costs one round trip; otherwise the file is opened
// again and read up to the offset. Seeking to the current offset is free.
func (fl *file) Seek(offset int64, whence int) (int64, error) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if fl.isClosed() {
		return 0, fl.fsys.pathErr("seek", fl.name, fs.ErrClosed)
	}
	if fl.err != nil {
		return 0, fl.err
	}
	var target int64
	switch whence {
	case io.SeekStart:
		target = offset
	case io.SeekCurrent:
		target = fl.pos + offset
	case io.SeekEnd:
		end, err := fl.size()
		if err != nil {
			return 0, err
		}
		target = end + offset
	default:
		return 0, fl.fsys.pathErr("seek", fl.name, fs.ErrInvalid)
	}
	if target < 0 {
		return 0, fl.fsys.pathErr("seek", fl.name, fs.ErrInvalid)
	}
	if target == fl.pos {
		return target, nil
	}
	// Within the buffer: move in it.
	if start := fl.pos - int64(fl.off); target >= start && target <= start+int64(len(fl.buf)) {
		fl.off = int(target - start)
		fl.pos = target
		return target, nil
	}
	r := fl.r
	err := fl.call(func(ctx context.Context, p hostgate.Provider, c *call) (io.ReadCloser, error) {
		if sk, ok := r.(io.Seeker); ok {
			_, err := sk.Seek(target, io.SeekStart)
			return r, err
		}
		_ = r.Close()
		nr, err := p.Open(ctx, fl.hostPath)
		if err != nil {
			return nil, err
		}
		c.advance()
		if _, err := io.CopyN(io.Discard, progressReader{nr, c}, target); err != nil && err != io.EOF {
			_ = nr.Close()
			return nil, err
		}
		return nr, nil
	})
	if err != nil {
		return 0, fl.fail("seek", err)
	}
	fl.buf, fl.off, fl.pos, fl.eof = fl.buf[:0], 0, target, false
	return target, nil
}

// size is the file's size now, one round trip, as lseek(2) takes it for
// SEEK_END: a file another writer grew since Open (a log being followed)
// ends further on. It is taken by name, the providers' open files having
// no Stat; a file removed since keeps the size it was last seen with,
// where its open file reads on (SFTP's).
func (fl *file) size() (int64, error) {
	r := fl.r
	var fi fs.FileInfo
	err := fl.call(func(ctx context.Context, p hostgate.Provider, c *call) (io.ReadCloser, error) {
		var err error
		fi, err = p.Stat(ctx, fl.hostPath)
		if errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
		return r, err
	})
	switch {
	case err != nil && fl.r == nil:
		// The reader went with a call that did not finish.
		return 0, fl.fail("seek", err)
	case err != nil:
		return 0, fl.fsys.pathErr("seek", fl.name, err)
	}
	if fi != nil && fi.Mode().IsRegular() {
		fl.end = fi.Size()
	}
	return fl.end, nil
}

// Close closes the file on the host. When its connection was abandoned
// meanwhile there is nothing left to close. A Read or Seek under way
// returns fs.ErrClosed, and the call's goroutine closes the file (call).
func (fl *file) Close() error {
	fl.hand.Lock()
	if fl.closing {
		fl.hand.Unlock()
		return fl.fsys.pathErr("close", fl.name, fs.ErrClosed)
	}
	fl.closing = true
	lent := fl.lent
	fl.hand.Unlock()
	close(fl.stop)
	if lent {
		return nil
	}
	fl.mu.Lock()
	defer fl.mu.Unlock()
	r := fl.r
	fl.r, fl.buf = nil, nil
	if r == nil || context.Cause(fl.s.ctx) != nil {
		return nil
	}
	err := fl.fsys.run(fl.s, func(ctx context.Context, p hostgate.Provider, c *call) error {
		return r.Close()
	})
	if err != nil && context.Cause(fl.s.ctx) == nil {
		return fl.fsys.pathErr("close", fl.name, err)
	}
	return nil
}

// dir is an open directory. Its first ReadDir lists it (one round trip).
type dir struct {
	fsys     *FS
	s        *session
	name     string
	hostPath string
	info     fs.FileInfo

	mu     sync.Mutex
	list   []fs.DirEntry // nil until listed
	listed bool

	// hand holds closed, which Close sets without waiting for mu (a
	// listing under way), and stop, which it closes.
	hand   sync.Mutex
	closed bool
	stop   chan struct{}
}

func (d *dir) Stat() (fs.FileInfo, error) { return d.info, nil }

func (d *dir) Read([]byte) (int, error) {
	return 0, d.fsys.pathErr("read", d.name, syscall.EISDIR)
}

// Close ends a listing under way, which returns fs.ErrClosed.
func (d *dir) Close() error {
	d.hand.Lock()
	defer d.hand.Unlock()
	if d.closed {
		return d.fsys.pathErr("close", d.name, fs.ErrClosed)
	}
	d.closed = true
	close(d.stop)
	return nil
}

func (d *dir) isClosed() bool {
	d.hand.Lock()
	defer d.hand.Unlock()
	return d.closed
}

// ReadDir returns the next n entries (all remaining when n <= 0), as
// fs.ReadDirFile says.
func (d *dir) ReadDir(n int) ([]fs.DirEntry, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.isClosed() {
		return nil, d.fsys.pathErr("readdir", d.name, fs.ErrClosed)
	}
	if !d.listed {
		var list []fs.DirEntry
		err := d.fsys.runStop(d.s, d.stop, func(ctx context.Context, p hostgate.Provider, c *call) (err error) {
			list, err = readDir(ctx, p, d.hostPath)
			return err
		})
		if err != nil {
			return nil, d.fsys.pathErr("readdir", d.name, err)
		}
		d.list, d.listed = list, true
	}
	if n <= 0 {
		list := d.list
		d.list = nil
		return list, nil
	}
	if len(d.list) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(d.list))
	list := d.list[:n:n]
	d.list = d.list[n:]
	return list, nil
}

// readDir lists a directory and takes each entry's info while still on the
// call's goroutine: a provider whose DirEntry.Info asks the host would
// otherwise block the caller without a timeout.
//
// An entry whose name is not one name in the directory is left out: the
// host said it, and no directory holds it. fs.WalkDir joins each name to
// its directory's path, so an entry "/" (pkg/sftp's path.Base of a "/"
// the host sends) listed as a directory walked "." again, forever, and
// "x/y" or ".." would be a path elsewhere. A name that is not UTF-8 is
// left out too (fs.ValidPath): no io/fs name reaches it, so this FS could
// not open what it listed; the Host's own provider lists and opens it. So
// is a name with a NUL byte, which an SFTP string carries but no POSIX
// file name holds: every provider refuses the path (fs.ErrInvalid), and
// fs.WalkDir failed on the entry.
func readDir(ctx context.Context, p hostgate.Provider, name string) ([]fs.DirEntry, error) {
	ents, err := p.ReadDir(ctx, name)
	if err != nil {
		return nil, err
	}
	list := make([]fs.DirEntry, 0, len(ents))
	for _, e := range ents {
		if !oneName(e.Name()) {
			continue
		}
		info, err := e.Info()
		list = append(list, &dirEntry{name: e.Name(), typ: e.Type(), info: info, err: err})
	}
	return list, nil
}

// oneName reports whether a host's listed name n is one name in its
// directory that an io/fs name reaches (see readDir).
func oneName(n string) bool {
	return n != "." && fs.ValidPath(n) && !strings.ContainsAny(n, "/\x00")
}

// dirEntry is a listed entry with its info already taken.
type dirEntry struct {
	name string
	typ  fs.FileMode
	info fs.FileInfo
	err  error
}

func (e *dirEntry) Name() string               { return e.name }
func (e *dirEntry) IsDir() bool                { return e.typ.IsDir() }
func (e *dirEntry) Type() fs.FileMode          { return e.typ }
func (e *dirEntry) Info() (fs.FileInfo, error) { return e.info, e.err }
func (e *dirEntry) String() string             { return fs.FormatDirEntry(e) }

// namedInfo is a FileInfo under its io/fs name: the provider names it after
// the host path, which differs at the root.
type namedInfo struct {
	fs.FileInfo
	name string
}

func (i namedInfo) Name() string   { return i.name }
func (i namedInfo) String() string { return fs.FormatFileInfo(i) }

func named(info fs.FileInfo, name string) fs.FileInfo {
	if info.Name() == name {
		return info
	}
	return namedInfo{info, name}
}
