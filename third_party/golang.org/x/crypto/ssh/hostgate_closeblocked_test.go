package ssh

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// stallConn is a conn whose peer stops reading once stall is called: a
// Write then blocks until the conn is closed, as one on a TCP socket
// whose peer's window stays shut does. Reads go on.
type stallConn struct {
	net.Conn
	stalled  atomic.Bool
	blocked  atomic.Bool // a Write is waiting on the stall
	closed   chan struct{}
	closeOne sync.Once
}

func (c *stallConn) Write(p []byte) (int, error) {
	if c.stalled.Load() {
		c.blocked.Store(true)
		<-c.closed
		return 0, net.ErrClosed
	}
	return c.Conn.Write(p)
}

func (c *stallConn) Close() error {
	c.closeOne.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// TestHostgateMuxEndsWithWriteBlocked: a connection whose mux ends on the
// peer's protocol error (here a malformed early data packet) while a
// write is blocked on the conn (the peer does not read; a keepalive, here a
// global request) ends: the mux's close of the transport closes the conn,
// which ends the write. The transport's Close took the transport's lock
// first, to stop the held packets' timer (change 25), and so waited for
// good behind the blocked write, which holds it: the mux never ended, Wait
// never returned, and the conn stayed open.
func TestHostgateMuxEndsWithWriteBlocked(t *testing.T) {
	a, b := testConnPair(t)
	srv := &stallConn{Conn: a, closed: make(chan struct{})}
	defer srv.Close()
	conns := make(chan *ServerConn, 1)
	waited := make(chan error, 1)
	go func() {
		sc, chans, reqs, err := NewServerConn(srv, earlyServerConfig(t))
		if err != nil {
			waited <- err
			return
		}
		go DiscardRequests(reqs)
		go func() {
			for nc := range chans {
				_ = nc.Reject(Prohibited, "no channels")
			}
		}()
		conns <- sc
		waited <- sc.Wait()
	}()
	c, chans, reqs, err := NewClientConn(b, "pipe", &ClientConfig{User: "u", HostKeyCallback: InsecureIgnoreHostKey()})
	if err != nil {
		t.Fatal(err)
	}
	cli := NewClient(c, chans, reqs)
	defer cli.Close()
	var sc *ServerConn
	select {
	case sc = <-conns:
	case <-time.After(10 * time.Second):
		t.Fatal("no server connection")
	}

	// The client stops reading: the server's next write blocks on the
	// conn, holding the transport's lock.
	srv.stalled.Store(true)
	sent := make(chan error, 1)
	go func() {
		_, _, err := sc.SendRequest("keepalive@openssh.com", true, nil)
		sent <- err
	}()
	for i := 0; !srv.blocked.Load(); i++ {
		if i == 1000 {
			t.Fatal("the server's write never blocked")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// A malformed packet ends the server's mux.
	if err := c.(*connection).transport.writePacket([]byte{msgChannelEarlyData, 0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waited:
		if err == nil {
			t.Fatal("the server's connection ended without an error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server's connection did not end on the peer's protocol error while a write was blocked")
	}
	select {
	case err := <-sent:
		if err == nil {
			t.Fatal("the blocked request succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the blocked write did not end with the connection")
	}
}
