package accept

import (
	"context"
	"errors"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// flaky fails its first n Accepts with err, then accepts from the real
// listener.
type flaky struct {
	net.Listener
	n     atomic.Int32
	err   error
	calls atomic.Int32
}

func (f *flaky) Accept() (net.Conn, error) {
	f.calls.Add(1)
	if f.n.Add(-1) >= 0 {
		return nil, f.err
	}
	return f.Listener.Accept()
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func emfile() error {
	return &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
}

func TestNextWaitsOutTemporary(t *testing.T) {
	ln := listen(t)
	f := &flaky{Listener: ln, err: emfile()}
	f.n.Store(3)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var waits []time.Duration
	got, err := Next(context.Background(), f, func(err error, wait time.Duration) {
		if !errors.Is(err, syscall.EMFILE) {
			t.Errorf("retry told %v, want EMFILE", err)
		}
		waits = append(waits, wait)
	})
	if err != nil {
		t.Fatalf("Next after 3 EMFILEs: %v", err)
	}
	got.Close()
	if want := []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond}; len(waits) != 3 || waits[0] != want[0] || waits[1] != want[1] || waits[2] != want[2] {
		t.Errorf("waits %v, want %v", waits, want)
	}
}

func TestNextReturnsOtherFailures(t *testing.T) {
	ln := listen(t)
	perm := errors.New("listener broke")
	f := &flaky{Listener: ln, err: perm}
	f.n.Store(1)
	if _, err := Next(context.Background(), f, nil); err != perm || f.calls.Load() != 1 {
		t.Errorf("Next = %v after %d Accepts, want %v after 1", err, f.calls.Load(), perm)
	}
	ln.Close()
	if _, err := Next(context.Background(), ln, nil); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Next on a closed listener = %v, want net.ErrClosed", err)
	}
}

func TestNextStopsWaitingWithCtx(t *testing.T) {
	ln := listen(t)
	f := &flaky{Listener: ln, err: emfile()}
	f.n.Store(1 << 30)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Next(ctx, f, nil)
		done <- err
	}()
	for f.calls.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, syscall.EMFILE) {
		t.Errorf("Next after ctx ended = %v, want the last EMFILE", err)
	}
}
