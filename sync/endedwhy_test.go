package syncfs_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hostgate/hostgate"
	syncfs "github.com/hostgate/hostgate/sync"
)

// TestCallUnderWayOnAnEndedConnectionSaysWhy: a call under way when its
// connection ends by itself, and which the next call finds ended, fails
// with why the connection ended (SyncConnection.Err), still matching
// ErrConnectionEnded. In a soak, six callers of a sandbox's FS terminated
// under them got "host ID: stat d: syncfs: connection broken: hostgate:
// host connection ended", where the others got the reason: "its execution
// ended (reason terminated): provision a new one".
func TestCallUnderWayOnAnEndedConnectionSaysWhy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		why := errors.New("sshlayer: connection lost: its execution ended (reason terminated): provision a new one")
		ended := make(chan struct{})
		var connects atomic.Int32
		spec := &hostgate.SyncSpec{Name: "sbx", Connect: func(ctx context.Context) (*hostgate.SyncConnection, error) {
			if connects.Add(1) > 1 {
				return nil, errors.New("its execution ended")
			}
			closed := make(chan struct{})
			return &hostgate.SyncConnection{
				FS:    silentProvider{closed: closed},
				Close: func() error { close(closed); return nil },
				Done:  ended,
				Err:   func() error { return why },
			}, nil
		}}
		fsys := syncfs.New(spec, &syncfs.Options{Timeout: time.Hour})
		defer fsys.Close()
		errc := make(chan error, 1)
		go func() { _, err := fsys.Stat("x"); errc <- err }()
		synctest.Wait() // the Stat is under way
		close(ended)
		_, _ = fsys.Stat("y") // finds the connection ended
		err := <-errc
		if !errors.Is(err, hostgate.ErrConnectionEnded) || !strings.HasPrefix(err.Error(), "host sbx: stat x: ") ||
			!strings.Contains(err.Error(), why.Error()) {
			t.Fatalf("the call under way: %v; want the host, the op, ErrConnectionEnded and why: %v", err, why)
		}
	})
}
