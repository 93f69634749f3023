package hostgate_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/hostgate/hostgate"
)

// silentTransport spawns processes on a host that stops answering once
// they have started: writes to their stdin take what fits (a channel's
// window) and then wait, their streams end once their ctx has ended (the
// SSH session is closed on this side), and Wait, the host's word that the
// process ended, comes only when the test releases it (the connection's
// keepalive giving up, a minute on).
type silentTransport struct {
	release chan struct{}
	once    sync.Once
}

func newSilentTransport(t *testing.T) *silentTransport {
	s := &silentTransport{release: make(chan struct{})}
	t.Cleanup(s.end)
	return s
}

func (s *silentTransport) end() { s.once.Do(func() { close(s.release) }) }

func (s *silentTransport) Spawn(ctx context.Context, argv []string, opts hostgate.SpawnOptions) (hostgate.Process, error) {
	p := &silentProcess{s: s, closed: make(chan struct{}), window: 64 << 10}
	context.AfterFunc(ctx, func() { p.closeOnce.Do(func() { close(p.closed) }) })
	return p, nil
}

type silentProcess struct {
	s         *silentTransport
	closed    chan struct{} // the session closed on this side
	closeOnce sync.Once
	mu        sync.Mutex
	window    int
}

func (p *silentProcess) Stdin() io.WriteCloser { return p }
func (p *silentProcess) Stdout() io.Reader     { return p }
func (p *silentProcess) Stderr() io.Reader     { return p }
func (p *silentProcess) Kill(hostgate.Signal) error {
	return nil // sent; the host does not act on it
}
func (p *silentProcess) Wait() error { <-p.s.release; return errors.New("connection lost") }

func (p *silentProcess) Read([]byte) (int, error) { <-p.closed; return 0, io.EOF }
func (p *silentProcess) Close() error             { return nil }

func (p *silentProcess) Write(b []byte) (int, error) {
	p.mu.Lock()
	n := min(len(b), p.window)
	p.window -= n
	p.mu.Unlock()
	if n < len(b) {
		<-p.closed
		return n, io.EOF
	}
	return n, nil
}

// TestCallsEndWithCtxOnSilentHost: Exec with 32 MiB of stdin, an Upload
// of a 32 MiB file and a Download from a host that stops answering once
// the command runs return ctx's error once ctx ends. They waited for the process's
// end, which such a host never reports: against an agent stopped with
// SIGSTOP, 60 s after a 2 s deadline, when the gateway's keepalive cut
// the tunnel (found by the stuckwrite audit).
func TestCallsEndWithCtxOnSilentHost(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 2<<20)
	calls := map[string]func(ctx context.Context, h *hostgate.Host) error{
		"Exec": func(ctx context.Context, h *hostgate.Host) error {
			_, err := h.Exec(ctx, []string{"cat"}, hostgate.ExecOptions{Stdin: bytes.NewReader(data)})
			return err
		},
		"Upload": func(ctx context.Context, h *hostgate.Host) error {
			return hostgate.Upload(ctx, h, fstest.MapFS{"big": {Data: data}}, "/up", nil)
		},
		"Download": func(ctx context.Context, h *hostgate.Host) error {
			return hostgate.Download(ctx, h, "/down", t.TempDir(), nil)
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			tr := newSilentTransport(t)
			h := hostgate.New(hostgate.Info{}, func(ctx context.Context) (*hostgate.Connection, error) {
				return &hostgate.Connection{Transport: tr, Close: func() error { return nil }}, nil
			})
			defer h.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- call(ctx, h) }()
			var err error
			select {
			case err = <-done:
			case <-time.After(time.Minute): // a guard against a hang, not a timing
				t.Fatalf("%s on a silent host: still waiting a minute after its ctx ended", name)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%s on a silent host: %v, want ctx's error", name, err)
			}
			tr.end()
		})
	}
}

// TestExecProviderEndsWithCtxOnSilentHost: the default filesystem's calls
// (ExecProvider) on a host that stops answering once the command runs
// return ctx's error once ctx ends, as Exec does. They read the
// command's output to its end, which comes with ctx, and then waited for
// the process's end, which such a host never reports.
func TestExecProviderEndsWithCtxOnSilentHost(t *testing.T) {
	calls := map[string]func(ctx context.Context, p hostgate.Provider) error{
		"Stat": func(ctx context.Context, p hostgate.Provider) error {
			_, err := p.Stat(ctx, "/x")
			return err
		},
		"Mkdir": func(ctx context.Context, p hostgate.Provider) error {
			return p.Mkdir(ctx, "/x", 0o755, true)
		},
		"Open": func(ctx context.Context, p hostgate.Provider) error {
			r, err := p.Open(ctx, "/x")
			if err == nil {
				_ = r.Close()
				t.Error("Open on a silent host: no error")
			}
			return err
		},
		"Create": func(ctx context.Context, p hostgate.Provider) error {
			w, err := p.Create(ctx, "/x", 0o644)
			if err == nil {
				_ = w.Close()
				t.Error("Create on a silent host: no error")
			}
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			tr := newSilentTransport(t)
			h := hostgate.New(hostgate.Info{}, func(ctx context.Context) (*hostgate.Connection, error) {
				return &hostgate.Connection{Transport: tr, Close: func() error { return nil }}, nil
			})
			defer h.Close()
			p, err := h.FS(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- call(ctx, p) }()
			select {
			case err = <-done:
			case <-time.After(time.Minute): // a guard against a hang, not a timing
				tr.end()
				<-done
				t.Fatalf("%s on a silent host: still waiting a minute after its ctx ended", name)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%s on a silent host: %v, want ctx's error", name, err)
			}
			tr.end()
		})
	}
}
