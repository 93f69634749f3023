package hostgate

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"strings"
	"time"
)

// nameErr returns err naming host ("host build-01: …"), so that a caller
// holding many hosts learns which one failed. It leaves alone what is no
// failure of the host's (io.EOF, a process's *ExitError) and an error
// that starts with the host's name already. An error that names the host
// further in (an operation's error wrapping the lost connection's, "sshlayer:
// process: host build-01: …", or the gateway's close reason) has the name
// moved to its start: a caller reads which host first, and once.
//
// The types callers test for stay: a *fs.PathError, *LinkError,
// *os.LinkError or *os.SyscallError comes back as one of its kind with the
// host before its Op ("host build-01: stat /x: no such file or
// directory"), so that os.IsNotExist and type assertions keep working;
// anything else is wrapped, for errors.Is and errors.As, and stays a
// net.Error where it was one (the usual timeout check on a conn's error).
func nameErr(host string, err error) error { return nameErrNote(host, "", err) }

// nameErrNote is nameErr with note, when not empty, said right after the
// host's name ("host build-01: NOTE: …").
func nameErrNote(host, note string, err error) error {
	if err == nil || host == "" || err == io.EOF {
		return err
	}
	if _, ok := err.(*ExitError); ok {
		return err
	}
	named := "host " + host + ": "
	text := err.Error()
	at := strings.Index(text, named)
	if at == 0 && strings.HasPrefix(text[len(named):], note) {
		return err // named as asked already (a Host wrapping another)
	}
	prefix := named + note
	// The name said further in goes: it now comes first.
	inner := func(e error) error {
		if at < 0 {
			return e
		}
		return &unnamedError{err: e, named: named}
	}
	switch e := err.(type) {
	case *fs.PathError:
		return &fs.PathError{Op: prefix + e.Op, Path: e.Path, Err: inner(e.Err)}
	case *LinkError:
		return &LinkError{Op: prefix + e.Op, Old: e.Old, New: e.New, Err: inner(e.Err)}
	case *os.LinkError:
		return &os.LinkError{Op: prefix + e.Op, Old: e.Old, New: e.New, Err: inner(e.Err)}
	case *os.SyscallError:
		return &os.SyscallError{Syscall: prefix + e.Syscall, Err: inner(e.Err)}
	case net.Error:
		return &hostNetError{hostError{prefix: prefix, err: inner(err)}, e}
	}
	return &hostError{prefix: prefix, err: inner(err)}
}

// NameError is err naming host as a Host's own errors do ("host
// build-01: …", never twice, path and link errors keeping their type), for
// packages that build on a Host and make errors of their own (syncfs).
func NameError(host string, err error) error { return nameErr(host, err) }

// hostError is an error of the named host's: prefix names it.
type hostError struct {
	prefix string // "host NAME: ", and a note
	err    error
}

func (e *hostError) Error() string { return e.prefix + e.err.Error() }
func (e *hostError) Unwrap() error { return e.err }

// unnamedError is err whose text names the host (named, "host NAME: ")
// where nameErr put the name first: the text without its first naming.
type unnamedError struct {
	err   error
	named string
}

func (e *unnamedError) Error() string { return strings.Replace(e.err.Error(), e.named, "", 1) }
func (e *unnamedError) Unwrap() error { return e.err }

// hostNetError is a hostError that stays the net.Error it wraps.
type hostNetError struct {
	hostError
	ne net.Error
}

var _ net.Error = (*hostNetError)(nil)

func (e *hostNetError) Timeout() bool { return e.ne.Timeout() }

//lint:ignore SA1019 forwards the wrapped error's answer; net.Error still has it
func (e *hostNetError) Temporary() bool { return e.ne.Temporary() }

// namer names the errors of one host; the empty name leaves them as they
// are. done is its connection's Connection.Done, if any: an error met
// once it is closed matches ErrConnectionEnded too. Its methods are small
// enough to inline, so that a call that succeeds pays one comparison.
type namer struct {
	name string
	done <-chan struct{}
}

func (n namer) err(err error) error {
	if err == nil {
		return nil
	}
	note := ""
	if n.name != "" && connEnded(err, n.done) {
		// What to do comes first with the host, before the layers'
		// words for the loss (the gateway's reason last among them).
		note = endedNote
	}
	return endedErr(nameErrNote(n.name, note, err), n.done)
}

// endedNote follows a host's name in an error of its connection's end.
const endedNote = "connection ended (connect again): "

// connEnded reports whether err, met on a connection whose Done is done,
// is to match ErrConnectionEnded (endedErr).
func connEnded(err error, done <-chan struct{}) bool {
	if done == nil || err == io.EOF {
		return false
	}
	select {
	case <-done:
	default:
		return false
	}
	_, exit := err.(*ExitError)
	return !exit && !errors.Is(err, ErrClosed)
}

// endedErr is err, matching ErrConnectionEnded too when done is closed:
// the connection it came over had ended by itself (the agent stopped, the
// gateway restarted, keepalives failed, a sandbox ended), which a caller
// tells from any other failure with errors.Is, whichever transport the
// host has (the SSH client's own error for it, sshlayer.ErrConnectionLost,
// is in a package the caller may never import). An error of the
// transport's is made only after it closed done (the SSH client's is), so
// a failure the loss caused always matches; one met just as the
// connection ended matches too, which is as true. The text is err's, and
// the types callers test for stay, as with nameErr. Neither io.EOF, a
// process's *ExitError, nor an error after the caller's own Close
// (ErrClosed) is the connection's end.
func endedErr(err error, done <-chan struct{}) error {
	if !connEnded(err, done) || errors.Is(err, ErrConnectionEnded) {
		return err
	}
	switch e := err.(type) {
	case *fs.PathError:
		return &fs.PathError{Op: e.Op, Path: e.Path, Err: &connEndedError{e.Err}}
	case *LinkError:
		return &LinkError{Op: e.Op, Old: e.Old, New: e.New, Err: &connEndedError{e.Err}}
	case *os.LinkError:
		return &os.LinkError{Op: e.Op, Old: e.Old, New: e.New, Err: &connEndedError{e.Err}}
	case *os.SyscallError:
		return &os.SyscallError{Syscall: e.Syscall, Err: &connEndedError{e.Err}}
	case net.Error:
		return &connEndedNetError{connEndedError{err}}
	}
	return &connEndedError{err}
}

// connEndedError is an error met after its connection ended: err's text,
// matching ErrConnectionEnded and all err matches.
type connEndedError struct{ err error }

func (e *connEndedError) Error() string        { return e.err.Error() }
func (e *connEndedError) Unwrap() error        { return e.err }
func (e *connEndedError) Is(target error) bool { return target == ErrConnectionEnded }

// connEndedNetError is a connEndedError that stays the net.Error it wraps.
type connEndedNetError struct{ connEndedError }

var _ net.Error = (*connEndedNetError)(nil)

func (e *connEndedNetError) Timeout() bool { return e.err.(net.Error).Timeout() }

//lint:ignore SA1019 forwards the wrapped error's answer; net.Error still has it
func (e *connEndedNetError) Temporary() bool { return e.err.(net.Error).Temporary() }

// nameProvider returns p naming host in its errors, the errors of its
// readers and writers included. It has FileReader, FileWriter and
// TimeSetter where p has them, as the fast paths must go through p's own
// and a caller asks for TimeSetter to learn whether times can be set.
func nameProvider(p Provider, n namer) Provider {
	if n == (namer{}) {
		return p
	}
	np := &namedProvider{p: p, n: n}
	_, r := p.(FileReader)
	_, w := p.(FileWriter)
	_, t := p.(TimeSetter)
	switch {
	case r && w && t:
		return namedProviderRWT{np}
	case r && w:
		return namedProviderRW{np}
	case r && t:
		return namedProviderRT{np}
	case w && t:
		return namedProviderWT{np}
	case r:
		return namedProviderR{np}
	case w:
		return namedProviderW{np}
	case t:
		return namedProviderT{np}
	}
	return np
}

type namedProvider struct {
	p Provider
	n namer
}

var (
	_ Provider   = (*namedProvider)(nil)
	_ FileReader = namedProviderR{}
	_ FileWriter = namedProviderW{}
	_ FileReader = namedProviderRW{}
	_ FileWriter = namedProviderRW{}
	_ TimeSetter = namedProviderT{}
	_ FileReader = namedProviderRT{}
	_ TimeSetter = namedProviderRT{}
	_ FileWriter = namedProviderWT{}
	_ TimeSetter = namedProviderWT{}
	_ FileReader = namedProviderRWT{}
	_ FileWriter = namedProviderRWT{}
	_ TimeSetter = namedProviderRWT{}
)

func (p *namedProvider) Stat(ctx context.Context, name string) (fs.FileInfo, error) {
	fi, err := p.p.Stat(ctx, name)
	return fi, p.n.err(err)
}

func (p *namedProvider) Lstat(ctx context.Context, name string) (fs.FileInfo, error) {
	fi, err := p.p.Lstat(ctx, name)
	return fi, p.n.err(err)
}

func (p *namedProvider) ReadDir(ctx context.Context, name string) ([]fs.DirEntry, error) {
	des, err := p.p.ReadDir(ctx, name)
	return des, p.n.err(err)
}

func (p *namedProvider) Open(ctx context.Context, name string) (io.ReadCloser, error) {
	r, err := p.p.Open(ctx, name)
	if err != nil {
		return nil, p.n.err(err)
	}
	nr := &namedReader{r: r, n: p.n}
	if _, ok := r.(io.WriterTo); ok {
		return namedWriterToReader{nr}, nil
	}
	return nr, nil
}

func (p *namedProvider) Create(ctx context.Context, name string, perm fs.FileMode) (io.WriteCloser, error) {
	w, err := p.p.Create(ctx, name, perm)
	if err != nil {
		return nil, p.n.err(err)
	}
	nw := &namedWriter{w: w, n: p.n}
	if _, ok := w.(io.ReaderFrom); ok {
		return namedReaderFromWriter{nw}, nil
	}
	return nw, nil
}

func (p *namedProvider) Mkdir(ctx context.Context, name string, perm fs.FileMode, parents bool) error {
	return p.n.err(p.p.Mkdir(ctx, name, perm, parents))
}

func (p *namedProvider) Remove(ctx context.Context, name string, recursive bool) error {
	return p.n.err(p.p.Remove(ctx, name, recursive))
}

func (p *namedProvider) Rename(ctx context.Context, oldname, newname string) error {
	return p.n.err(p.p.Rename(ctx, oldname, newname))
}

func (p *namedProvider) Symlink(ctx context.Context, oldname, newname string) error {
	return p.n.err(p.p.Symlink(ctx, oldname, newname))
}

func (p *namedProvider) Readlink(ctx context.Context, name string) (string, error) {
	s, err := p.p.Readlink(ctx, name)
	return s, p.n.err(err)
}

func (p *namedProvider) Realpath(ctx context.Context, name string) (string, error) {
	s, err := p.p.Realpath(ctx, name)
	return s, p.n.err(err)
}

func (p *namedProvider) Chmod(ctx context.Context, name string, mode fs.FileMode) error {
	return p.n.err(p.p.Chmod(ctx, name, mode))
}

func (p *namedProvider) readFile(ctx context.Context, name string, progress func()) ([]byte, error) {
	b, err := p.p.(FileReader).ReadFile(ctx, name, progress)
	return b, p.n.err(err)
}

func (p *namedProvider) writeFile(ctx context.Context, name string, perm fs.FileMode, r io.Reader, progress func()) error {
	return p.n.err(p.p.(FileWriter).WriteFile(ctx, name, perm, r, progress))
}

type namedProviderR struct{ *namedProvider }

func (p namedProviderR) ReadFile(ctx context.Context, name string, progress func()) ([]byte, error) {
	return p.readFile(ctx, name, progress)
}

type namedProviderW struct{ *namedProvider }

func (p namedProviderW) WriteFile(ctx context.Context, name string, perm fs.FileMode, r io.Reader, progress func()) error {
	return p.writeFile(ctx, name, perm, r, progress)
}

type namedProviderRW struct{ *namedProvider }

func (p namedProviderRW) ReadFile(ctx context.Context, name string, progress func()) ([]byte, error) {
	return p.readFile(ctx, name, progress)
}

func (p namedProviderRW) WriteFile(ctx context.Context, name string, perm fs.FileMode, r io.Reader, progress func()) error {
	return p.writeFile(ctx, name, perm, r, progress)
}

func (p *namedProvider) chtimes(ctx context.Context, name string, atime, mtime time.Time) error {
	return p.n.err(p.p.(TimeSetter).Chtimes(ctx, name, atime, mtime))
}

func (p *namedProvider) lchtimes(ctx context.Context, name string, atime, mtime time.Time) error {
	return p.n.err(p.p.(TimeSetter).Lchtimes(ctx, name, atime, mtime))
}

type namedProviderT struct{ *namedProvider }

func (p namedProviderT) Chtimes(ctx context.Context, name string, atime, mtime time.Time) error {
	return p.chtimes(ctx, name, atime, mtime)
}

func (p namedProviderT) Lchtimes(ctx context.Context, name string, atime, mtime time.Time) error {
	return p.lchtimes(ctx, name, atime, mtime)
}

type namedProviderRT struct{ *namedProvider }

func (p namedProviderRT) ReadFile(ctx context.Context, name string, progress func()) ([]byte, error) {
	return p.readFile(ctx, name, progress)
}

func (p namedProviderRT) Chtimes(ctx context.Context, name string, atime, mtime time.Time) error {
	return p.chtimes(ctx, name, atime, mtime)
}

func (p namedProviderRT) Lchtimes(ctx context.Context, name string, atime, mtime time.Time) error {
	return p.lchtimes(ctx, name, atime, mtime)
}

type namedProviderWT struct{ *namedProvider }

func (p namedProviderWT) WriteFile(ctx context.Context, name string, perm fs.FileMode, r io.Reader, progress func()) error {
	return p.writeFile(ctx, name, perm, r, progress)
}

func (p namedProviderWT) Chtimes(ctx context.Context, name string, atime, mtime time.Time) error {
	return p.chtimes(ctx, name, atime, mtime)
}

func (p namedProviderWT) Lchtimes(ctx context.Context, name string, atime, mtime time.Time) error {
	return p.lchtimes(ctx, name, atime, mtime)
}

type namedProviderRWT struct{ *namedProvider }

func (p namedProviderRWT) ReadFile(ctx context.Context, name string, progress func()) ([]byte, error) {
	return p.readFile(ctx, name, progress)
}

func (p namedProviderRWT) WriteFile(ctx context.Context, name string, perm fs.FileMode, r io.Reader, progress func()) error {
	return p.writeFile(ctx, name, perm, r, progress)
}

func (p namedProviderRWT) Chtimes(ctx context.Context, name string, atime, mtime time.Time) error {
	return p.chtimes(ctx, name, atime, mtime)
}

func (p namedProviderRWT) Lchtimes(ctx context.Context, name string, atime, mtime time.Time) error {
	return p.lchtimes(ctx, name, atime, mtime)
}

// namedReader is a file's reader from Open, naming the host in its
// errors.
type namedReader struct {
	r io.ReadCloser
	n namer
}

func (r *namedReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	return n, r.n.err(err)
}

func (r *namedReader) Close() error { return r.n.err(r.r.Close()) }

// namedWriterToReader keeps the WriteTo of a reader that has one (io.Copy
// takes it, and the SFTP reader's pipelines its reads).
type namedWriterToReader struct{ *namedReader }

func (r namedWriterToReader) WriteTo(w io.Writer) (int64, error) {
	n, err := r.r.(io.WriterTo).WriteTo(w)
	return n, r.n.err(err)
}

// namedWriter is a file's writer from Create, naming the host in its
// errors.
type namedWriter struct {
	w io.WriteCloser
	n namer
}

func (w *namedWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	return n, w.n.err(err)
}

func (w *namedWriter) Close() error { return w.n.err(w.w.Close()) }

// namedReaderFromWriter keeps the ReadFrom of a writer that has one.
type namedReaderFromWriter struct{ *namedWriter }

func (w namedReaderFromWriter) ReadFrom(r io.Reader) (int64, error) {
	n, err := w.w.(io.ReaderFrom).ReadFrom(r)
	return n, w.n.err(err)
}

// nameProcess returns p naming host in the errors of its Wait, Kill,
// Resize and streams; it is a Resizer where p is.
func nameProcess(p Process, n namer) Process {
	if n == (namer{}) {
		return p
	}
	np := &namedProcess{p: p, n: n}
	if _, ok := p.(Resizer); ok {
		return resizableNamedProcess{np}
	}
	return np
}

// namedProcess is the one allocation naming a process: its streams are
// views of it (procStdin and the others), which ask p for the stream at
// each call.
type namedProcess struct {
	p Process
	n namer
}

func (p *namedProcess) Stdin() io.WriteCloser { return (*procStdin)(p) }
func (p *namedProcess) Stdout() io.Reader     { return (*procStdout)(p) }
func (p *namedProcess) Stderr() io.Reader     { return (*procStderr)(p) }
func (p *namedProcess) Wait() error           { return p.n.err(p.p.Wait()) }
func (p *namedProcess) Kill(sig Signal) error { return p.n.err(p.p.Kill(sig)) }

// Exited is p's (exitedOf).
func (p *namedProcess) Exited() <-chan struct{} { return exitedOf(p.p) }

type resizableNamedProcess struct{ *namedProcess }

func (p resizableNamedProcess) Resize(cols, rows int) error {
	return p.n.err(p.p.(Resizer).Resize(cols, rows))
}

type (
	procStdin  namedProcess
	procStdout namedProcess
	procStderr namedProcess
)

func (s *procStdin) Write(b []byte) (int, error) {
	n, err := s.p.Stdin().Write(b)
	return n, s.n.err(err)
}

func (s *procStdin) Close() error { return s.n.err(s.p.Stdin().Close()) }

func (s *procStdout) Read(b []byte) (int, error) {
	n, err := s.p.Stdout().Read(b)
	return n, s.n.err(err)
}

func (s *procStderr) Read(b []byte) (int, error) {
	n, err := s.p.Stderr().Read(b)
	return n, s.n.err(err)
}

// nameConn returns c naming host in its errors (io.EOF stays); it has
// CloseWrite where c has.
func nameConn(c net.Conn, n namer) net.Conn {
	if n == (namer{}) {
		return c
	}
	nc := &namedConn{Conn: c, n: n}
	if _, ok := c.(interface{ CloseWrite() error }); ok {
		return halfClosableNamedConn{nc}
	}
	return nc
}

type namedConn struct {
	net.Conn
	n namer
}

func (c *namedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	return n, c.n.err(err)
}

func (c *namedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	return n, c.n.err(err)
}

func (c *namedConn) Close() error { return c.n.err(c.Conn.Close()) }

type halfClosableNamedConn struct{ *namedConn }

func (c halfClosableNamedConn) CloseWrite() error {
	return c.n.err(c.Conn.(interface{ CloseWrite() error }).CloseWrite())
}

// nameForwarder returns f naming host in its errors and in those of the
// conns and listeners it hands out. It is an EarlyDialer, and has Done,
// where f has them: Host.Forward and the forward package look for both.
func nameForwarder(f Forwarder, n namer) Forwarder {
	if f == nil || n == (namer{}) {
		return f
	}
	nf := &namedForwarder{f: f, n: n}
	_, early := f.(EarlyDialer)
	_, done := f.(doner)
	switch {
	case early && done:
		return namedEarlyDoneForwarder{namedEarlyForwarder{nf}}
	case early:
		return namedEarlyForwarder{nf}
	case done:
		return namedDoneForwarder{nf}
	}
	return nf
}

// doner is a forwarder that tells when its connection ends.
type doner interface{ Done() <-chan struct{} }

type namedForwarder struct {
	f Forwarder
	n namer
}

var (
	_ EarlyDialer = namedEarlyForwarder{}
	_ EarlyDialer = namedEarlyDoneForwarder{}
	_ doner       = namedDoneForwarder{}
	_ doner       = namedEarlyDoneForwarder{}
)

func (f *namedForwarder) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := f.f.Dial(ctx, network, addr)
	if err != nil {
		return nil, f.n.err(err)
	}
	return nameConn(c, f.n), nil
}

func (f *namedForwarder) Listen(ctx context.Context, network, addr string) (net.Listener, error) {
	ln, err := f.f.Listen(ctx, network, addr)
	if err != nil {
		return nil, f.n.err(err)
	}
	return nameListener(ln, f.n), nil
}

type namedEarlyForwarder struct{ *namedForwarder }

func (f namedEarlyForwarder) DialEarly(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := f.f.(EarlyDialer).DialEarly(ctx, network, addr)
	if err != nil {
		return nil, f.n.err(err)
	}
	return nameConn(c, f.n), nil
}

// TakesEarlyData is the named forwarder's answer.
func (f namedEarlyForwarder) TakesEarlyData(ctx context.Context) bool {
	return TakesEarlyData(ctx, f.f)
}

type namedDoneForwarder struct{ *namedForwarder }

func (f namedDoneForwarder) Done() <-chan struct{} { return f.f.(doner).Done() }

// Wait is why the connection ended, once Done is closed, where the
// forwarder tells (the SSH client's Wait); nil where it does not. The
// forward package's Err says it.
func (f namedDoneForwarder) Wait() error { return waitOf(f.f) }

type namedEarlyDoneForwarder struct{ namedEarlyForwarder }

func (f namedEarlyDoneForwarder) Done() <-chan struct{} { return f.f.(doner).Done() }

// Wait is namedDoneForwarder's.
func (f namedEarlyDoneForwarder) Wait() error { return waitOf(f.f) }

func waitOf(f Forwarder) error {
	if w, ok := f.(interface{ Wait() error }); ok {
		return w.Wait()
	}
	return nil
}

// nameListener returns ln naming host in its errors and in those of the
// connections it accepts.
func nameListener(ln net.Listener, n namer) net.Listener {
	if n == (namer{}) {
		return ln
	}
	return &namedListener{Listener: ln, n: n}
}

// namedListener is a listener on the host naming it in its errors and in
// those of the connections it accepts.
type namedListener struct {
	net.Listener
	n namer
}

func (l *namedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, l.n.err(err)
	}
	return nameConn(c, l.n), nil
}

func (l *namedListener) Close() error { return l.n.err(l.Listener.Close()) }
