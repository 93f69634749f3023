package sshlayer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"slices"
	"sync"
	"syscall"

	"github.com/hostgate/hostgate/third_party/github.com/pkg/sftp"

	"github.com/hostgate/hostgate"
)

// Whole-file calls pipeline their SFTP requests (pkg/sftp's NoWait calls,
// third_party/github.com/pkg/sftp/HOSTGATE.md change 3): a ReadFile of a
// small file takes two round trips (open; fstat and the first read), its
// close going out behind them without being waited for; a WriteFile
// three (open; the writes, after the chmod a new file needs; close).
// Through Open, Read and Close they took four and six.

var (
	_ hostgate.FileReader = (*sftpProvider)(nil)
	_ hostgate.FileWriter = (*sftpProvider)(nil)
)

// chunkPool holds the buffers of whole-file reads and writes, one request's
// data each.
var chunkPool = sync.Pool{New: func() any { return new([sftpMaxPacket]byte) }}

var errEmptyRead = errors.New("sshlayer: sftp: the server answered a read with no bytes and no end of file")

// readPrealloc bounds the buffer a ReadFile sizes from the host's fstat
// before it has the bytes: a bigger file grows it as its data arrives.
const readPrealloc = 64 << 20

func tick(progress func()) {
	if progress != nil {
		progress()
	}
}

// ReadFile reads name whole. The first read goes out with the fstat whose
// size tells whether it was all (a short read that ends at the size of a
// regular file); a bigger file is read with up to sftpConcurrency requests
// in flight. The handle's close is sent on every way out, also when ctx
// ends, but not waited for: as with os.ReadFile, a failed close after a
// complete read is no error of the read. The end of ctx ends a wait for a
// read's answer, which a server may never send (a hung mount).
func (p *sftpProvider) ReadFile(ctx context.Context, name string, progress func()) ([]byte, error) {
	data, err := p.readFile(ctx, name, progress)
	return data, p.lookupErr(ctx, true, err, name)
}

func (p *sftpProvider) readFile(ctx context.Context, name string, progress func()) ([]byte, error) {
	if err := callErr(ctx, name); err != nil {
		return nil, p.pathErr("open", name, err)
	}
	// Not past ctx, for a host that stopped answering, or reading (its
	// send, pkg/sftp change 29); a handle that comes after is closed.
	open := p.c.OpenFileNoWaitContext(ctx, name, os.O_RDONLY)
	f, err := open.WaitContext(ctx)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil && err == cerr {
			go func() {
				if f, err := open.Wait(); err == nil {
					closeFile(f)
				}
			}()
		}
		return nil, p.pathErr("open", name, err)
	}
	defer f.CloseNoWait()
	// The handle's requests wait no longer than ctx to be sent either
	// (behind a send that waits on a window the host does not grant): a
	// File's are bounded by its Abort (pkg/sftp changes 16 and 29).
	defer context.AfterFunc(ctx, func() { f.Abort(ctx.Err()) })()
	tick(progress)
	if err := ctx.Err(); err != nil {
		return nil, p.pathErr("read", name, err)
	}

	first := chunkPool.Get().(*[sftpMaxPacket]byte)
	defer chunkPool.Put(first)
	stat := f.StatNoWait()
	// What the server answers, if known; not past ctx for a host that
	// offers its limits and never answers them (pkg/sftp change 27).
	chunk, err := p.c.ReadSizeContext(ctx)
	if err != nil {
		return nil, p.pathErr("read", name, err)
	}
	chunk = min(sftpMaxPacket, chunk)
	read := f.ReadAtNoWait(first[:chunk], 0)
	fi, serr := stat.WaitContext(ctx)
	n, err := read.WaitContext(ctx)
	tick(progress)
	switch {
	case err == io.EOF:
		return []byte{}, nil
	case err != nil:
		// SFTP opens a directory and fails its read with a bare
		// "Failure": say what os.ReadFile says.
		if serr == nil && fi.IsDir() {
			err = syscall.EISDIR
		}
		return nil, p.pathErr("read", name, err)
	}
	size := int64(-1) // unknown: read to EOF
	if serr == nil && fi.Mode().IsRegular() {
		size = fi.Size()
	}
	if n < chunk && int64(n) == size {
		return bytes.Clone(first[:n]), nil
	}
	if n == 0 {
		return nil, p.pathErr("read", name, errEmptyRead)
	}
	// A short answer inside a regular file is the server's largest read,
	// as the client's own reads take it: at least sftp.MinReadSize, and
	// one under that is counted (sftp.ShortReads). A file of another
	// kind (a FIFO) answers what it has, and one read past its stat's
	// size (a /proc file's is 0) what it holds there: neither says
	// anything of the server.
	var tr *sftp.ShortReads
	if size >= 0 {
		tr = &sftp.ShortReads{Size: size}
		if n < chunk && tr.Inside(int64(n)) {
			_ = tr.Short(int64(n), chunk, n)
			chunk = min(chunk, p.c.LearnReadSize(n))
		}
	}
	data := make([]byte, n, max(int64(n), min(size+1, readPrealloc)))
	copy(data, first[:n])
	return p.readRest(ctx, f, name, data, size, chunk, tr, progress)
}

// readRest reads f from len(data) to its end. Where the fstat gave a size,
// it reads up to it (and a byte past it, so that the end is seen) with
// up to sftpConcurrency requests in flight straight into data, grown a
// segment of at most readPrealloc at a time, so a size the host made up
// costs no more memory than the bytes it sends; then, like a file of
// unknown size or one that grew, one request at a time to EOF.
func (p *sftpProvider) readRest(ctx context.Context, f *sftp.File, name string, data []byte, size int64, chunk int, tr *sftp.ShortReads, progress func()) ([]byte, error) {
	for int64(len(data)) <= size {
		start := len(data)
		end := int64(start) + readPrealloc
		if end > size {
			end = size + 1
		}
		data = slices.Grow(data, int(end)-start)[:end]
		stop := -1 // where a short answer is the end of the file
		if end == size+1 {
			stop = int(size)
		}
		got, eof, err := p.readSegment(ctx, f, data, start, stop, &chunk, tr, progress)
		if err != nil {
			return nil, p.pathErr("read", name, err)
		}
		data = data[:got]
		if eof || got == stop {
			return data, nil
		}
		if got < int(end) {
			break // the file shrank, or its end is not where the size said
		}
	}
	buf := chunkPool.Get().(*[sftpMaxPacket]byte)
	defer chunkPool.Put(buf)
	for {
		if err := ctx.Err(); err != nil {
			return nil, p.pathErr("read", name, err)
		}
		n, err := f.ReadAtNoWait(buf[:chunk], int64(len(data))).WaitContext(ctx)
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return nil, p.pathErr("read", name, err)
		}
		tick(progress)
		data = append(data, buf[:n]...)
	}
}

// readSegment fills data[start:] from f with reads in flight as the
// client's own downloads keep them (sftp.Client.RequestsFor: sftpConcurrency
// of sftpMaxPacket, more of a smaller size), taking their answers in order. It returns how far data was
// filled without a gap, and whether a read there met the end of the file;
// a short answer that ends at stop ends it there, as the end the fstat's
// size said.
// A short answer inside the segment is taken as the server's largest
// read, which *chunk becomes (at least sftp.MinReadSize, as the client's
// own reads take it; tr counts the answers under it and ends the read
// with sftp.ErrTinyReads after too many); the rest of its piece is asked
// for again in pieces of that size. Reads left in flight when it returns are never
// waited for, so their answers are dropped, never written into data.
func (p *sftpProvider) readSegment(ctx context.Context, f *sftp.File, data []byte, start, stop int, chunk *int, tr *sftp.ShortReads, progress func()) (int, bool, error) {
	type read struct {
		b   []byte // data[off:off+len(b)]
		off int
		p   *sftp.Pending[int]
	}
	send := func(off, end int) read {
		b := data[off:end]
		return read{b: b, off: off, p: f.ReadAtNoWait(b, int64(off))}
	}
	var queue []read
	next := start
	for {
		for len(queue) < p.c.RequestsFor(*chunk) && next < len(data) {
			end := min(next+*chunk, len(data))
			queue = append(queue, send(next, end))
			next = end
		}
		if len(queue) == 0 {
			return len(data), false, nil
		}
		r := queue[0]
		queue = queue[1:]
		n, err := r.p.WaitContext(ctx)
		switch {
		case err == io.EOF:
			return r.off, true, nil
		case err != nil:
			return 0, false, err
		}
		tick(progress)
		if n < len(r.b) {
			if r.off+n == stop {
				return stop, false, nil
			}
			if n == 0 {
				return 0, false, errEmptyRead
			}
			if err := tr.Short(int64(r.off+n), len(r.b), n); err != nil {
				return 0, false, err
			}
			if tr.Inside(int64(r.off + n)) {
				*chunk = min(*chunk, p.c.LearnReadSize(n))
			}
			// Ask again for the rest, in pieces the server answers
			// whole, ahead of the answers still to come.
			piece := max(*chunk, (len(r.b)-n+sftpConcurrency-1)/sftpConcurrency)
			var again []read
			for off := r.off + n; off < r.off+len(r.b); off += piece {
				again = append(again, send(off, min(off+piece, r.off+len(r.b))))
			}
			queue = append(again, queue...)
		}
		if err := ctx.Err(); err != nil {
			return 0, false, err
		}
	}
}

// WriteFile writes name whole with the semantics of Create (a new file
// gets perm &^ umask, an existing one keeps its mode) in three round
// trips:
//
//  1. OPEN with O_CREAT|O_EXCL, LSTAT, OPEN with O_TRUNC, in that order. Whichever
//     order the server takes them in, an exclusive open that succeeded
//     created the file (the plain one may then have opened it too, and is
//     closed), and one that failed leaves the plain open to truncate the
//     file that was there. The LSTAT, taken after the create by a server
//     that keeps request order (OpenSSH's and pkg/sftp's do), gives the
//     mode it created the file with, so the umask, without the fstat
//     Create needs.
//  2. the chmod a new file needs, then the writes, sftpConcurrency in
//     flight. (Through Create, the chmod was answered before the first
//     write; a reader that opened the file before either keeps its
//     descriptor all the same.)
//  3. CLOSE, whose error is WriteFile's.
//
// A name that is a dangling symlink (which O_EXCL refuses and a plain open
// does not create through) goes the way of Create.
func (p *sftpProvider) WriteFile(ctx context.Context, name string, perm fs.FileMode, r io.Reader, progress func()) error {
	return p.lookupErr(ctx, true, p.writeFile(ctx, name, perm, r, progress), name)
}

// errDangling is openForWrite's word for a name that is a dangling
// symlink, whose target Create makes (create).
var errDangling = errors.New("sshlayer: sftp: a dangling symlink")

// openForWrite opens name as Create does (created with perm &^ umask, or
// truncated) in one round trip: an exclusive create, the name's lstat and
// a truncating open go out together. A file it creates gets its mode by a
// chmod sent behind the open, returned unwaited (nil: none). Its errors
// are said as Create's, but errDangling, for which Create's own way
// (create) makes the symlink's target.
func (p *sftpProvider) openForWrite(ctx context.Context, name string, perm fs.FileMode) (*sftp.File, *sftp.Pending[struct{}], error) {
	if err := callErr(ctx, name); err != nil {
		return nil, nil, p.pathErr("create", name, err)
	}
	// O_TRUNC too: a server that ignored O_EXCL must not leave the end of
	// an older, longer file behind the new data. Their sends wait no
	// longer than ctx (pkg/sftp change 29): once one fails so, so do
	// those after it.
	excl := p.c.OpenFileNoWaitContext(ctx, name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_TRUNC)
	lstat := p.c.LstatNoWaitContext(ctx, name)
	trunc := p.c.OpenFileNoWaitContext(ctx, name, os.O_WRONLY|os.O_TRUNC)
	var (
		fe, ft     *sftp.File
		fi         fs.FileInfo
		eerr, terr error
		lerr       error
	)
	opened := make(chan struct{})
	go func() {
		defer close(opened)
		fe, eerr = excl.Wait()
		fi, lerr = lstat.Wait()
		ft, terr = trunc.Wait()
	}()
	select {
	case <-opened:
	case <-ctx.Done():
		// A host that stopped answering: not past ctx (found by the
		// stuckwrite audit). What opens after is closed.
		go func() {
			<-opened
			if eerr == nil {
				fe.CloseNoWait()
			}
			if terr == nil {
				ft.CloseNoWait()
			}
		}()
		return nil, nil, p.pathErr("create", name, ctx.Err())
	}
	var (
		f     *sftp.File
		isNew bool
	)
	switch {
	case eerr == nil:
		f, isNew = fe, true
		if terr == nil {
			ft.CloseNoWait()
		}
	case terr == nil:
		f = ft
	case !errors.Is(terr, fs.ErrNotExist):
		// The name is there and cannot be opened for writing: what
		// Create's open says.
		if isFailure(terr) && lerr == nil && p.isDir(ctx, fi, name) {
			terr = syscall.EISDIR
		}
		return nil, nil, p.pathErr("create", name, terr)
	case isFailure(eerr) || errors.Is(mapSFTPErr(eerr), fs.ErrExist):
		// The name is there (O_EXCL says EEXIST with a bare Failure)
		// but a plain open finds nothing: a dangling symlink, whose
		// target Create makes.
		return nil, nil, errDangling
	default:
		// Nothing there, and the create failed.
		return nil, nil, p.pathErr("create", name, eerr)
	}
	var chmod *sftp.Pending[struct{}]
	if isNew {
		if lerr != nil || !fi.Mode().IsRegular() {
			// The server took the LSTAT before the create: ask the handle,
			// not past ctx.
			fi, lerr = f.StatNoWait().WaitContext(ctx)
			if err := ctx.Err(); err != nil && lerr == err {
				f.CloseNoWait()
				return nil, nil, p.pathErr("create", name, err)
			}
		}
		if lerr == nil {
			created := fi.Mode().Perm()
			if want := createMode(created, perm); want != created {
				chmod = f.ChmodNoWait(want)
			}
		}
	}
	return f, chmod, nil
}

func (p *sftpProvider) writeFile(ctx context.Context, name string, perm fs.FileMode, r io.Reader, progress func()) error {
	f, chmod, err := p.openForWrite(ctx, name, perm)
	if errors.Is(err, errDangling) {
		w, err := p.Create(ctx, name, perm)
		if err != nil {
			return err
		}
		if _, err := io.Copy(w, r); err != nil {
			_ = w.Close()
			return err
		}
		return w.Close()
	}
	if err != nil {
		return err
	}
	tick(progress)
	closing, err := p.writeAll(ctx, f, name, r, progress)
	if err != nil {
		if ctx.Err() != nil {
			// Before the close: a write waiting on a host that
			// stopped reading gives up (pkg/sftp change 16), and the
			// close does not wait behind it.
			f.Abort(ctx.Err())
		}
		if closing == nil {
			f.CloseNoWait()
		}
		return p.fullDisk(ctx, name, err)
	}
	// Not past ctx: a host that answered the writes but not these held
	// WriteFile until the connection ended.
	if chmod != nil {
		if _, err := chmod.WaitContext(ctx); err != nil {
			return p.pathErr("create", name, err)
		}
	}
	if _, err := closing.WaitContext(ctx); err != nil {
		return p.pathErr("close", name, err)
	}
	return nil
}

// writeAll writes what r yields to f from offset 0, with up to
// sftpConcurrency writes in flight. A write's data is on its way once it is
// sent, so one buffer serves them all. Once r is read it sends f's close
// behind the last writes, not after their answers (a server takes a
// handle's requests in order: OpenSSH's one at a time, pkg/sftp's closes
// after the handle's reads and writes), and returns it unwaited: a round
// trip less. On an error it returns the close if it was sent, else nil.
func (p *sftpProvider) writeAll(ctx context.Context, f *sftp.File, name string, r io.Reader, progress func()) (*sftp.Pending[struct{}], error) {
	buf := chunkPool.Get().(*[sftpMaxPacket]byte)
	defer chunkPool.Put(buf)
	// WriteAtNoWait sends at most the client's WriteSize of a write (the
	// server's limit, if smaller) and drops the rest: fill no more than
	// that.
	// Not past ctx (pkg/sftp change 27).
	chunk, err := p.c.WriteSizeContext(ctx)
	if err != nil {
		return nil, p.pathErr("write", name, err)
	}
	chunk = min(sftpMaxPacket, chunk)
	// ctx's end aborts f: the write whose send waits on the window of a
	// host that stopped reading gives up, and so do the waits for the
	// replies (pkg/sftp changes 15 and 16). Both waited for the
	// connection's end (found by the stuckwrite audit).
	stop := context.AfterFunc(ctx, func() { f.Abort(ctx.Err()) })
	defer stop()
	var (
		queue   []*sftp.Pending[int]
		off     int64
		eof     bool
		closing *sftp.Pending[struct{}]
	)
	for !eof || len(queue) > 0 {
		for !eof && len(queue) < sftpConcurrency {
			n, err := io.ReadFull(r, buf[:chunk])
			switch {
			case err == io.EOF:
				eof = true
				continue
			case err == io.ErrUnexpectedEOF:
				eof = true
			case err != nil:
				return nil, p.pathErr("write", name, err)
			}
			queue = append(queue, f.WriteAtNoWait(buf[:n], off))
			off += int64(n)
		}
		if eof && closing == nil {
			closing = f.CloseNoWait()
		}
		if len(queue) == 0 {
			break
		}
		if _, err := queue[0].Wait(); err != nil {
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				err = ctx.Err() // not wrapped twice (the abort)
			}
			return closing, p.pathErr("write", name, err)
		}
		queue = queue[1:]
		tick(progress)
		if err := ctx.Err(); err != nil {
			return closing, p.pathErr("write", name, err)
		}
	}
	return closing, nil
}
