package hostgate_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/hostgate/hostgate"
)

// fakeTransport spawns nothing real: enough for the lazy-connect tests.
type fakeTransport struct{ spawns atomic.Int64 }

func (f *fakeTransport) Spawn(ctx context.Context, argv []string, opts hostgate.SpawnOptions) (hostgate.Process, error) {
	f.spawns.Add(1)
	return doneProcess{}, nil
}

type doneProcess struct{}

func (doneProcess) Stdin() io.WriteCloser      { return nopWC{} }
func (doneProcess) Stdout() io.Reader          { return eofReader{} }
func (doneProcess) Stderr() io.Reader          { return eofReader{} }
func (doneProcess) Wait() error                { return nil }
func (doneProcess) Kill(hostgate.Signal) error { return nil }

type nopWC struct{}

func (nopWC) Write(b []byte) (int, error) { return len(b), nil }
func (nopWC) Close() error                { return nil }

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// useAll calls every Host method that needs the connection and returns the
// errors.
func useAll(ctx context.Context, h *hostgate.Host) []error {
	_, e1 := h.Connection(ctx)
	_, e2 := h.Spawn(ctx, []string{"true"}, hostgate.SpawnOptions{})
	_, e3 := h.Exec(ctx, []string{"true"}, hostgate.ExecOptions{})
	_, e4 := h.FS(ctx)
	_, e5 := h.Sync(ctx)
	_, e6 := h.Forwarder(ctx)
	_, e7 := h.Dial(ctx, "tcp", "127.0.0.1:1")
	_, e8 := h.Listen(ctx, "tcp", "127.0.0.1:0")
	_, e9 := h.Forward(ctx, hostgate.ForwardSpec{Kind: hostgate.ForwardLocal, Listen: "127.0.0.1:0", Connect: "127.0.0.1:1"})
	return []error{e1, e2, e3, e4, e5, e6, e7, e8, e9}
}

func TestConcurrentFirstUseConnectsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var connects atomic.Int64
		release := make(chan struct{})
		tr := &fakeTransport{}
		closes := 0
		h := hostgate.New(hostgate.Info{}, func(ctx context.Context) (*hostgate.Connection, error) {
			connects.Add(1)
			<-release
			return &hostgate.Connection{Transport: tr, Close: func() error { closes++; return nil }}, nil
		})
		const n = 100
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				var err error
				switch i % 4 {
				case 0:
					_, err = h.Connection(t.Context())
				case 1:
					_, err = h.Spawn(t.Context(), []string{"true"}, hostgate.SpawnOptions{})
				case 2:
					_, err = h.FS(t.Context())
				case 3:
					_, err = h.Exec(t.Context(), []string{"true"}, hostgate.ExecOptions{})
				}
				errs[i] = err
			})
		}
		synctest.Wait() // all 100 are blocked waiting on the one connect
		if got := connects.Load(); got != 1 {
			t.Fatalf("%d connects while 100 callers wait, want 1", got)
		}
		close(release)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("caller %d: %v", i, err)
			}
		}
		if got := connects.Load(); got != 1 {
			t.Errorf("%d connects, want 1", got)
		}
		if got := tr.spawns.Load(); got != 50 {
			t.Errorf("%d spawns, want 50", got)
		}
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
		if err := h.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if closes != 1 {
			t.Errorf("connection closed %d times, want 1", closes)
		}
	})
}

func TestFailedConnectRetried(t *testing.T) {
	boom := errors.New("boom")
	var connects atomic.Int64
	h := hostgate.New(hostgate.Info{}, func(ctx context.Context) (*hostgate.Connection, error) {
		if connects.Add(1) == 1 {
			return nil, boom
		}
		return &hostgate.Connection{Transport: &fakeTransport{}, Close: func() error { return nil }}, nil
	})
	defer h.Close()
	_, err := h.FS(context.Background())
	if !errors.Is(err, boom) {
		t.Fatalf("first use: %v, want boom", err)
	}
	if _, err := h.FS(context.Background()); err != nil {
		t.Fatalf("second use: %v", err)
	}
	if _, err := h.Connection(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := connects.Load(); got != 2 {
		t.Errorf("%d connects, want 2 (one failed, one cached)", got)
	}
}

func TestInvalidConnectionRefused(t *testing.T) {
	closed := false
	h := hostgate.New(hostgate.Info{}, func(ctx context.Context) (*hostgate.Connection, error) {
		return &hostgate.Connection{Close: func() error { closed = true; return nil }}, nil
	})
	defer h.Close()
	if _, err := h.Connection(context.Background()); err == nil {
		t.Fatal("a connection without transport was accepted")
	}
	if !closed {
		t.Error("the refused connection was not closed")
	}
}

// A connect function that breaks New's contract gets an error naming
// what it broke and the fix, under the package's name or the host's (it
// said "connection has no transport", with neither); a nil one fails the
// first use, where it crashed the program in the connect's goroutine.
func TestInvalidConnectionSaysWhatAndFix(t *testing.T) {
	noop := func() error { return nil }
	for _, c := range []struct {
		name    string
		connect hostgate.ConnectFunc
		want    string
	}{
		{"", nil, "hostgate: connect: hostgate.New was given a nil connect function: pass one that returns the host's *Connection"},
		{"", func(context.Context) (*hostgate.Connection, error) { return nil, nil },
			"hostgate: connect: the connect function given to hostgate.New returned neither a *Connection nor an error: return one of them"},
		{"", func(context.Context) (*hostgate.Connection, error) { return &hostgate.Connection{Close: noop}, nil },
			"hostgate: connect: the connect function given to hostgate.New returned a Connection without a Transport, which is required: set Connection.Transport"},
		{"box", func(context.Context) (*hostgate.Connection, error) {
			return &hostgate.Connection{Transport: &fakeTransport{}}, nil
		}, "host box: the connect function given to hostgate.New returned a Connection without Close, which is required: set Connection.Close to end the connection"},
	} {
		h := hostgate.NewNamed(c.name, hostgate.Info{}, c.connect)
		if _, err := h.Connection(context.Background()); err == nil || err.Error() != c.want {
			t.Errorf("got %v\nwant %s", err, c.want)
		}
		_ = h.Close()
	}
}

func TestCloseFailsWaitersAndLaterCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		connectCtxDone := make(chan struct{})
		h := hostgate.New(hostgate.Info{}, func(ctx context.Context) (*hostgate.Connection, error) {
			<-ctx.Done() // a slow connect that honours ctx
			close(connectCtxDone)
			return nil, ctx.Err()
		})
		const n = 20
		var wg sync.WaitGroup
		results := make([][]error, n)
		for i := range n {
			wg.Go(func() { results[i] = useAll(t.Context(), h) })
		}
		synctest.Wait()
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		<-connectCtxDone
		for i, errs := range results {
			for j, err := range errs {
				if !errors.Is(err, hostgate.ErrClosed) {
					t.Errorf("waiter %d call %d: %v, want ErrClosed", i, j, err)
				}
			}
		}
		for j, err := range useAll(t.Context(), h) {
			if !errors.Is(err, hostgate.ErrClosed) {
				t.Errorf("after Close, call %d: %v, want ErrClosed", j, err)
			}
		}
	})
}

func TestCloseAfterConnectClosesConnection(t *testing.T) {
	closes := 0
	h := hostgate.New(hostgate.Info{}, func(ctx context.Context) (*hostgate.Connection, error) {
		return &hostgate.Connection{Transport: &fakeTransport{}, Close: func() error { closes++; return nil }}, nil
	})
	if _, err := h.Connection(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if closes != 1 {
		t.Errorf("closed %d times", closes)
	}
	for j, err := range useAll(context.Background(), h) {
		if !errors.Is(err, hostgate.ErrClosed) {
			t.Errorf("call %d: %v, want ErrClosed", j, err)
		}
	}
}

func TestCallerCtxEndsWaitNotConnect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var connects atomic.Int64
		h := hostgate.New(hostgate.Info{}, func(ctx context.Context) (*hostgate.Connection, error) {
			connects.Add(1)
			<-release
			return &hostgate.Connection{Transport: &fakeTransport{}, Close: func() error { return nil }}, nil
		})
		defer h.Close()
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { _, err := h.Connection(ctx); errc <- err }()
		synctest.Wait()
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled caller: %v", err)
		}
		close(release)
		if _, err := h.Connection(t.Context()); err != nil {
			t.Errorf("next caller: %v", err)
		}
		if connects.Load() != 1 {
			t.Errorf("%d connects, want the shared one only", connects.Load())
		}
	})
}

func TestNoForwarderIsNotSupported(t *testing.T) {
	h := hostgate.New(hostgate.Info{}, func(ctx context.Context) (*hostgate.Connection, error) {
		return &hostgate.Connection{Transport: &fakeTransport{}, Close: func() error { return nil }}, nil
	})
	defer h.Close()
	_, err := h.Dial(context.Background(), "tcp", "127.0.0.1:1")
	if !errors.Is(err, hostgate.ErrNotSupported) || !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "no port forwarding") {
		t.Errorf("Dial: %v, want ErrNotSupported naming port forwarding", err)
	}
	_, err = h.Sync(context.Background())
	if !errors.Is(err, hostgate.ErrNotSupported) || !strings.Contains(err.Error(), "no synchronous filesystem") {
		t.Errorf("Sync: %v, want ErrNotSupported naming the synchronous filesystem", err)
	}
}

func TestSignalCanonical(t *testing.T) {
	for in, want := range map[hostgate.Signal]hostgate.Signal{"TERM": "TERM", "SIGTERM": "TERM", "sigterm": "TERM", "term": "TERM", "Usr1": "USR1", "KILL": "KILL"} {
		if got, ok := in.Canonical(); !ok || got != want {
			t.Errorf("%q.Canonical() = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, bad := range []hostgate.Signal{"", "BOGUS", "15", "SIG", "WINCH"} {
		if _, ok := bad.Canonical(); ok {
			t.Errorf("%q.Canonical() is valid", bad)
		}
	}
}

// TestConnectionInfoFillsHostInfo: a host whose info is learnt by
// connecting (client.LazyHost asks the gateway then) answers it from
// Info once connected, and so does a Wrap of it; Info itself never
// connects. Both answered New's zero Info for good.
func TestConnectionInfoFillsHostInfo(t *testing.T) {
	learnt := hostgate.Info{Kind: "machine", OS: "linux", Home: "/home/u", Persistent: true}
	var connects atomic.Int64
	base := hostgate.New(hostgate.Info{}, func(ctx context.Context) (*hostgate.Connection, error) {
		connects.Add(1)
		info := learnt
		return &hostgate.Connection{Transport: &fakeTransport{}, Close: func() error { return nil }, Info: &info}, nil
	})
	defer base.Close()
	w := hostgate.Wrap(base, func(a []string, _ string, e map[string]string) ([]string, map[string]string) { return a, e })
	defer w.Close()
	if got := base.Info(); got != (hostgate.Info{}) || connects.Load() != 0 {
		t.Fatalf("before any use: Info %+v after %d connects, want the zero Info and none", got, connects.Load())
	}
	if _, err := w.FS(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := base.Info(); got != learnt {
		t.Errorf("base Info once connected: %+v, want %+v", got, learnt)
	}
	if got := w.Info(); got != learnt {
		t.Errorf("wrapped Info once connected: %+v, want %+v", got, learnt)
	}
	_ = base.Close()
	if got := base.Info(); got != learnt {
		t.Errorf("base Info after Close: %+v, want %+v", got, learnt)
	}
}

// TestReconnectAfterLoss: a Host made with Reconnect connects again on
// its first use after its connection's Done closed, once for many
// concurrent uses, and closes the lost connection; a Host without it
// keeps the lost connection, and a connect that fails while the host is
// still away fails that use only.
func TestReconnectAfterLoss(t *testing.T) {
	type made struct {
		done   chan struct{}
		closed atomic.Bool
		tr     *fakeTransport
	}
	host := func(opts ...hostgate.Option) (*hostgate.Host, *[]*made, *atomic.Bool) {
		var mu sync.Mutex
		var conns []*made
		away := &atomic.Bool{}
		h := hostgate.New(hostgate.Info{}, func(ctx context.Context) (*hostgate.Connection, error) {
			if away.Load() {
				return nil, errors.New("host offline")
			}
			m := &made{done: make(chan struct{}), tr: &fakeTransport{}}
			mu.Lock()
			conns = append(conns, m)
			mu.Unlock()
			return &hostgate.Connection{Transport: m.tr, Done: m.done, Close: func() error { m.closed.Store(true); return nil }}, nil
		}, opts...)
		t.Cleanup(func() { _ = h.Close() })
		return h, &conns, away
	}
	ctx := t.Context()

	h, conns, away := host(hostgate.Reconnect())
	if _, err := h.Exec(ctx, []string{"true"}, hostgate.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	first := (*conns)[0]
	close(first.done)
	away.Store(true)
	if _, err := h.Exec(ctx, []string{"true"}, hostgate.ExecOptions{}); err == nil || !strings.Contains(err.Error(), "host offline") {
		t.Fatalf("use while the host is away: %v, want the connect's error", err)
	}
	if !first.closed.Load() {
		t.Error("the lost connection was not closed when a use replaced it")
	}
	away.Store(false)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Go(func() {
			_, err := h.Exec(ctx, []string{"true"}, hostgate.ExecOptions{})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("use after the host came back: %v", err)
		}
	}
	if len(*conns) != 2 || (*conns)[1].tr.spawns.Load() != 20 {
		t.Errorf("%d connections made, want 2 (20 uses after the loss share one connect)", len(*conns))
	}
	if c, err := h.Connection(ctx); err != nil || c.Done != (<-chan struct{})((*conns)[1].done) {
		t.Errorf("connection after reconnect: %v, want the second one", err)
	}

	// Without Reconnect the lost connection stays the Host's.
	h2, conns2, _ := host()
	if _, err := h2.Connection(ctx); err != nil {
		t.Fatal(err)
	}
	close((*conns2)[0].done)
	if _, err := h2.Exec(ctx, []string{"true"}, hostgate.ExecOptions{}); err != nil {
		t.Fatal(err) // the fake's Spawn does not know it is lost
	}
	if len(*conns2) != 1 || (*conns2)[0].closed.Load() {
		t.Errorf("without Reconnect: %d connections, first closed %v; want the one, open", len(*conns2), (*conns2)[0].closed.Load())
	}
}
