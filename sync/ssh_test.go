//go:build unix

package syncfs

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/sshtest"
	"github.com/hostgate/hostgate/sshlayer"
)

// TestFromSSHHost runs the whole stack: a lazy Host over an SSH connection
// (sshlayer's loopback server), whose sync spec dials a second SSH
// connection; the bridge must use that one and never the host's main one.
func TestFromSSHHost(t *testing.T) {
	root, files := tree(t)
	ts, auth := sshtest.Server(t)
	var dials atomic.Int32
	dial := func(ctx context.Context) (net.Conn, error) {
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, "tcp", ts.Addr)
	}
	host := hostgate.New(hostgate.Info{Kind: "ssh"}, func(ctx context.Context) (*hostgate.Connection, error) {
		conn, err := dial(ctx)
		if err != nil {
			return nil, err
		}
		c, err := sshlayer.Connect(ctx, conn, auth)
		if err != nil {
			return nil, err
		}
		return c.Connection(sshlayer.SyncSpec(dial, auth)), nil
	})
	defer host.Close()

	fsys := FromHost(host, &Options{Root: root})
	defer func() {
		if err := fsys.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	if err := fstest.TestFS(fsys, files...); err != nil {
		t.Fatal(err)
	}
	if err := fsys.WriteFile("new", []byte("over ssh"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := fsys.ReadFile("new"); err != nil || string(b) != "over ssh" {
		t.Fatalf("read back %q, %v", b, err)
	}
	// One dial for the host's main connection, one for the bridge's own.
	if n := dials.Load(); n != 2 {
		t.Fatalf("dials = %d, want 2 (main + sync)", n)
	}
}

// frozenConn stops delivering what the peer sends once freeze is set, like
// a host whose network went silent; Close releases a blocked Read.
type frozenConn struct {
	net.Conn
	frozen    *atomic.Bool
	closed    chan struct{}
	closeOnce sync.Once
}

func (c *frozenConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.frozen.Load() {
		<-c.closed
		return 0, net.ErrClosed
	}
	return n, err
}

func (c *frozenConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// TestSSHHostStopsAnswering: over SSH, a sync connection whose peer goes
// silent times out with ETIMEDOUT, is torn down without waiting on the peer
// (goleak checks its goroutines), and the next call dials afresh.
func TestSSHHostStopsAnswering(t *testing.T) {
	root, _ := tree(t)
	ts, auth := sshtest.Server(t)
	var (
		mu    sync.Mutex
		conns []*frozenConn
	)
	spec := sshlayer.SyncSpec(func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", ts.Addr)
		if err != nil {
			return nil, err
		}
		fc := &frozenConn{Conn: c, frozen: new(atomic.Bool), closed: make(chan struct{})}
		mu.Lock()
		conns = append(conns, fc)
		mu.Unlock()
		return fc, nil
	}, auth)
	fsys := New(spec, &Options{Root: root, Timeout: 300 * time.Millisecond})
	defer func() {
		if err := fsys.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	lastConn := func() *frozenConn {
		mu.Lock()
		defer mu.Unlock()
		return conns[len(conns)-1]
	}
	before := eventually(t, func() error { _, err := fsys.Stat("hello.txt"); return err })
	lastConn().frozen.Store(true)
	if _, err := fsys.Stat("hello.txt"); !errors.Is(err, syscall.ETIMEDOUT) {
		t.Fatalf("stat on a silent host = %v; want ETIMEDOUT", err)
	}
	retries := eventually(t, func() error {
		b, err := fsys.ReadFile("hello.txt")
		if err == nil && string(b) != "hello, world\n" {
			t.Fatalf("read %q", b)
		}
		return err
	})
	mu.Lock()
	n := int32(len(conns))
	mu.Unlock()
	if want := 2 + before + retries; n != want {
		t.Fatalf("dials = %d, want %d", n, want)
	}
}
