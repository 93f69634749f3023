//go:build unix

package syncfs

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/sshtest"
	"github.com/hostgate/hostgate/sshlayer"
)

// statSignal is a provider whose Stat says it was called before it asks
// the host.
type statSignal struct {
	hostgate.Provider
	called chan<- struct{}
}

func (p statSignal) Stat(ctx context.Context, name string) (fs.FileInfo, error) {
	select {
	case p.called <- struct{}{}:
	default:
	}
	return p.Provider.Stat(ctx, name)
}

// TestCallsCutByALostConnectionMatchErrConnectionEnded: calls under way
// when the connection to the host ends by itself (over SSH: the agent or
// the gateway went away) fail matching hostgate.ErrConnectionEnded, as a
// Host's own calls do and as those still waiting when a later call finds
// the connection ended did; the SFTP calls the loss cut failed with
// "connection broken: … connection lost" matching nothing a caller of
// syncfs could test for. The next call connects again.
func TestCallsCutByALostConnectionMatchErrConnectionEnded(t *testing.T) {
	root, _ := tree(t)
	ts, auth := sshtest.Server(t)
	auth.Host = "box"
	conns := make(chan *frozenConn, 10)
	dial := sshlayer.SyncSpec(func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", ts.Addr)
		if err != nil {
			return nil, err
		}
		fc := &frozenConn{Conn: c, frozen: new(atomic.Bool), closed: make(chan struct{})}
		conns <- fc
		return fc, nil
	}, auth)
	called := make(chan struct{}, 1)
	spec := &hostgate.SyncSpec{Name: dial.Name, Connect: func(ctx context.Context) (*hostgate.SyncConnection, error) {
		c, err := dial.Connect(ctx)
		if err != nil {
			return nil, err
		}
		c.FS = statSignal{c.FS, called}
		return c, nil
	}}
	fsys := New(spec, &Options{Root: root, Timeout: time.Hour})
	defer func() {
		if err := fsys.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	if _, err := fsys.Stat("hello.txt"); err != nil {
		t.Fatal(err)
	}
	<-called
	c := <-conns
	c.frozen.Store(true) // the Stat below is asked, never answered
	errc := make(chan error, 1)
	go func() { _, err := fsys.Stat("hello.txt"); errc <- err }()
	<-called
	c.Close() // the connection is lost under the Stat
	err := <-errc
	if !errors.Is(err, hostgate.ErrConnectionEnded) || !strings.HasPrefix(err.Error(), "host box: stat hello.txt: ") {
		t.Fatalf("a Stat cut by the connection's loss: %v; want it naming the host and the op, matching ErrConnectionEnded", err)
	}
	if _, err := fsys.Stat("hello.txt"); err != nil {
		t.Fatalf("the next call: %v", err)
	}
}
