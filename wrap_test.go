package hostgate_test

import (
	"context"
	"errors"
	"fmt"
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
	if f, err := w.Forwarder(ctx); err != nil || f != fwd {
		t.Errorf("wrapped forwarder is not the base's: %v", err)
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

// loopbackForwarder is an in-memory stand-in for SSH forwarding: Dial
// reaches the address on loopback, Listen listens on loopback. It records
// what it handed out so tests can check release.
type loopbackForwarder struct {
	mu        sync.Mutex
	listeners []net.Listener
	dials     []string
}

func (f *loopbackForwarder) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	f.mu.Lock()
	f.dials = append(f.dials, addr)
	f.mu.Unlock()
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

func (f *loopbackForwarder) Listen(ctx context.Context, network, addr string) (net.Listener, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.listeners = append(f.listeners, ln)
	f.mu.Unlock()
	return ln, nil
}
