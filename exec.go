package hostgate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// DefaultMaxOutput is Exec's output limit when ExecOptions.MaxOutput is 0.
const DefaultMaxOutput = 16 << 20

// ExecOptions are the knobs of Host.Exec.
type ExecOptions struct {
	SpawnOptions
	// Stdin, when set, is copied to the process's stdin, which is then
	// closed. Without it stdin is closed at once. As with os/exec, Exec
	// waits for that copy: a reader that blocks without end (a terminal, a
	// pipe nobody closes) keeps Exec waiting after the process exited,
	// until ctx ends (Exec then returns ctx's error, and the copy ends at
	// the reader's next return); give such a reader its own way to end.
	Stdin io.Reader
	// MaxOutput bounds stdout and stderr together; 0 means
	// DefaultMaxOutput. A process that writes more is killed and Exec
	// returns ErrOutputLimit with what was collected, once the host has
	// said that it ended, or after a few seconds without its word (a
	// host that stopped answering).
	MaxOutput int64
	// Stdout and Stderr, when set, are given the command's output as it
	// arrives (to show it while the command runs), while Exec still
	// collects it in ExecResult: each writer gets exactly the bytes its
	// stream collects, so none past MaxOutput.
	//
	// A writer never slows or stops the command: a slow one is handed the
	// output Exec has collected since its last Write in one Write, from
	// the collection itself (no memory beyond MaxOutput's), and a writer
	// that returns an error (or writes short) is given nothing more, while
	// the command runs on and is collected to the end. To stop the command
	// from a writer, cancel ctx. Once the command has ended, Exec waits
	// for the writers to catch up, then returns; a writer's error is then
	// Exec's error (beside the result), unless the command failed
	// otherwise. While ctx lives, no Write runs after Exec returns. When
	// ctx ends first, Exec returns ctx's error at once, starts no more
	// Writes and does not wait for one in progress: the writer may miss
	// the end of the output (the result has it all).
	//
	// When Stdout and Stderr are the same writer (==), at most one
	// goroutine at a time calls its Write, as with os/exec.
	Stdout, Stderr io.Writer
}

// ExecResult is what Host.Exec collected.
type ExecResult struct {
	Stdout []byte
	Stderr []byte
	// ExitCode is the command's exit status, -1 when a signal ended it
	// (os/exec's convention; Signal says which). A program not found
	// exits 127, one not executable 126, a missing SpawnOptions.Dir 127,
	// as in a POSIX shell and as the executions API answers them; the API
	// answers a signal N as 128+N, a shell's $?, where this is -1.
	ExitCode int
	Signal   Signal
	Duration time.Duration
	// OutputCut is true when the host told that the command exited but
	// kept its output open after, and Exec had the session closed once
	// that output had been quiet for 5 s (or a minute after the exit at
	// the latest): a process the command left in the background holds it (as
	// in `sleep 100 & echo hi`, or a server started without redirecting
	// its output), and OpenSSH's sshd ends a session only once every
	// holder has let go. Stdout and Stderr are what came by then; what
	// that process writes later is not in them. ExitCode is the
	// command's, as the host told it.
	OutputCut bool
}

// Exec runs argv to completion and collects its output. A non-zero exit is
// not an error: it is in ExecResult.ExitCode. The error reports what
// stopped the command from running or finishing (including ErrOutputLimit
// and ctx's error), naming the host (see Connection.Name). When ctx ends,
// the process is killed and Exec returns ctx's error with what was
// collected, without waiting past ctx for the host to report the end: a
// host that stopped answering reports nothing until its connection is
// given up on.
//
// The result is nil when the command never started (Spawn failed: no
// connection, an empty argv, a session the host refused); once it started,
// every return carries a result with what was collected, also beside an
// error (ErrOutputLimit, ctx's, a connection lost mid-command), its
// ExitCode then -1 unless the host reported one.
//
// A host that tells the command's exit before its output ends (OpenSSH's
// sshd over SSH) may keep that output open as long as a process the
// command left in the background lives: Exec then has the session closed
// once the output has been quiet for 5 s after the exit (a minute after it
// at most; the SSH client closes it a few seconds after the KILL it sends
// first) and returns with ExecResult.OutputCut set, where OpenSSH's ssh
// would wait for that process.
func (h *Host) Exec(ctx context.Context, argv []string, opts ExecOptions) (*ExecResult, error) {
	res, err := h.exec(ctx, argv, opts)
	return res, h.named(err)
}

// exec is Exec without the host's name in its errors. It reads the
// process's own streams: naming their errors would cost an allocation a
// command, and Exec does not return them.
func (h *Host) exec(ctx context.Context, argv []string, opts ExecOptions) (*ExecResult, error) {
	start := time.Now()
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p, _, err := h.spawn(ctx, argv, opts.SpawnOptions)
	if err != nil {
		return nil, err
	}
	limit := opts.MaxOutput
	if limit <= 0 {
		limit = DefaultMaxOutput
	}
	// Past the limit nothing more is collected, and the command is
	// killed and its session closed (spawn's ctx): Exec then waits for
	// the host's word that it ended, and for the stdin copy, no longer
	// than outputLimitGrace, as once ctx ends (see below).
	wait, giveUp := context.WithCancelCause(parent)
	defer giveUp(nil)
	lim := &outputLimit{left: limit, progress: make(chan struct{}, 1)}
	lim.kill = func() {
		// The grace first: the kill's send may wait behind a write
		// the host does not read.
		lim.startGrace(func() { giveUp(ErrOutputLimit) })
		_ = p.Kill(SIGKILL)
		cancel()
	}
	defer lim.stopGrace()
	var stdout, stderr collected
	// The writers are fed from the collection by goroutines of their own,
	// so that a slow one holds up neither the command nor the other.
	var fd *feeders
	if opts.Stdout != nil || opts.Stderr != nil {
		fd = feed(&stdout, &stderr, opts.Stdout, opts.Stderr)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); lim.copy(&stdout, p.Stdout()) }()
	go func() { defer wg.Done(); lim.copy(&stderr, p.Stderr()) }()
	// Like os/exec, Exec waits for the stdin copy: it ends when opts.Stdin
	// is drained or the process's stdin fails after exit. But not past
	// ctx: a Read of opts.Stdin that blocks would keep Exec after its
	// deadline (20 s past a 3 s one, found by the audit31 audit); the copy
	// then ends at that Read's return.
	stdinDone := make(chan struct{})
	go func() {
		defer close(stdinDone)
		in := p.Stdin()
		if opts.Stdin != nil {
			_, _ = io.Copy(in, opts.Stdin)
		}
		_ = in.Close()
	}()
	// Not past ctx either: once ctx ends the process is sent KILL and
	// its session closed, but a host that stopped answering (an agent
	// stopped with SIGSTOP, a network gone quiet) confirms nothing until
	// its connection's keepalive gives up, a minute on (found by the
	// stuckwrite audit). The copies end with the session, or are left to.
	// Nor long past the command's exit where the host tells it before the
	// session's end (waitTold): sshd keeps a session open while a process
	// the command left in the background holds its output.
	exited, held, werr := waitTold(wait, p, lim.progress)
	if exited {
		wg.Wait()
		stdout.end()
		stderr.end()
	} else if parent.Err() == nil {
		// Given up past the output limit (outputLimitGrace), or on a
		// session held open that did not close when asked: the
		// copies add nothing more, so what is collected is all there
		// is, and the writers are given it as after an exit.
		stdout.end()
		stderr.end()
	}
	select {
	case <-stdinDone:
	case <-wait.Done():
		if werr == nil {
			werr = ctxErr(wait) // the command ended, its stdin not: ctx's error below
		}
	}
	writesDone := true
	if fd != nil && !fd.wait(parent) {
		writesDone = false
		if werr == nil {
			werr = ctxErr(parent)
		}
	}
	res := &ExecResult{Duration: time.Since(start), OutputCut: held}
	switch {
	case !exited:
		// The copies may still add to the collection.
		res.Stdout, res.Stderr = stdout.snapshot(), stderr.snapshot()
	case !writesDone:
		// A Write in progress may still read the collection: the caller
		// gets copies it may change.
		res.Stdout, res.Stderr = bytes.Clone(stdout.buf), bytes.Clone(stderr.buf)
	default:
		res.Stdout, res.Stderr = stdout.buf, stderr.buf
	}
	if lim.exceeded() {
		res.ExitCode = -1
		return res, outputLimitErr(limit)
	}
	if err := ctxErr(parent); err != nil && werr != nil {
		// The process was killed because ctx ended: say so rather than
		// report the kill as the command's own exit.
		res.ExitCode = -1
		if ee := (*ExitError)(nil); errors.As(werr, &ee) {
			res.Signal = ee.Signal
		}
		return res, fmt.Errorf("hostgate: exec: %w", err)
	}
	if !exited {
		// held: the session stayed open after the kill too.
		res.ExitCode = -1
		return res, fmt.Errorf("hostgate: exec: the host said the command exited but kept its session open after (a process the command left in the background holding its output?), and did not close it when asked within %v, so how the command ended is unknown: keep such processes off the command's output (redirect theirs: cmd >/dev/null 2>&1 &)", heldKillWait)
	}
	var ee *ExitError
	switch {
	case werr == nil:
	case errors.As(werr, &ee):
		res.ExitCode, res.Signal = ee.Code, ee.Signal
	default:
		res.ExitCode = -1
		return res, werr
	}
	if fd != nil {
		// The writers' goroutines have ended (writesDone, else ctx's
		// error returned above).
		if fd.outErr != nil {
			return res, fmt.Errorf("hostgate: exec: writing the command's stdout to ExecOptions.Stdout: %w", fd.outErr)
		}
		if fd.errErr != nil {
			return res, fmt.Errorf("hostgate: exec: writing the command's stderr to ExecOptions.Stderr: %w", fd.errErr)
		}
	}
	return res, nil
}

// waitCtx is p.Wait() (exited true), unless ctx ends first: then exited is
// false and err ctx's (ctxErr). ctx's end has the process killed (Spawn's
// ctx, or one derived from it), but the process's end is the host's word,
// and a host that stopped answering says nothing until its connection is
// given up on; the Wait goes on in the background until then.
func waitCtx(ctx context.Context, p Process) (exited bool, err error) {
	if ctx.Done() == nil {
		return true, p.Wait()
	}
	waited := make(chan error, 1)
	go func() { waited <- p.Wait() }()
	select {
	case err := <-waited:
		return true, err
	case <-ctx.Done():
		select {
		case err := <-waited: // ended as ctx did: keep its word
			return true, err
		default:
			return false, ctxErr(ctx)
		}
	}
}

// outputHeldGrace is how long a command's output is awaited, quiet,
// once its host has told that it exited (waitTold), and a download's tar
// once its archive has ended (waitGrace). A var for the tests.
var outputHeldGrace = 5 * time.Second

// outputHeldMax bounds waitTold's wait after the exit told, however
// often the output goes on: a process left in the background that
// writes every few seconds would hold it for as long as it lives.
var outputHeldMax = time.Minute

// heldKillWait bounds the wait for the session of a process that the
// host said had exited, once it is killed (waitTold): sshlayer's client
// closes it at once (its Kill, the exit told), another transport may
// after a grace of its own.
var heldKillWait = 10 * time.Second

// waitTold is waitCtx, but once p's transport has told how p ended
// (exitedOf) its session's end is waited for only while its output goes
// on: a process left in the background holding the output keeps the
// session open (OpenSSH's sshd, for as long as that process lives).
// Each receive from progress (nil: none) is output read; after
// outputHeldGrace without one, or outputHeldMax after the exit told, p
// is killed, which has the SSH client close the session, keeping the
// status told, and waited for no longer than heldKillWait. Quiet, not
// a bound from the exit alone: the host may still be sending what the
// command wrote before it exited (up to the channel's window, seconds
// of it over a slow link), which must not be cut. held is true when p
// was killed so; exited is false and err nil when that did not end it
// either.
func waitTold(ctx context.Context, p Process, progress <-chan struct{}) (exited, held bool, err error) {
	told := exitedOf(p)
	if told == nil {
		exited, err = waitCtx(ctx, p)
		return exited, false, err
	}
	grace, most, killWait := outputHeldGrace, outputHeldMax, heldKillWait
	wctx, stop := context.WithCancel(ctx)
	watched := make(chan struct{})
	defer func() { stop(); <-watched }()
	go func() {
		defer close(watched)
		select {
		case <-told:
		case <-wctx.Done():
			return
		}
		quiet := time.NewTimer(grace)
		defer quiet.Stop()
		most := time.NewTimer(most)
		defer most.Stop()
		for {
			select {
			case <-progress:
				quiet.Reset(grace)
				continue
			case <-quiet.C:
			case <-most.C:
			case <-wctx.Done():
				return
			}
			stop()
			return
		}
	}()
	if exited, err := waitCtx(wctx, p); exited || ctx.Err() != nil {
		return exited, false, err
	}
	_ = p.Kill(SIGKILL)
	kctx, kstop := context.WithTimeout(ctx, killWait)
	defer kstop()
	if exited, err := waitCtx(kctx, p); exited || ctx.Err() != nil {
		return exited, true, err
	}
	return false, true, nil
}

// feeders are the goroutines that give ExecOptions.Stdout and Stderr
// what is collected.
type feeders struct {
	wg             sync.WaitGroup
	stop           chan struct{} // closed when Exec gives up on them
	outErr, errErr error         // their writers' errors, once wg is done
}

// feed starts a feeder for each writer that is not nil.
func feed(stdout, stderr *collected, out, errw io.Writer) *feeders {
	fd := &feeders{stop: make(chan struct{})}
	var shared *sync.Mutex
	if sameWriter(out, errw) {
		shared = new(sync.Mutex)
	}
	if out != nil {
		stdout.wake = make(chan struct{}, 1)
		fd.wg.Go(func() { fd.outErr = stdout.feed(out, shared, fd.stop) })
	}
	if errw != nil {
		stderr.wake = make(chan struct{}, 1)
		fd.wg.Go(func() { fd.errErr = stderr.feed(errw, shared, fd.stop) })
	}
	return fd
}

// wait waits for the feeders to give their writers all that was
// collected, and reports whether they did: when ctx ends first, they are
// stopped (a Write in progress ends on its own) and wait returns false.
func (fd *feeders) wait(ctx context.Context) bool {
	done := make(chan struct{})
	go func() { fd.wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		select {
		case <-done:
			return true
		default:
			close(fd.stop)
			return false
		}
	}
}

// outputLimitErr is Exec's error for a command that wrote more than
// limit bytes: ErrOutputLimit, with the limit and how to raise it.
func outputLimitErr(limit int64) error {
	return fmt.Errorf("%w: the command's output passed %d bytes (stdout and stderr together); raise ExecOptions.MaxOutput to collect more", ErrOutputLimit, limit)
}

// outputLimitGrace bounds Exec's wait for the host's word that a
// command killed at its output limit ended. A host answers the kill and
// the session's close at once, or after the output already on its way
// (a window's worth); one that stopped answering (but keeps the
// connection) never does, and held Exec until ctx ended, for ever with a
// ctx that never does. A var for the tests.
var outputLimitGrace = 5 * time.Second

// outputLimit is shared by the stdout and stderr copiers.
type outputLimit struct {
	mu    sync.Mutex
	left  int64
	over  bool
	kill  func()
	grace *time.Timer // started by kill's startGrace
	ended bool        // Exec returned: no grace to start
	// progress is signalled (not waited on) as output is read, for
	// waitTold.
	progress chan struct{}
}

// startGrace calls giveUp after outputLimitGrace, unless Exec has
// returned.
func (l *outputLimit) startGrace(giveUp func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.ended {
		l.grace = time.AfterFunc(outputLimitGrace, giveUp)
	}
}

func (l *outputLimit) stopGrace() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ended = true
	if l.grace != nil {
		l.grace.Stop()
	}
}

func (l *outputLimit) exceeded() bool { l.mu.Lock(); defer l.mu.Unlock(); return l.over }

func (l *outputLimit) copy(dst *collected, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			l.mu.Lock()
			take := int64(n)
			if take > l.left {
				take = l.left
			}
			l.left -= take
			over := int64(n) > take && !l.over
			if over {
				l.over = true
			}
			l.mu.Unlock()
			dst.add(buf[:take])
			select {
			case l.progress <- struct{}{}:
			default:
			}
			if over {
				l.kill()
			}
		}
		if err != nil {
			return
		}
	}
}

// collected is one stream's output as Exec collects it, and what feeds
// its writer (ExecOptions.Stdout or Stderr) when it has one.
type collected struct {
	mu   sync.Mutex
	buf  []byte
	done bool          // the stream has ended: buf is all of it
	wake chan struct{} // with a writer: signalled when buf grows or ends
}

func (c *collected) add(b []byte) {
	if len(b) == 0 {
		return
	}
	c.mu.Lock()
	if len(c.buf)+len(b) > cap(c.buf) {
		// Double, as bytes.Buffer does: append grows a large slice by
		// a quarter, which copied 4 MiB of output 4 times over.
		grown := make([]byte, len(c.buf), max(2*cap(c.buf), len(c.buf)+len(b), 512))
		copy(grown, c.buf)
		c.buf = grown
	}
	c.buf = append(c.buf, b...)
	c.mu.Unlock()
	c.signal()
}

// snapshot is a copy of what c has collected so far.
func (c *collected) snapshot() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.buf)
}

func (c *collected) end() {
	c.mu.Lock()
	c.done = true
	c.mu.Unlock()
	c.signal()
}

func (c *collected) signal() {
	if c.wake != nil {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// feed writes what c collects to w, as it arrives, until c has ended and
// w has it all, w fails, or stop is closed. Each Write is of all that is
// new since the last, read outside the lock: add only appends past it
// (or copies it to a larger array), so those bytes never change. shared,
// when not nil, is held around each Write of a writer both streams feed.
func (c *collected) feed(w io.Writer, shared *sync.Mutex, stop <-chan struct{}) error {
	off := 0
	for {
		c.mu.Lock()
		chunk, done := c.buf[off:len(c.buf):len(c.buf)], c.done
		c.mu.Unlock()
		if len(chunk) == 0 {
			if done {
				return nil
			}
			select {
			case <-c.wake:
			case <-stop:
				return nil
			}
			continue
		}
		select {
		case <-stop:
			return nil
		default:
		}
		if shared != nil {
			shared.Lock()
		}
		n, err := w.Write(chunk)
		if shared != nil {
			shared.Unlock()
		}
		if err == nil && n < len(chunk) {
			err = io.ErrShortWrite
		}
		if err != nil {
			return err
		}
		off += n
	}
}

// sameWriter reports whether a and b are the same writer, as os/exec
// decides it: equal interfaces, where their dynamic type can be compared.
func sameWriter(a, b io.Writer) (same bool) {
	if a == nil || b == nil {
		return false
	}
	defer func() { _ = recover() }() // an uncomparable type: not the same
	return a == b
}
