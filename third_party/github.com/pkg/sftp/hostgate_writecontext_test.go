package sftp

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// windowWriter passes what the client writes on to the server while it has
// window (bytes it may pass), and waits for more as an SSH channel waits
// for a window adjust; WriteContext's wait ends with its ctx, as that of
// hostgate's x/crypto channel does (its change 16).
type windowWriter struct {
	w io.WriteCloser

	mu     sync.Mutex
	cond   *sync.Cond
	window int // -1: no limit
	closed bool

	waiting     chan struct{} // closed when a write first waits for window
	waitingOnce sync.Once
}

func newWindowWriter(w io.WriteCloser) *windowWriter {
	ww := &windowWriter{w: w, window: -1, waiting: make(chan struct{})}
	ww.cond = sync.NewCond(&ww.mu)
	return ww
}

func (ww *windowWriter) grant(n int) {
	ww.mu.Lock()
	ww.window = n
	ww.cond.Broadcast()
	ww.mu.Unlock()
}

func (ww *windowWriter) Write(p []byte) (int, error) {
	return ww.WriteContext(context.Background(), p)
}

func (ww *windowWriter) WriteContext(ctx context.Context, p []byte) (int, error) {
	stop := context.AfterFunc(ctx, func() { ww.mu.Lock(); ww.cond.Broadcast(); ww.mu.Unlock() })
	defer stop()
	n := 0
	for len(p) > 0 {
		ww.mu.Lock()
		for ww.window == 0 && !ww.closed && ctx.Err() == nil {
			ww.waitingOnce.Do(func() { close(ww.waiting) })
			ww.cond.Wait()
		}
		if ww.closed {
			ww.mu.Unlock()
			return n, io.ErrClosedPipe
		}
		if ww.window == 0 {
			ww.mu.Unlock()
			return n, context.Cause(ctx)
		}
		take := len(p)
		if ww.window > 0 {
			take = min(take, ww.window)
			ww.window -= take
		}
		ww.mu.Unlock()
		m, err := ww.w.Write(p[:take])
		n += m
		if err != nil {
			return n, err
		}
		p = p[take:]
	}
	return n, nil
}

func (ww *windowWriter) Close() error {
	ww.mu.Lock()
	ww.closed = true
	ww.cond.Broadcast()
	ww.mu.Unlock()
	return ww.w.Close()
}

// TestHostgateAbortEndsWriteOnWindow: a Write whose request waits on a
// channel window the server does not grant (an agent stopped with
// SIGSTOP) returns Abort's error at once, and so does Close; the request
// cut short is finished from a copy once window comes, so that the
// session's stream stays whole: the server takes it and the requests
// after it, the file holds the caller's bytes though the caller
// overwrote its buffer after the Write returned, and the client's other
// calls work. Without change 16 the Write waits for the window.
func TestHostgateAbortEndsWriteOnWindow(t *testing.T) {
	dir := t.TempDir()
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	ww := newWindowWriter(cw)
	srv, err := NewServer(struct {
		io.Reader
		io.WriteCloser
	}{sr, sw}, WithServerWorkingDirectory(dir))
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve()
		_ = sw.Close()
	}()
	c, err := NewClientPipe(cr, ww, UseConcurrentWrites(true))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ww.grant(-1)
		_ = c.Close()
		<-served
		_ = srv.Close()
	}()
	name := filepath.Join(dir, "f")
	f, err := c.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 4<<20)
	for i := range data {
		data[i] = byte(i*7) | 1 // never 0
	}
	ww.grant(100 << 10) // the window runs out inside the first requests
	stuck := errors.New("host stopped reading")
	written := make(chan error, 1)
	go func() { _, err := f.Write(data); written <- err }()
	<-ww.waiting // the Write has spent the window, partway through a request
	f.Abort(stuck)
	select {
	case err := <-written:
		if !errors.Is(err, stuck) {
			t.Fatalf("Write aborted while waiting on window: %v, want Abort's error", err)
		}
	case <-time.After(20 * time.Second): // a guard against a hang, not a timing
		t.Fatal("Write waiting on window still blocked 20 s after Abort")
	}
	clear(data) // the caller's buffer is its own again
	closed := make(chan error, 1)
	go func() { closed <- f.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close after Abort: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Close after Abort still blocked 20 s on")
	}

	ww.grant(-1) // the host reads again
	if _, err := c.Stat(name); err != nil {
		t.Fatalf("the session after an aborted write: %v", err)
	}
	got, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 {
		t.Fatal("nothing of the aborted write reached the file: its requests were to be finished")
	}
	for i, b := range got {
		if b != byte(i*7)|1 {
			t.Fatalf("byte %d of %d in the file is %#x, want %#x: the cut request's rest was not a copy", i, len(got), b, byte(i*7)|1)
		}
	}
}

// TestHostgateCtxRequestsGiveUpOnSendLock: while a File's write waits on a
// channel window the server does not grant (an agent that stopped
// reading), holding the conn's send lock, the client's other requests
// that take a ctx return ctx's error once it ends, unsent, and a close
// returns at once and goes out when the window opens (change 29). The
// stream stays whole: once the host reads again the session answers.
// Before, each waited for the lock until the connection ended.
func TestHostgateCtxRequestsGiveUpOnSendLock(t *testing.T) {
	dir := t.TempDir()
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	ww := newWindowWriter(cw)
	srv, err := NewServer(struct {
		io.Reader
		io.WriteCloser
	}{sr, sw}, WithServerWorkingDirectory(dir))
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve()
		_ = sw.Close()
	}()
	c, err := NewClientPipe(cr, ww, UseConcurrentWrites(true))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ww.grant(-1)
		_ = c.Close()
		<-served
		_ = srv.Close()
	}()
	name := filepath.Join(dir, "f")
	f, err := c.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	other, err := c.Create(filepath.Join(dir, "other"))
	if err != nil {
		t.Fatal(err)
	}
	ww.grant(100 << 10) // the window runs out inside the write's first requests
	written := make(chan error, 1)
	go func() { _, err := f.Write(make([]byte, 4<<20)); written <- err }()
	<-ww.waiting // the write holds the send lock, waiting on window

	// Each call runs with a ctx of 100 ms; the guard only ends a hang.
	within := func(what string, call func(ctx context.Context) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- call(ctx) }()
		select {
		case err := <-done:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s behind a send waiting on window: %v, want ctx's error", what, err)
			}
		case <-time.After(20 * time.Second): // a guard against a hang, not a timing
			t.Fatalf("%s behind a send waiting on window: still waiting 20 s after its ctx ended", what)
		}
	}
	within("StatContext", func(ctx context.Context) error { _, err := c.StatContext(ctx, name); return err })
	within("LstatContext", func(ctx context.Context) error { _, err := c.LstatContext(ctx, name); return err })
	within("ReadDirContext", func(ctx context.Context) error { _, err := c.ReadDirContext(ctx, dir); return err })
	within("OpenFileNoWaitContext", func(ctx context.Context) error {
		_, err := c.OpenFileNoWaitContext(ctx, name, os.O_RDONLY).Wait()
		return err
	})
	within("LstatNoWaitContext", func(ctx context.Context) error {
		_, err := c.LstatNoWaitContext(ctx, name).Wait()
		return err
	})
	var closing *Pending[struct{}]
	within("CloseNoWait", func(ctx context.Context) error {
		closing = other.CloseNoWait() // returns unsent, the lock being held
		<-ctx.Done()
		return ctx.Err()
	})

	f.Abort(errors.New("host stopped reading"))
	<-written
	ww.grant(-1) // the host reads again
	if _, err := closing.Wait(); err != nil {
		t.Fatalf("the close sent once the window opened: %v", err)
	}
	if _, err := c.Stat(name); err != nil {
		t.Fatalf("the session after the requests that gave up: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("Close of the aborted File: %v", err)
	}
}
