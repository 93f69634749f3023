package syncfs_test

import (
	"context"
	"io/fs"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hostgate/hostgate"
	syncfs "github.com/hostgate/hostgate/sync"
)

// deafProvider's Stat ignores its ctx and returns only once its
// connection has closed, as a call on a host that stopped answering
// does; ended is closed as it returns.
type deafProvider struct {
	hostgate.Provider // only Stat is called
	closed, ended     chan struct{}
}

func (p deafProvider) Stat(ctx context.Context, name string) (fs.FileInfo, error) {
	<-p.closed
	close(p.ended)
	return nil, fs.ErrClosed
}

// TestSecondCloseWaitsForTheFirst: a Close made while another is under
// way returns, as Close's doc says, once every goroutine of the FS has
// ended, not at once. FromHost's FS is closed by its host's Close on a
// goroutine of its own, so a caller's own Close after the host's (defer
// order) returned nil while a call stuck on the connection still ran,
// and a goroutine check after it (goleak) found the FS's goroutines.
func TestSecondCloseWaitsForTheFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{}) // holds the connection's Close
		p := deafProvider{closed: make(chan struct{}), ended: make(chan struct{})}
		fsys := syncfs.New(&hostgate.SyncSpec{Connect: func(ctx context.Context) (*hostgate.SyncConnection, error) {
			return &hostgate.SyncConnection{FS: p, Close: func() error {
				<-gate
				close(p.closed)
				return nil
			}}, nil
		}}, &syncfs.Options{Timeout: time.Hour})
		stat := make(chan error, 1)
		go func() { _, err := fsys.Stat("x"); stat <- err }()
		synctest.Wait() // the Stat is under way
		first := make(chan error, 1)
		go func() { first <- fsys.Close() }()
		synctest.Wait() // the first Close waits for the connection's close
		second := make(chan error, 1)
		go func() { second <- fsys.Close() }()
		synctest.Wait()
		select {
		case <-second:
			t.Error("a second Close returned while the first still waited for a call's goroutine")
			second <- nil
		default:
		}
		close(gate)
		<-first
		<-second
		select {
		case <-p.ended:
		default:
			t.Error("Close returned before the call on the connection ended")
		}
		<-stat
	})
}
