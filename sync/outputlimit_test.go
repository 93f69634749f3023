package syncfs_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	syncfs "github.com/hostgate/hostgate/sync"
)

// overLimit answers a ReadDir with ExecProvider's error for an answer past
// its bound (the command killed, the connection fine), and holds a Stat
// of "slow" until release: a call under way on the same connection.
type overLimit struct {
	hostgate.Provider // only Stat and ReadDir are called
	entered, release  chan struct{}
}

func (p overLimit) Stat(ctx context.Context, name string) (fs.FileInfo, error) {
	if strings.HasSuffix(name, "slow") {
		close(p.entered)
		select {
		case <-p.release:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	return info{"f", 0o644}, nil
}

func (p overLimit) ReadDir(ctx context.Context, name string) ([]fs.DirEntry, error) {
	return nil, &fs.PathError{Op: "readdir", Path: name, Err: fmt.Errorf("%w: the host's answer passed 67108864 bytes, the most ExecProvider reads from one command", hostgate.ErrOutputLimit)}
}

// TestOutputLimitKeepsTheConnection: a provider's call that fails with
// ErrOutputLimit (ExecProvider's for a listing past 64 MiB, or a host
// whose command floods stderr: the command is killed, the connection is
// fine) is that call's answer. It was taken for a broken connection: the
// call said "syncfs: connection broken", and every other call under way
// on the connection (a Stat here; a WriteFile half sent alike) failed
// with that error of another call's, and the next call connected again.
func TestOutputLimitKeepsTheConnection(t *testing.T) {
	var connects atomic.Int32
	p := overLimit{entered: make(chan struct{}), release: make(chan struct{})}
	fsys := syncfs.New(&hostgate.SyncSpec{Name: "h", Connect: func(ctx context.Context) (*hostgate.SyncConnection, error) {
		connects.Add(1)
		return &hostgate.SyncConnection{FS: p}, nil
	}}, &syncfs.Options{Timeout: time.Hour})
	defer fsys.Close()

	errc := make(chan error, 1)
	go func() { _, err := fsys.Stat("slow"); errc <- err }()
	<-p.entered
	_, err := fsys.ReadDir("big")
	if !errors.Is(err, hostgate.ErrOutputLimit) || strings.Contains(err.Error(), "connection broken") ||
		!strings.HasPrefix(err.Error(), "host h: readdir big: ") {
		t.Errorf("ReadDir past the provider's bound: %v; want host h: readdir big: and ErrOutputLimit, not a broken connection", err)
	}
	close(p.release)
	if err := <-errc; err != nil {
		t.Errorf("a Stat under way on the same connection: %v", err)
	}
	if _, err := fsys.Stat("next"); err != nil {
		t.Errorf("the next Stat: %v", err)
	}
	if n := connects.Load(); n != 1 {
		t.Errorf("%d connects; want 1, the connection kept", n)
	}
}
