//go:build linux

package sshlayer

import (
	"net"
	"strconv"
	"sync"
	"testing"
	"time"
)

// silentTarget listens on loopback and holds every connection it accepts
// without reading, writing or closing it, as a server waiting for a
// request, a long poll or an idle database connection does, until the
// test ends.
func silentTarget(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		held []net.Conn
		wg   sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		for _, c := range held {
			_ = c.Close()
		}
	})
	return ln
}

// TestDirectTCPIPClosedByClientFreesItsPlace: a direct-tcpip channel the
// client closed while its target stays silent ends on the server, as it
// does with sshd, so its place under MaxDirectTCPIP is free again, whether
// the client sent EOF first or closed at once. The server only half-closed
// the target on the CLOSE and held the channel, its goroutines and the
// target's socket until the SSH connection ended: with a limit of one,
// the second channel was refused as "too many channels".
func TestDirectTCPIPClosedByClientFreesItsPlace(t *testing.T) {
	t.Parallel()
	ts := srvStartServer(t, &ServerConfig{MaxDirectTCPIP: 1})
	c := srvDialServer(t, ts)
	target := silentTarget(t).Addr().String()
	for i, eofFirst := range []bool{false, true, false} {
		var conn net.Conn
		deadline := time.Now().Add(srvTestWait)
		for {
			var err error
			if conn, err = c.Dial("tcp", target); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("channel %d, after %d closed by the client: %v", i, i, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if eofFirst {
			if err := conn.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond) // the server takes the EOF alone first
		}
		if err := conn.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRemoteForwardClosedByClientFreesItsPlace: a remote forward's
// connection whose channel the client closed is closed on the host, and
// no longer counts against maxForwardedConns, while the program that
// dialed it waits for data without writing. The server only half-closed
// it and held its place until the SSH connection ended: after
// maxForwardedConns of them, every new connection to the forward was
// dropped.
func TestRemoteForwardClosedByClientFreesItsPlace(t *testing.T) {
	t.Parallel()
	ts := srvStartServer(t, nil)
	c := srvDialServer(t, ts)
	ln, err := c.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	accepted := make(chan net.Conn)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(accepted)
		for {
			fc, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- fc
		}
	})
	defer wg.Wait()
	defer ln.Close()
	var waiting []net.Conn // the programs that dialed the forward, silent
	defer func() {
		for _, conn := range waiting {
			_ = conn.Close()
		}
	}()
	// dial connects to the forward and closes the channel the client gets
	// for it; it reports false when none came within wait (the server
	// dropped the connection).
	dial := func(wait time.Duration) bool {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		waiting = append(waiting, conn)
		select {
		case fc := <-accepted:
			_ = fc.Close()
			return true
		case <-time.After(wait):
			return false
		}
	}
	for i := range maxForwardedConns {
		if !dial(srvTestWait) {
			t.Fatalf("connection %d to the forward: no channel reached the client", i)
		}
	}
	for deadline := time.Now().Add(srvTestWait); !dial(100 * time.Millisecond); {
		if time.Now().After(deadline) {
			t.Fatalf("after %d forwarded connections closed by the client, a new one was still dropped", maxForwardedConns)
		}
	}
}
