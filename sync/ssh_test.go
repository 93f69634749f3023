package syncfs

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/sshlayer"
)

// TestFromSSHHost runs the whole stack: a lazy Host over an SSH connection
// (sshlayer's loopback server), whose sync spec dials a second SSH
// connection; the bridge must use that one and never the host's main one.
func TestFromSSHHost(t *testing.T) {
	root, files := tree(t)
	ts, err := sshlayer.StartTestServer()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := ts.Close(); err != nil {
			t.Errorf("ssh server close: %v", err)
		}
	}()
	auth := sshlayer.Auth{Signer: ts.ClientSigner, HostKey: ts.HostKey}
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
