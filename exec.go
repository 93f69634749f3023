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
	// returns ErrOutputLimit with what was collected.
	MaxOutput int64
}

// ExecResult is what Host.Exec collected.
type ExecResult struct {
	Stdout   []byte
	Stderr   []byte
	ExitCode int // -1 when ended by a signal
	Signal   Signal
	Duration time.Duration
}

// Exec runs argv to completion and collects its output. A non-zero exit is
// not an error: it is in ExecResult.ExitCode. The error reports what
// stopped the command from running or finishing (including ErrOutputLimit
// and ctx's error), naming the host (see Connection.Name).
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
	lim := &outputLimit{left: limit, kill: func() { _ = p.Kill(SIGKILL); cancel() }}
	var stdout, stderr bytes.Buffer
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
	werr := p.Wait()
	wg.Wait()
	select {
	case <-stdinDone:
	case <-parent.Done():
		if werr == nil {
			werr = context.Cause(parent) // the command ended, its stdin not: ctx's error below
		}
	}
	res := &ExecResult{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), Duration: time.Since(start)}
	if lim.exceeded() {
		res.ExitCode = -1
		return res, ErrOutputLimit
	}
	if err := parent.Err(); err != nil && werr != nil {
		// The process was killed because ctx ended: say so rather than
		// report the kill as the command's own exit.
		res.ExitCode = -1
		if ee := (*ExitError)(nil); errors.As(werr, &ee) {
			res.Signal = ee.Signal
		}
		return res, fmt.Errorf("hostgate: exec: %w", err)
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
	return res, nil
}

// outputLimit is shared by the stdout and stderr copiers.
type outputLimit struct {
	mu   sync.Mutex
	left int64
	over bool
	kill func()
}

func (l *outputLimit) exceeded() bool { l.mu.Lock(); defer l.mu.Unlock(); return l.over }

func (l *outputLimit) copy(dst *bytes.Buffer, src io.Reader) {
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
			dst.Write(buf[:take])
			if over {
				l.kill()
			}
		}
		if err != nil {
			return
		}
	}
}
