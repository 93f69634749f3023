//go:build unix

package hostgate_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/sshtest"
	"github.com/hostgate/hostgate/sshlayer"
)

// streamHosts are the hosts the ExecOptions.Stdout and Stderr tests run
// on: this machine through its local transport, and sshlayer's loopback
// test server through a Host over SSH, as a caller's.
func streamHosts(t *testing.T) map[string]*hostgate.Host {
	t.Helper()
	local, _ := localHost(t, false)
	return map[string]*hostgate.Host{"local": local, "ssh": sshHost(t)}
}

// sshConnect connects over SSH to the server at addr: a Host's
// ConnectFunc for sshlayer's test servers.
func sshConnect(addr string, auth sshlayer.Auth) hostgate.ConnectFunc {
	return func(ctx context.Context) (*hostgate.Connection, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		c, err := sshlayer.Connect(ctx, conn, auth)
		if err != nil {
			return nil, err
		}
		return c.Connection(nil), nil
	}
}

// sshHost is a Host over SSH to sshlayer's test server.
func sshHost(t testing.TB) *hostgate.Host {
	t.Helper()
	ts, auth := sshtest.Server(t)
	h := hostgate.New(hostgate.Info{Kind: "ssh"}, sshConnect(ts.Addr, auth))
	t.Cleanup(func() { _ = h.Close() })
	return h
}

// chanWriter sends each Write's bytes on a channel.
type chanWriter chan []byte

func (w chanWriter) Write(p []byte) (int, error) { w <- bytes.Clone(p); return len(p), nil }

// TestExecStreamsWhileCollecting: Stdout gets the output while the command
// runs (the command waits for a line that is sent only once the writer
// has its first line), and the result holds it all as before.
func TestExecStreamsWhileCollecting(t *testing.T) {
	for name, h := range streamHosts(t) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		in, feed := io.Pipe()
		seen := make(chanWriter, 16)
		go func() {
			var got []byte
			for b := range seen {
				got = append(got, b...)
				if bytes.Contains(got, []byte("first\n")) {
					_, _ = feed.Write([]byte("go\n"))
					_ = feed.Close()
					break
				}
			}
			for range seen {
			}
		}()
		res, err := h.Exec(ctx, []string{"sh", "-c", "echo first; read x; echo second $x; echo err >&2"}, hostgate.ExecOptions{Stdin: in, Stdout: seen})
		close(seen)
		cancel()
		if err != nil || string(res.Stdout) != "first\nsecond go\n" || string(res.Stderr) != "err\n" || res.ExitCode != 0 {
			t.Errorf("%s: %+v, %v", name, res, err)
		}
	}
}

// blockingWriter collects what it is given; each Write first waits for
// release (closed), and tells entered of its first Write.
type blockingWriter struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	writes  int
	entered chan struct{}
	once    sync.Once
	release chan struct{}
}

func newBlockingWriter() *blockingWriter {
	return &blockingWriter{entered: make(chan struct{}), release: make(chan struct{})}
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.entered) })
	<-w.release
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	return w.buf.Write(p)
}

func (w *blockingWriter) got() ([]byte, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return bytes.Clone(w.buf.Bytes()), w.writes
}

// TestExecSlowWriterDoesNotHoldTheCommand: a Stdout writer that does not
// return holds up neither the command (which writes 1 MiB, more than any
// pipe or channel window holds, and only then says "done" on stderr) nor
// Stderr's writer; once released, it is given all the output, in fewer
// Writes than the reads that collected it, and Exec returns only then.
func TestExecSlowWriterDoesNotHoldTheCommand(t *testing.T) {
	for name, h := range streamHosts(t) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		slow := newBlockingWriter()
		errs := make(chanWriter, 16)
		type result struct {
			res *hostgate.ExecResult
			err error
		}
		done := make(chan result, 1)
		go func() {
			res, err := h.Exec(ctx, []string{"sh", "-c", "head -c 1048576 /dev/zero; echo done >&2"}, hostgate.ExecOptions{Stdout: slow, Stderr: errs})
			done <- result{res, err}
		}()
		select {
		case b := <-errs:
			if string(b) != "done\n" {
				t.Errorf("%s: stderr writer got %q", name, b)
			}
		case <-time.After(time.Minute): // a guard against a hang, not a timing
			t.Fatalf("%s: the command did not finish while its Stdout writer was blocked", name)
		}
		select {
		case r := <-done:
			t.Errorf("%s: Exec returned before its Stdout writer had the output: %v", name, r.err)
		default:
		}
		close(slow.release)
		r := <-done
		cancel()
		got, writes := slow.got()
		if r.err != nil || len(r.res.Stdout) != 1<<20 || !bytes.Equal(got, r.res.Stdout) {
			t.Errorf("%s: %v; collected %d bytes, the writer got %d", name, r.err, len(r.res.Stdout), len(got))
		}
		if writes >= 16 {
			// The first Write is of what was there when it began; what
			// came while it blocked is one more, and what the collection
			// read after "done" (at most what a pipe or channel window
			// held) a few more: far fewer than the 32 KiB reads that
			// collected the MiB.
			t.Errorf("%s: %d Writes to a writer that blocked through the output, want far fewer than 32", name, writes)
		}
	}
}

// TestExecWriterGetsWhatIsCollected: under MaxOutput the writer gets
// exactly the bytes the result holds, no more.
func TestExecWriterGetsWhatIsCollected(t *testing.T) {
	for name, h := range streamHosts(t) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		var out bytes.Buffer
		res, err := h.Exec(ctx, []string{"yes"}, hostgate.ExecOptions{MaxOutput: 10000, Stdout: &out})
		cancel()
		if !errors.Is(err, hostgate.ErrOutputLimit) {
			t.Fatalf("%s: err %v, want ErrOutputLimit", name, err)
		}
		if len(res.Stdout) != 10000 || !bytes.Equal(out.Bytes(), res.Stdout) {
			t.Errorf("%s: collected %d bytes, the writer got %d (equal: %v)", name, len(res.Stdout), out.Len(), bytes.Equal(out.Bytes(), res.Stdout))
		}
	}
}

// failingWriter fails each Write after the first, and tells began of
// each Write as it begins.
type failingWriter struct {
	writes atomic.Int32
	began  chan struct{}
}

var errUIGone = errors.New("the UI went away")

func (w *failingWriter) Write(p []byte) (int, error) {
	n := w.writes.Add(1)
	select {
	case w.began <- struct{}{}:
	default:
	}
	if n > 1 {
		return 0, errUIGone
	}
	return len(p), nil
}

// TestExecWriterErrorLeavesTheCommand: a writer's error does not stop the
// command, which is collected to its end; Exec returns the result with
// the writer's error, and writes to it no more.
//
// The command prints each next line only once a Write has begun, so the
// writer gets "a", then "b" (which fails), and "c" is there for a Write
// that must not come: with "sleep 0.2" between the three instead, a
// feeder 400 ms late gave it all in one Write, which did not fail.
func TestExecWriterErrorLeavesTheCommand(t *testing.T) {
	for name, h := range streamHosts(t) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		w := &failingWriter{began: make(chan struct{}, 4)}
		in, feedIn := io.Pipe()
		go func() {
			defer feedIn.Close()
			for range 2 {
				select {
				case <-w.began:
					_, _ = feedIn.Write([]byte("go\n"))
				case <-ctx.Done():
					return
				}
			}
		}()
		res, err := h.Exec(ctx, []string{"sh", "-c", "echo a; read x; echo b; read x; echo c; exit 3"}, hostgate.ExecOptions{Stdin: in, Stdout: w})
		cancel()
		_ = in.Close()
		if !errors.Is(err, errUIGone) || !strings.Contains(err.Error(), "ExecOptions.Stdout") {
			t.Errorf("%s: err %v, want the writer's", name, err)
		}
		if res == nil || string(res.Stdout) != "a\nb\nc\n" || res.ExitCode != 3 {
			t.Errorf("%s: result %+v", name, res)
		}
		if n := w.writes.Load(); n != 2 {
			t.Errorf("%s: %d Writes, want 2 (the one that failed the last)", name, n)
		}
	}
}

// exclusiveWriter fails the test when two Writes overlap.
type exclusiveWriter struct {
	t      *testing.T
	in     atomic.Int32
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
}

func (w *exclusiveWriter) Write(p []byte) (int, error) {
	if w.in.Add(1) != 1 {
		w.t.Error("two Writes at once to the writer given as both Stdout and Stderr")
	}
	time.Sleep(time.Millisecond) // widen the window an overlap needs
	w.mu.Lock()
	w.buf.Write(p)
	w.writes++
	w.mu.Unlock()
	w.in.Add(-1)
	return len(p), nil
}

// TestExecSameWriterSerialized: one writer as Stdout and Stderr gets one
// Write at a time, and both streams whole.
func TestExecSameWriterSerialized(t *testing.T) {
	for name, h := range streamHosts(t) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		w := &exclusiveWriter{t: t}
		script := "i=0; while [ $i -lt 200 ]; do echo o$i; echo e$i >&2; i=$((i+1)); done"
		res, err := h.Exec(ctx, []string{"sh", "-c", script}, hostgate.ExecOptions{Stdout: w, Stderr: w})
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if w.buf.Len() != len(res.Stdout)+len(res.Stderr) || len(res.Stdout) == 0 || len(res.Stderr) == 0 {
			t.Errorf("%s: the writer got %d bytes, the result %d and %d", name, w.buf.Len(), len(res.Stdout), len(res.Stderr))
		}
	}
}

// TestExecCtxEndsWriterWait: ctx bounds Exec's wait for a writer that does
// not return; Exec returns ctx's error with all the output, and starts no
// Write after it returned, although output it collected meanwhile waits.
//
// The command prints "two" only once the writer's first Write (of "one")
// has begun, so that Write holds "one" alone: with "sleep 0.2" between
// them instead, a feeder 200 ms late wrote both at once and the check
// failed. ctx passes once the command said on stderr that it printed
// "two", so "two" is collected and waits behind the blocked Write when
// Exec returns: a Write of it after that fails the check. (Stdout and
// stderr are collected apart, so "two" may not be collected yet; such a
// run checks less, never wrongly.) Before, ctx passed at once, the
// command was killed before "two", and a feeder that wrote after Exec
// returned passed.
func TestExecCtxEndsWriterWait(t *testing.T) {
	for name, h := range streamHosts(t) {
		ctx := &manualDeadline{Context: context.Background(), done: make(chan struct{})}
		slow := newBlockingWriter()
		in, feedIn := io.Pipe()
		printed := make(chanWriter, 16)
		go func() {
			select {
			case <-slow.entered:
				_, _ = feedIn.Write([]byte("go\n"))
				_ = feedIn.Close()
				select {
				case <-printed:
				case <-time.After(time.Minute): // a guard against a hang, not a timing
				}
			case <-time.After(time.Minute):
			}
			ctx.pass()
		}()
		done := make(chan error, 1)
		var res *hostgate.ExecResult
		go func() {
			var err error
			res, err = h.Exec(ctx, []string{"sh", "-c", "echo one; read x; echo two; echo printed >&2"}, hostgate.ExecOptions{Stdin: in, Stdout: slow, Stderr: printed})
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s: Exec with a stuck writer past its deadline: %v, want DeadlineExceeded", name, err)
			}
		case <-time.After(2 * time.Minute): // a guard against a hang, not a timing
			t.Fatalf("%s: Exec still waiting on its Stdout writer a minute after its deadline", name)
		}
		_ = in.Close()
		close(slow.release)
		if res == nil {
			t.Fatalf("%s: no result", name)
		}
		res.Stdout[0] = 'X' // the result is the caller's, also while a Write runs
		// The Write in progress ends; none starts after it. goleak at
		// the end of the package sees a feed goroutine that did not end.
		time.Sleep(300 * time.Millisecond)
		if got, writes := slow.got(); writes != 1 || string(got) != "one\n" {
			t.Errorf("%s: after Exec returned the writer had %d Writes, %q", name, writes, got)
		}
	}
}
