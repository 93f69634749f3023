//go:build unix

package hostgate_test

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/hostgate/hostgate"
)

// TestCallsReportCtxCause: a caller that ended ctx with a cause of its own
// (context.WithCancelCause, WithTimeoutCause) gets it back from the call it
// ended, still matching context.Canceled: Exec said only "context
// canceled", as did a call waiting for the host's connect.
func TestCallsReportCtxCause(t *testing.T) {
	errStop := errors.New("the user pressed stop")
	t.Run("exec", func(t *testing.T) {
		h, _ := localHost(t, false)
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		// Cancelled once the process has started (Exec reads stdin only
		// after Spawn).
		stdin := readFunc(func([]byte) (int, error) { cancel(errStop); return 0, io.EOF })
		_, err := h.Exec(ctx, []string{"sleep", "300"}, hostgate.ExecOptions{Stdin: stdin})
		if !errors.Is(err, errStop) || !errors.Is(err, context.Canceled) {
			t.Errorf("Exec cancelled with a cause: %v, want it to match the cause and context.Canceled", err)
		}
	})
	t.Run("connect", func(t *testing.T) {
		started, release := make(chan struct{}), make(chan struct{})
		h := hostgate.New(hostgate.Info{Kind: "local"}, func(ctx context.Context) (*hostgate.Connection, error) {
			close(started)
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil, errors.New("not connecting in this test")
		})
		defer h.Close()
		defer close(release)
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		go func() { <-started; cancel(errStop) }()
		_, err := h.Exec(ctx, []string{"true"}, hostgate.ExecOptions{})
		if !errors.Is(err, errStop) || !errors.Is(err, context.Canceled) {
			t.Errorf("Exec cancelled while connecting: %v, want it to match the cause and context.Canceled", err)
		}
	})
}
