package hostgate_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/hostgate/hostgate"
)

// TestConcurrentFirstUsesShareTheError is DESIGN's "concurrent first
// uses share that one call (and its error)": uses that arrive while a
// connect is under way wait for it rather than start their own, and all
// get its error; the next use after that tries again, once for all.
// TestConcurrentFirstUseConnectsOnce checks only a connect that works.
func TestConcurrentFirstUsesShareTheError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		offline := errors.New("host offline")
		var connects atomic.Int64
		release := make(chan struct{})
		h := hostgate.New(hostgate.Info{}, func(ctx context.Context) (*hostgate.Connection, error) {
			n := connects.Add(1)
			<-release
			if n == 1 {
				return nil, offline
			}
			return &hostgate.Connection{Transport: &fakeTransport{}, Close: func() error { return nil }}, nil
		})
		defer h.Close()

		// Every use that needs the connection, five times over, all at
		// once.
		uses := []func(context.Context) error{
			func(ctx context.Context) error { _, err := h.Connection(ctx); return err },
			func(ctx context.Context) error {
				_, err := h.Spawn(ctx, []string{"true"}, hostgate.SpawnOptions{})
				return err
			},
			func(ctx context.Context) error {
				_, err := h.Exec(ctx, []string{"true"}, hostgate.ExecOptions{})
				return err
			},
			func(ctx context.Context) error { _, err := h.FS(ctx); return err },
			func(ctx context.Context) error { _, err := h.Sync(ctx); return err },
			func(ctx context.Context) error { _, err := h.Forwarder(ctx); return err },
			func(ctx context.Context) error { _, err := h.Dial(ctx, "tcp", "127.0.0.1:1"); return err },
			func(ctx context.Context) error { _, err := h.Listen(ctx, "tcp", "127.0.0.1:0"); return err },
		}
		const rounds = 5
		errs := make([]error, rounds*len(uses))
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() { errs[i] = uses[i%len(uses)](t.Context()) })
		}
		synctest.Wait() // every use waits on the one connect
		if got := connects.Load(); got != 1 {
			t.Fatalf("%d connects while %d uses wait, want 1", got, len(errs))
		}
		close(release)
		wg.Wait()
		for i, err := range errs {
			if !errors.Is(err, offline) {
				t.Errorf("use %d: %v, want the shared connect's error", i, err)
			}
		}
		if got := connects.Load(); got != 1 {
			t.Errorf("%d connects for the uses that failed together, want 1", got)
		}

		// The failure is not kept: the next uses connect again, once.
		for i := range rounds {
			wg.Go(func() { _, errs[i] = h.FS(t.Context()) })
		}
		wg.Wait()
		for i := range rounds {
			if errs[i] != nil {
				t.Errorf("use %d after the failed connect: %v", i, errs[i])
			}
		}
		if got := connects.Load(); got != 2 {
			t.Errorf("%d connects in all, want 2 (the failed one and one shared retry)", got)
		}
	})
}
