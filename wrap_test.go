//go:build unix

package hostgate_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/localexec"
)

func TestWrapRunsEveryProcessThroughWrapper(t *testing.T) {
	baseFS := hostgate.ExecProvider(&localexec.Transport{})
	fwd := &loopbackForwarder{}
	var baseCloses atomic.Int64
	spec := &hostgate.SyncSpec{Timeout: time.Second}
	base := hostgate.New(hostgate.Info{Kind: "local", Home: "/home/x"}, func(ctx context.Context) (*hostgate.Connection, error) {
		return &hostgate.Connection{
			Transport: &localexec.Transport{}, FS: baseFS, Forward: fwd, Sync: spec,
			Close: func() error { baseCloses.Add(1); return nil },
		}, nil
	})
	defer base.Close()

	var mu sync.Mutex
	var seenDirs []string
	w := hostgate.Wrap(base, func(argv []string, dir string, env map[string]string) ([]string, map[string]string) {
		mu.Lock()
		seenDirs = append(seenDirs, dir)
		mu.Unlock()
		env["WRAPPED"] = "yes"
		return append([]string{"nice", "-n", "5"}, argv...), env
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The base is untouched: its processes are not wrapped.
	res, err := base.Exec(ctx, []string{"sh", "-c", `echo "${WRAPPED-unset}"; nice`}, hostgate.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var baseNice int
	if _, err := fmt.Sscanf(string(res.Stdout), "unset\n%d\n", &baseNice); err != nil {
		t.Fatalf("base exec output %q: %v", res.Stdout, err)
	}
	res, err = w.Exec(ctx, []string{"sh", "-c", `echo "$WRAPPED $ORIG $(nice)"`}, hostgate.ExecOptions{
		SpawnOptions: hostgate.SpawnOptions{Dir: "/tmp", Env: map[string]string{"ORIG": "kept"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(res.Stdout)), fmt.Sprintf("yes kept %d", min(baseNice+5, 19)); got != want {
		t.Errorf("wrapped output %q, want %q", got, want)
	}
	if len(seenDirs) != 1 || seenDirs[0] != "/tmp" {
		t.Errorf("wrapper saw dirs %q", seenDirs)
	}

	if fs, err := w.FS(ctx); err != nil || fs != baseFS {
		t.Errorf("wrapped FS is not the base's: %v", err)
	}
	// The wrapper's forwarder is the base's, behind what Close ends.
	if f, err := w.Forwarder(ctx); err != nil {
		t.Error(err)
	} else if _, err := f.Dial(ctx, "tcp", "127.0.0.1:1"); err == nil || len(fwd.dials) != 1 || fwd.dials[0] != "127.0.0.1:1" {
		t.Errorf("wrapped forwarder did not dial through the base's: %v, dials %q", err, fwd.dials)
	}
	if s, err := w.Sync(ctx); err != nil || s != spec {
		t.Errorf("wrapped sync spec is not the base's: %v", err)
	}
	if w.Info() != base.Info() {
		t.Errorf("info differs")
	}

	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if n := baseCloses.Load(); n != 0 {
		t.Errorf("closing the wrapper closed the base %d times", n)
	}
	if _, err := w.Exec(ctx, []string{"true"}, hostgate.ExecOptions{}); !errors.Is(err, hostgate.ErrClosed) {
		t.Errorf("closed wrapper: %v", err)
	}
	if _, err := base.Exec(ctx, []string{"true"}, hostgate.ExecOptions{}); err != nil {
		t.Errorf("base after wrapper close: %v", err)
	}
	if err := base.Close(); err != nil {
		t.Fatal(err)
	}
	if baseCloses.Load() != 1 {
		t.Errorf("base closes %d", baseCloses.Load())
	}
	w2 := hostgate.Wrap(base, func(a []string, _ string, e map[string]string) ([]string, map[string]string) { return a, e })
	if _, err := w2.FS(ctx); !errors.Is(err, hostgate.ErrClosed) {
		t.Errorf("wrapping a closed base: %v", err)
	}
}

func TestWrapPersistentUsesWatchdog(t *testing.T) {
	base, _ := localHost(t, true)
	var calls atomic.Int64
	w := hostgate.Wrap(base, func(argv []string, dir string, env map[string]string) ([]string, map[string]string) {
		calls.Add(1)
		return append([]string{"env", "W=1"}, argv...), env
	})
	defer w.Close()
	p, pids := startTree(t, context.Background(), w)
	if err := p.Kill(hostgate.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = waitTimeout(t, p)
	assertGone(t, pids)
	if calls.Load() != 1 {
		t.Errorf("wrapper called %d times", calls.Load())
	}
}

// endingForwarder is a loopbackForwarder that knows when its connection
// ends, as the SSH client does.
type endingForwarder struct {
	loopbackForwarder
	done chan struct{}
}

func (f *endingForwarder) Done() <-chan struct{} { return f.done }

// TestWrapCloseEndsWhatItOpened: closing a wrapper ends what was opened
// through it (a process, a forward, a dialed connection, a listener), as
// closing a host ends what runs over its connection, and leaves the base
// and its connection to their owner. Everything used to go on running
// over the base's connection, with nothing left to stop it but the base.
func TestWrapCloseEndsWhatItOpened(t *testing.T) {
	fwd := &endingForwarder{done: make(chan struct{})}
	var baseCloses atomic.Int64
	base := hostgate.New(hostgate.Info{Kind: "local"}, func(ctx context.Context) (*hostgate.Connection, error) {
		return &hostgate.Connection{
			Transport: &localexec.Transport{}, Forward: fwd,
			Close: func() error { baseCloses.Add(1); close(fwd.done); return nil },
		}, nil
	})
	defer base.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	nop := func(a []string, _ string, e map[string]string) ([]string, map[string]string) { return a, e }
	w := hostgate.Wrap(base, nop)

	p, err := w.Spawn(ctx, []string{"sleep", "60"}, hostgate.SpawnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill(hostgate.SIGKILL) })
	waited := make(chan error, 1)
	go func() { waited <- p.Wait() }()
	fw, err := w.Forward(ctx, hostgate.ForwardSpec{Kind: hostgate.ForwardLocal, Listen: "127.0.0.1:0", Connect: echo.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fw.Close() })
	conn, err := w.Dial(ctx, "tcp", echo.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, ok := conn.(interface{ CloseWrite() error }); !ok {
		t.Error("a dialed connection lost its CloseWrite through the wrapper")
	}
	ln, err := w.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waited:
		var ee *hostgate.ExitError
		if !errors.As(err, &ee) {
			t.Errorf("process after the wrapper closed: %v, want killed", err)
		}
	case <-time.After(20 * time.Second):
		t.Error("the wrapper's process still runs 20 s after the wrapper closed")
	}
	select {
	case <-fw.Done():
		// The wrapper's own Close: ErrClosed, as its other calls say
		// (ErrConnectionEnded is for an end the caller did not make).
		if !errors.Is(fw.Err(), hostgate.ErrClosed) || errors.Is(fw.Err(), hostgate.ErrConnectionEnded) {
			t.Errorf("forward stopped with %v, want ErrClosed", fw.Err())
		}
	case <-time.After(20 * time.Second):
		t.Error("the wrapper's forward still runs 20 s after the wrapper closed")
	}
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("read on the wrapper's dialed connection after Close: %v, want net.ErrClosed", err)
	}
	accepted := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_ = c.Close()
		}
		accepted <- err
	}()
	select {
	case err := <-accepted:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("accept on the wrapper's listener after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(20 * time.Second):
		t.Error("the wrapper's listener still accepts 20 s after the wrapper closed")
		_ = ln.Close()
		<-accepted
	}

	// The base and its connection are the owner's, and unharmed.
	if n := baseCloses.Load(); n != 0 {
		t.Errorf("closing the wrapper closed the base %d times", n)
	}
	if _, err := base.Exec(ctx, []string{"true"}, hostgate.ExecOptions{}); err != nil {
		t.Errorf("base after the wrapper closed: %v", err)
	}
	c2, err := base.Dial(ctx, "tcp", echo.Addr().String())
	if err != nil {
		t.Errorf("base dial after the wrapper closed: %v", err)
	} else {
		_ = c2.Close()
	}

	// Closing the base ends what a wrapper still open runs over its
	// connection: a forward stops when that connection ends.
	w2 := hostgate.Wrap(base, nop)
	defer w2.Close()
	fw2, err := w2.Forward(ctx, hostgate.ForwardSpec{Kind: hostgate.ForwardLocal, Listen: "127.0.0.1:0", Connect: echo.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fw2.Close() })
	if err := base.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-fw2.Done():
	case <-time.After(20 * time.Second):
		t.Error("a wrapper's forward still runs 20 s after its base closed")
	}
}
