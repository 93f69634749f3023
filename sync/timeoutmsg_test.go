package syncfs_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hostgate/hostgate"
	syncfs "github.com/hostgate/hostgate/sync"
)

// TestTimeoutSaysTheBoundAndTheFix: a call that gets no answer says how
// long it waited and what sets that bound, as well as the host and the
// name; it read "host h: stat x: syncfs: no answer within the timeout",
// which left the caller to find which timeout and where it is set. It
// still matches ErrTimeout, ETIMEDOUT and os.ErrDeadlineExceeded.
func TestTimeoutSaysTheBoundAndTheFix(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		closed := make(chan struct{})
		fsys := syncfs.New(&hostgate.SyncSpec{Name: "h", Connect: func(ctx context.Context) (*hostgate.SyncConnection, error) {
			return &hostgate.SyncConnection{FS: silentProvider{closed: closed}, Close: func() error { close(closed); return nil }}, nil
		}}, &syncfs.Options{Timeout: 7 * time.Second})
		defer fsys.Close()
		_, err := fsys.Stat("x")
		if !errors.Is(err, syncfs.ErrTimeout) || !errors.Is(err, syscall.ETIMEDOUT) || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("a Stat with no answer: %v; want ErrTimeout, ETIMEDOUT and os.ErrDeadlineExceeded", err)
		}
		for _, want := range []string{"host h: stat x: ", "7s", "Options.Timeout"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("a Stat with no answer: %q; want it to say %q", err, want)
			}
		}
	})
}
