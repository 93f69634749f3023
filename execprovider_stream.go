package hostgate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync"
	"sync/atomic"
	"time"
)

// openScript checks $1, prints one marker byte so Open can report errors
// before returning, then streams the file.
const openScript = `[ -e "$1" ] || nx "$1"
[ -d "$1" ] && exit 94
[ -r "$1" ] || exit 92
printf k
exec cat -- "$1"`

// createScript checks that $1's directory exists (shells word the failed
// redirection differently), creates or truncates $1, applies perm &^ umask to a new file
// (cat's redirection would use 0666 &^ umask), prints the marker once the
// file is writable, then streams stdin into it. A new file is created
// under a umask that leaves it no more than perm allows, then given perm
// (execute and set-id bits, which creation cannot): created at 0666 &^
// umask and chmod-ed after, a 0600 file was readable by others meanwhile,
// and a handle opened then keeps reading. A name ending in a slash is in
// the directory its last name is in (n is it without the slashes), and
// is EISDIR there whatever it is, as open(2) with O_CREAT says it.
const createScript = `[ -d "$1" ] && exit 94
n=${1%"${1##*[!/]}"}
case $n in */*) d=${n%/*}; [ -n "$d" ] || d=/;; *) d=.;; esac
[ -d "$d" ] || { [ -e "$d" ] && exit 93; nx "$d"; }
[ "$n" = "$1" ] || exit 94
if [ -e "$1" ] || [ -L "$1" ]; then
  : > "$1" || exit
else
  m=$(umask) && m=$(printf '%o' $(( 0$2 & ~0$m ))) || exit
  (umask "$(printf '%o' $(( 0777 & ~0$m )))" && : > "$1") || exit
  chmod "$m" "$1" || exit
fi
printf k
exec cat >> "$1"`

func (p *execProvider) Open(ctx context.Context, name string) (io.ReadCloser, error) {
	if name == "" {
		return nil, pathErr("open", name, fs.ErrNotExist)
	}
	s, err := p.startStream(ctx, "open", name, openScript, safePath(name))
	if err != nil {
		return nil, err
	}
	_ = s.proc.Stdin().Close()
	return &streamReader{s}, nil
}

func (p *execProvider) Create(ctx context.Context, name string, perm fs.FileMode) (io.WriteCloser, error) {
	if name == "" {
		return nil, pathErr("create", name, fs.ErrNotExist)
	}
	s, err := p.startStream(ctx, "create", name, createScript, safePath(name), unixPerm(perm))
	if err != nil {
		return nil, err
	}
	return &streamWriter{s}, nil
}

// stream is one cat process behind Open or Create. Its stderr is drained by
// a goroutine that finish waits for.
type stream struct {
	op, name string
	proc     Process
	ctx      context.Context // the caller's: a write cut short by it fails
	cancel   context.CancelFunc
	stderr   bytes.Buffer
	// stderrOver is set before errDone closes: stderr passed maxStderr
	// and the command was killed.
	stderrOver bool
	errDone    chan struct{}
	// out is proc's stdout, read through reads: odd while a Read of it
	// waits (watchHeld).
	out   watchedReader
	reads atomic.Uint64

	once sync.Once
	err  error
}

func (p *execProvider) startStream(ctx context.Context, op, name, script string, args ...string) (*stream, error) {
	// The stream outlives this call but not ctx.
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	proc, err := p.spawn(ctx, script, args...)
	if err != nil {
		cancel()
		return nil, pathErr(op, name, err)
	}
	s := &stream{op: op, name: name, proc: proc, ctx: parent, cancel: cancel, errDone: make(chan struct{})}
	s.out = watchedReader{s}
	if told := exitedOf(proc); told != nil {
		go s.watchHeld(told, ctx.Done(), outputHeldGrace)
	}
	go func() {
		defer close(s.errDone)
		s.stderrOver = readStderr(&s.stderr, proc.Stderr(), func() {
			_ = proc.Kill(SIGKILL)
			cancel()
		})
	}()
	var mark [1]byte
	if _, err := io.ReadFull(s.out, mark[:]); err != nil || mark[0] != 'k' {
		_ = proc.Stdin().Close()
		_, _ = io.Copy(io.Discard, s.out)
		ferr := s.finish()
		if ferr == nil {
			ferr = pathErr(op, name, errors.New("no start marker from remote command"))
		}
		return nil, ferr
	}
	return s, nil
}

// watchHeld kills the process once the host has told that it exited
// (told) and a Read of its stdout has then waited grace without a byte,
// which has the SSH client close the session, keeping the status told:
// OpenSSH's sshd keeps a session open while anything holds its output (a
// process the shell's startup files left in the background, say), and a
// read waited for its end for ever. A Read waiting, not the time since
// the exit: the host may still hold what cat wrote before it exited,
// which it sends only as fast as the caller reads. It ends with the
// stream (done: finish, Close) or with its kill.
func (s *stream) watchHeld(told, done <-chan struct{}, grace time.Duration) {
	select {
	case <-told:
	case <-done:
		return
	}
	tick := time.NewTicker(grace)
	defer tick.Stop()
	last := s.reads.Load()
	for {
		select {
		case <-tick.C:
		case <-done:
			return
		}
		// Odd and unchanged: one Read has waited the whole tick.
		if now := s.reads.Load(); now != last || now%2 == 0 {
			last = now
			continue
		}
		_ = s.proc.Kill(SIGKILL)
		return
	}
}

// watchedReader is a stream's stdout, counting its Reads for watchHeld.
type watchedReader struct{ s *stream }

func (r watchedReader) Read(b []byte) (int, error) {
	r.s.reads.Add(1)
	defer r.s.reads.Add(1)
	return r.s.proc.Stdout().Read(b)
}

// finish waits for the process, whose stdout must be at EOF, and returns
// the mapped error; only the first call does the work.
func (s *stream) finish() error {
	s.once.Do(func() {
		<-s.errDone
		// Not past the caller's ctx, as run.
		_, werr := waitCtx(s.ctx, s.proc)
		s.cancel()
		err := mapExit(werr, s.stderr.Bytes())
		if s.stderrOver {
			// Killed at the bound, not by ctx.
			err = stderrLimitErr()
		} else if cerr := ctxErr(s.ctx); cerr != nil {
			// Killed by ctx, or a stream the caller abandoned: a write may
			// have left a partial file, and a read may have lost what the
			// transport still buffered when it closed the channel even
			// though the remote cat exited 0 (seen over sshd in CI: 4096010
			// of 4194304 bytes, then EOF). Neither is what the caller asked
			// for.
			err = cerr
		}
		s.err = pathErr(s.op, s.name, err)
	})
	return s.err
}

type streamReader struct{ s *stream }

func (r *streamReader) Read(b []byte) (int, error) {
	n, err := r.s.out.Read(b)
	if err == io.EOF {
		if ferr := r.s.finish(); ferr != nil {
			return n, ferr
		}
	}
	return n, err
}

// WriteTo lets io.Copy use the process's stdout directly.
func (r *streamReader) WriteTo(w io.Writer) (int64, error) {
	n, err := io.Copy(w, r.s.out)
	if err != nil {
		return n, err
	}
	return n, r.s.finish()
}

// Close ends the read; before EOF it kills cat.
func (r *streamReader) Close() error {
	r.s.once.Do(func() {
		_ = r.s.proc.Kill(SIGKILL)
		r.s.cancel()
		// Drain so a transport that copies into a pipe can finish.
		_, _ = io.Copy(io.Discard, r.s.out)
		<-r.s.errDone
		_, _ = waitCtx(r.s.ctx, r.s.proc)
	})
	return nil
}

type streamWriter struct{ s *stream }

func (w *streamWriter) Write(b []byte) (int, error) {
	n, err := w.s.proc.Stdin().Write(b)
	if err != nil {
		// The command failed (disk full, killed): report its error.
		_ = w.s.proc.Stdin().Close()
		if ferr := w.s.finishDrained(); ferr != nil {
			return n, ferr
		}
		return n, pathErr(w.s.op, w.s.name, fmt.Errorf("write: %w", err))
	}
	return n, nil
}

// ReadFrom lets io.Copy feed the process's stdin directly. A failed write
// is reported as Write reports it, by the command's error: io.Copy of a
// file (os.File's WriteTo comes here) onto a full disk said "write |1:
// broken pipe", the ENOSPC only in a Close the caller rarely checks after
// that. An error of r's own is r's, not the file's.
func (w *streamWriter) ReadFrom(r io.Reader) (int64, error) {
	src := &readErr{r: r}
	n, err := io.Copy(w.s.proc.Stdin(), src)
	if err == nil {
		return n, nil
	}
	if src.err != nil && err == src.err {
		return n, err
	}
	_ = w.s.proc.Stdin().Close()
	if ferr := w.s.finishDrained(); ferr != nil {
		return n, ferr
	}
	return n, pathErr(w.s.op, w.s.name, fmt.Errorf("write: %w", err))
}

// readErr is r, keeping its last error: ReadFrom tells r's failure from
// the command's by it.
type readErr struct {
	r   io.Reader
	err error
}

func (r *readErr) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		r.err = err
	}
	return n, err
}

// Close sends EOF and waits for cat to finish writing the file.
func (w *streamWriter) Close() error {
	_ = w.s.proc.Stdin().Close()
	return w.s.finishDrained()
}

func (s *stream) finishDrained() error {
	_, _ = io.Copy(io.Discard, s.out)
	return s.finish()
}
