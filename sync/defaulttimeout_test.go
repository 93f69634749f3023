package syncfs_test

import (
	"context"
	"errors"
	"io/fs"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hostgate/hostgate"
	syncfs "github.com/hostgate/hostgate/sync"
)

// silentProvider never answers a Stat: a host whose connection stays up
// and says nothing. Its connection's Close (the FS abandoning it) ends
// the Stat, as closing an SSH connection ends its requests.
type silentProvider struct {
	hostgate.Provider // only Stat is called
	closed            chan struct{}
}

func (p silentProvider) Stat(ctx context.Context, name string) (fs.FileInfo, error) {
	select {
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	case <-p.closed:
		return nil, errors.New("connection closed")
	}
}

// TestDefaultTimeoutIsThirtySeconds is the seed's "a call that gets no
// answer within 30 seconds fails with ETIMEDOUT", with neither Options
// nor the spec setting a timeout (every other test sets its own): a
// connect that never finishes, and a call on a connection that never
// answers, each fail with ETIMEDOUT at 30 s and not before.
func TestDefaultTimeoutIsThirtySeconds(t *testing.T) {
	for name, connect := range map[string]func(ctx context.Context) (*hostgate.SyncConnection, error){
		"connect never answers": func(ctx context.Context) (*hostgate.SyncConnection, error) {
			<-ctx.Done()
			return nil, context.Cause(ctx)
		},
		"call never answered": func(ctx context.Context) (*hostgate.SyncConnection, error) {
			closed := make(chan struct{})
			return &hostgate.SyncConnection{
				FS:    silentProvider{closed: closed},
				Close: func() error { close(closed); return nil },
			}, nil
		},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fsys := syncfs.New(&hostgate.SyncSpec{Connect: connect}, nil)
				defer fsys.Close()
				start := time.Now()
				errc := make(chan error, 1)
				go func() { _, err := fsys.Stat("x"); errc <- err }()

				time.Sleep(30*time.Second - time.Millisecond)
				synctest.Wait()
				select {
				case err := <-errc:
					t.Fatalf("the call ended after %v with %v; want it waiting until 30 s", time.Since(start), err)
				default:
				}
				time.Sleep(time.Millisecond)
				synctest.Wait()
				select {
				case err := <-errc:
					if !errors.Is(err, syscall.ETIMEDOUT) {
						t.Fatalf("after 30 s: %v, want ETIMEDOUT", err)
					}
				default:
					t.Fatal("no answer after 30 s, and the call still waits")
				}
			})
		})
	}
	if syncfs.DefaultTimeout != 30*time.Second {
		t.Errorf("DefaultTimeout is %v, the seed's is 30 s", syncfs.DefaultTimeout)
	}
}
