package ssh

import (
	"errors"
	"net"
	"os"
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

// TestHostgateEarlyReadBehindBlockedWrite: the first Read of an early
// channel whose open went out with its data does not wait on the
// connection's writes. It sent "the held open" (sendHeldOpen) by taking
// the transport's lock, which a write blocked on the conn (a peer that
// does not read) holds: the Read waited there, where its read deadline
// (change 9) could not end it, as long as the write stayed blocked.
func TestHostgateEarlyReadBehindBlockedWrite(t *testing.T) {
	a, b := testConnPair(t)
	cliConn := &stallConn{Conn: b, closed: make(chan struct{})}
	defer cliConn.Close()
	go func() {
		sc, chans, reqs, err := NewServerConn(a, earlyServerConfig(t))
		if err != nil {
			return
		}
		go DiscardRequests(reqs)
		go func() {
			for range chans { // never answered
			}
		}()
		_ = sc.Wait()
	}()
	c, chans, reqs, err := NewClientConn(cliConn, "pipe", &ClientConfig{User: "u", HostKeyCallback: InsecureIgnoreHostKey()})
	if err != nil {
		t.Fatal(err)
	}
	cli := NewClient(c, chans, reqs)
	defer cli.Close()
	conn, err := cli.DialEarly("tcp", "127.0.0.1:9")
	if err != nil {
		t.Fatal(err)
	}
	// The open goes out with these bytes.
	if _, err := conn.Write([]byte("GET / HTTP/1.1\r\n\r\n")); err != nil {
		t.Fatal(err)
	}

	// The server stops reading: the client's next write blocks on the
	// conn, holding the transport's lock.
	cliConn.stalled.Store(true)
	go func() { _, _, _ = cli.SendRequest("keepalive@openssh.com", true, nil) }()
	for i := 0; !cliConn.blocked.Load(); i++ {
		if i == 1000 {
			t.Fatal("the client's write never blocked")
		}
		time.Sleep(10 * time.Millisecond)
	}

	if err := conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() {
		_, err := conn.Read(make([]byte, 1))
		read <- err
	}()
	select {
	case err := <-read:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Read: %v, want its deadline's error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the Read waited on the connection's blocked write past its deadline")
	}
}
