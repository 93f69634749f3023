package syncfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync/atomic"
	"time"

	"github.com/hostgate/hostgate"
)

// session is one connection of the synchronous filesystem. Its worker
// goroutine (work) owns the connection: it connects, publishes the result by
// closing ready, waits until the session is abandoned, then closes the
// connection. A session is abandoned once — on a timeout, a broken
// connection or FS.Close — and never used again; the next call starts a new
// one.
type session struct {
	// ctx is passed to Connect and to every provider call; abandoning the
	// session cancels it with the reason, which waiting callers return.
	ctx    context.Context
	cancel context.CancelCauseFunc

	ready chan struct{} // closed by work once conn or err is set
	conn  *hostgate.SyncConnection
	err   error

	closeErr error // set by work before it returns (read after FS.wg.Wait)
}

// opFunc is one operation run on a session's provider. It reports progress
// (an answer of a long transfer) through c so that long transfers that keep
// moving do not time out.
type opFunc func(ctx context.Context, p hostgate.Provider, c *call) error

// call is one operation in flight. Its goroutine sets err and closes done;
// the caller reads anything the operation produced only after done.
type call struct {
	progress atomic.Int64
	done     chan struct{}
	err      error
}

// advance records that the peer answered.
func (c *call) advance() { c.progress.Add(1) }

// acquire returns the current session, starting one (and its worker) when
// there is none. A session being connected is shared by every caller.
func (f *FS) acquire() (*session, error) {
	spec, err := f.spec()
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, fs.ErrClosed
	}
	if s := f.cur; s != nil {
		if !s.ended() {
			return s, nil
		}
		// Its connection ended while no call of this one's used it (the
		// host's agent or the gateway restarted): nothing of this call
		// was sent on it, so it goes to a new connection, as a Host's
		// first use after a lost connection connects again.
		f.cur = nil
		s.cancel(s.endedErr())
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	s := &session{ctx: ctx, cancel: cancel, ready: make(chan struct{})}
	f.cur = s
	f.wg.Add(1)
	go f.work(s, spec)
	return s, nil
}

// errConnectionEnded is the cause of a session whose connection ended by
// itself, for the calls still waiting on it.
var errConnectionEnded = fmt.Errorf("syncfs: connection broken: %w", hostgate.ErrConnectionEnded)

// endedErr is the cause of s, whose connection ended by itself: why it
// ended, where the connection says (SyncConnection.Err). The calls under
// way on it fail with this, and said only "hostgate: host connection
// ended" where the connection's own words were "its execution ended
// (reason terminated): provision a new one" (a soak of a sandbox
// terminated under six callers).
func (s *session) endedErr() error {
	if s.conn.Err == nil {
		return errConnectionEnded
	}
	why := s.conn.Err()
	if why == nil {
		return errConnectionEnded
	}
	return fmt.Errorf("%w: %w", errConnectionEnded, why)
}

// ended reports whether s connected and its connection has ended by
// itself since (SyncConnection.Done closed).
func (s *session) ended() bool {
	select {
	case <-s.ready:
	default:
		return false
	}
	if s.conn == nil || s.conn.Done == nil {
		return false
	}
	select {
	case <-s.conn.Done:
		return true
	default:
		return false
	}
}

// work is the session's worker: see session.
func (f *FS) work(s *session, spec *hostgate.SyncSpec) {
	defer f.wg.Done()
	conn, err := spec.Connect(s.ctx)
	if err == nil && (conn == nil || conn.FS == nil) {
		if conn != nil && conn.Close != nil {
			_ = conn.Close()
		}
		err = errors.New("connection has no filesystem")
	}
	if err != nil {
		// Retire the session before publishing the failure, so that a
		// call after this one connects afresh.
		s.err = fmt.Errorf("syncfs: connect: %w", err)
		f.abandon(s, s.err)
		close(s.ready)
		return
	}
	s.conn = conn
	close(s.ready)
	<-s.ctx.Done()
	if conn.Close != nil {
		s.closeErr = conn.Close()
	}
}

// abandon retires s: it is no longer handed out, its callers return cause,
// and its worker closes the connection, which releases the goroutines of
// calls stuck on it as far as the provider allows.
func (f *FS) abandon(s *session, cause error) {
	f.mu.Lock()
	if f.cur == s {
		f.cur = nil
	}
	f.mu.Unlock()
	s.cancel(cause)
}

// do runs op on the current session, connecting first when needed.
// acquire hands out only a session not yet abandoned (abandon retires it
// under mu before cancelling it), so an abandonment seen later happened
// during this call and its cause is this call's answer.
func (f *FS) do(op opFunc) error {
	s, err := f.acquire()
	if err != nil {
		return err
	}
	return f.run(s, op)
}

// run runs op on a goroutine of session s and waits for it. It fails with
// ErrTimeout — and abandons s — when the session does not connect and op
// answer within the timeout (one clock for both, as the seed says: the
// first call connects before it answers); op's progress restarts the
// clock. It returns the session's cause when s is abandoned meanwhile.
func (f *FS) run(s *session, op opFunc) error { return f.runStop(s, nil, op) }

// runStop is run that also returns fs.ErrClosed once stop is closed (an
// open file's Close), leaving op to finish on its goroutine; the session
// goes on. The wait for the connection does not watch stop: a file's
// session is always connected.
func (f *FS) runStop(s *session, stop <-chan struct{}, op opFunc) error {
	if err := context.Cause(s.ctx); err != nil {
		return err
	}
	timeout := f.timeout()
	timer := time.NewTimer(timeout)
	defer timer.Stop()

	select {
	case <-s.ready:
	case <-s.ctx.Done():
		return context.Cause(s.ctx)
	case <-timer.C:
		err := timeoutError{timeout}
		f.abandon(s, err)
		return err
	}
	if s.err != nil {
		return s.err
	}
	if err := context.Cause(s.ctx); err != nil {
		return err
	}

	c := &call{done: make(chan struct{})}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return fs.ErrClosed
	}
	f.wg.Add(1)
	f.mu.Unlock()
	go func() {
		defer f.wg.Done()
		// The provider tells the answers of a long call it makes in
		// pages (a listing's) too, so that the timeout bounds each.
		c.err = op(hostgate.WithProgress(s.ctx, c.advance), s.conn.FS, c)
		close(c.done)
	}()

	last := c.progress.Load()
	for {
		select {
		case <-c.done:
			return f.finish(s, c)
		case <-stop:
			select {
			case <-c.done: // finished just as stop came
				return f.finish(s, c)
			default:
			}
			return fs.ErrClosed
		case <-s.ctx.Done():
			select {
			case <-c.done: // finished just as the session ended
				return f.finish(s, c)
			default:
			}
			return context.Cause(s.ctx)
		case <-timer.C:
			if p := c.progress.Load(); p != last {
				last = p
				timer.Reset(timeout)
				continue
			}
			err := timeoutError{timeout}
			f.abandon(s, err)
			return err
		}
	}
}

// finish returns the result of a finished call. An error that is not the
// host's answer abandons the session — unless the session had already
// ended, in which case the error (a cancelled context, a closed pipe) is
// its consequence and the session's cause is the better report.
func (f *FS) finish(s *session, c *call) error {
	if healthy(c.err) {
		return c.err
	}
	if cause := context.Cause(s.ctx); cause != nil {
		return cause
	}
	err := fmt.Errorf("syncfs: connection broken: %w", unwrapPath(c.err))
	if s.ended() {
		// The connection ended by itself, and closes Done before the
		// calls it cut fail (SyncConnection.Done): this call, and every
		// other it cut, fails as those a later call finds it ended
		// with do, matching ErrConnectionEnded with why it ended. They
		// matched nothing a caller could test for, where a Host's own
		// calls on such a connection match ErrConnectionEnded.
		err = s.endedErr()
	}
	f.abandon(s, err)
	return err
}
