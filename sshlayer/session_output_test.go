//go:build linux

package sshlayer

import (
	"bytes"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// writeRecorder records the size of each Write, as the channel would see
// one SSH packet per call; got is signalled after each.
type writeRecorder struct {
	mu    sync.Mutex
	sizes []int
	buf   bytes.Buffer
	got   chan struct{}
}

func newWriteRecorder() *writeRecorder { return &writeRecorder{got: make(chan struct{}, 1024)} }

func (w *writeRecorder) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.sizes = append(w.sizes, len(p))
	w.buf.Write(p)
	w.mu.Unlock()
	w.got <- struct{}{}
	return len(p), nil
}

func (w *writeRecorder) snapshot() ([]int, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]int(nil), w.sizes...), w.buf.Len()
}

// waitConsumed returns once r's pipe holds no unread byte: the copy has
// read everything written so far. There is no event for that, so it polls
// FIONREAD (TIOCINQ in x/sys; through SyscallConn: Fd would make r blocking and deadlines
// then fail).
func waitConsumed(t *testing.T, r *os.File) {
	t.Helper()
	rc, err := r.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		var n int
		var ierr error
		if err := rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }); err != nil || ierr != nil {
			t.Fatal(err, ierr)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the copy left %d bytes unread for 30 s", n)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// startCopy runs copyOutput from a new pipe into a recorder, the way a
// command's stdout is copied, and returns the pipe's write end and a
// channel closed when the copy returns.
func startCopy(t *testing.T, wait time.Duration, wake *outputWake) (r, w *os.File, rec *writeRecorder, done chan struct{}) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(); _ = w.Close() })
	rec = newWriteRecorder()
	done = make(chan struct{})
	go func() { defer close(done); copyOutput(rec, r, wait, wake) }()
	return r, w, rec, done
}

// TestCopyOutputCoalescesBulkWrites: a writer's 4 KiB writes (head's,
// stdio's), each read by the copy before the next is written, as on a
// loaded machine where the copy outruns its writer, reach the channel as
// one 32 KiB write, not eight SSH packets that every hop of a gateway
// path pays for again (issue 7).
func TestCopyOutputCoalescesBulkWrites(t *testing.T) {
	t.Parallel()
	var wake outputWake
	r, w, rec, done := startCopy(t, time.Minute, &wake)
	chunk := bytes.Repeat([]byte{'x'}, 4<<10)
	for range 8 {
		if _, err := w.Write(chunk); err != nil {
			t.Fatal(err)
		}
		waitConsumed(t, r)
	}
	<-rec.got
	sizes, _ := rec.snapshot()
	if sizes[0] != 32<<10 {
		t.Errorf("eight 4 KiB writes reached the channel as writes of %v bytes, want one of 32768", sizes)
	}
	_ = w.Close()
	<-done
}

// TestCopyOutputPauseSendsPartial: a writer that pauses after a bulk
// write does not hold its output back: the copy sends what it has when
// the coalescing wait passes.
func TestCopyOutputPauseSendsPartial(t *testing.T) {
	t.Parallel()
	var wake outputWake
	_, w, rec, done := startCopy(t, time.Millisecond, &wake)
	if _, err := w.Write(bytes.Repeat([]byte{'x'}, 5<<10)); err != nil {
		t.Fatal(err)
	}
	// The writer stays open: only the wait can end the read.
	for _, n := rec.snapshot(); n < 5<<10; _, n = rec.snapshot() {
		<-rec.got
	}
	_ = w.Close()
	<-done
}

// TestCopyOutputWakeEndsCoalescing: the waiter's wake at drainGrace ends a
// copy that is waiting to fill its buffer however long its coalescing
// wait, and what it read is still sent (a copy's own deadline must not
// undo the waiter's).
func TestCopyOutputWakeEndsCoalescing(t *testing.T) {
	t.Parallel()
	var wake outputWake
	r, w, rec, done := startCopy(t, time.Hour, &wake)
	if _, err := w.Write(bytes.Repeat([]byte{'x'}, 4<<10)); err != nil {
		t.Fatal(err)
	}
	waitConsumed(t, r)
	wake.now([]*os.File{r})
	// w stays open, as an escaped descendant's copy would.
	<-done
	if _, n := rec.snapshot(); n != 4<<10 {
		t.Errorf("sent %d bytes after the wake, want 4096", n)
	}
}
