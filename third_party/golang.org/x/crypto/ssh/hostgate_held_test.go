package ssh

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// writeCounter counts a conn's Writes: each is one message across every
// process of a path behind it.
type writeCounter struct {
	net.Conn
	n atomic.Int64
}

func (c *writeCounter) Write(p []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(p)
}

// heldPair is a client and a server over loopback TCP, each conn's writes
// counted, with holdDelay set to hold for the test (restored after
// both ends are closed). The server accepts every channel and hands it to
// the test, and answers every global request.
type heldPair struct {
	cli        *Client
	cliW, srvW *writeCounter
	accepted   chan acceptedChannel
}

type acceptedChannel struct {
	ch   Channel
	reqs <-chan *Request
}

func newHeldPair(t *testing.T, hold time.Duration) *heldPair {
	t.Helper()
	old := holdDelay
	holdDelay = hold
	t.Cleanup(func() { holdDelay = old })
	a, b := testConnPair(t)
	p := &heldPair{srvW: &writeCounter{Conn: a}, cliW: &writeCounter{Conn: b}, accepted: make(chan acceptedChannel, 4)}
	srvCfg := earlyServerConfig(t)
	served := make(chan struct{})
	go func() {
		defer close(served)
		sc, chans, reqs, err := NewServerConn(p.srvW, srvCfg)
		if err != nil {
			return
		}
		go func() {
			for r := range reqs {
				_ = r.Reply(true, nil)
			}
		}()
		go func() {
			for nc := range chans {
				ch, reqs, err := nc.Accept()
				if err == nil {
					p.accepted <- acceptedChannel{ch, reqs}
				}
			}
		}()
		_ = sc.Wait()
	}()
	c, chans, reqs, err := NewClientConn(p.cliW, "pipe", &ClientConfig{User: "u", HostKeyCallback: InsecureIgnoreHostKey()})
	if err != nil {
		t.Fatal(err)
	}
	p.cli = NewClient(c, chans, reqs)
	t.Cleanup(func() {
		_ = p.cli.Close()
		_ = b.Close()
		<-served
	})
	return p
}

// open opens a channel of chanType and returns both its ends.
func (p *heldPair) open(t *testing.T, chanType string) (Channel, <-chan *Request, acceptedChannel) {
	t.Helper()
	ch, reqs, err := p.cli.OpenChannel(chanType, Marshal(&channelOpenDirectMsg{raddr: "127.0.0.1", rport: 9, laddr: "0.0.0.0"}))
	if err != nil {
		t.Fatal(err)
	}
	return ch, reqs, p.take(t)
}

func (p *heldPair) take(t *testing.T) acceptedChannel {
	t.Helper()
	select {
	case a := <-p.accepted:
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("no channel open reached the server")
		return acceptedChannel{}
	}
}

// sync sends a global request; the server's answer is a write of its own,
// which takes anything held along.
func (p *heldPair) sync(t *testing.T) {
	t.Helper()
	if _, _, err := p.cli.SendRequest("sync@hostgate.test", true, nil); err != nil {
		t.Fatal(err)
	}
}

// ended waits for a channel's requests to end, which they do when its
// CLOSE has been handled.
func ended(t *testing.T, reqs <-chan *Request, what string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-reqs:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatalf("%s: the channel's CLOSE never came", what)
		}
	}
}

// isOpen reports whether reqs is still open, without waiting.
func isOpen(reqs <-chan *Request) bool {
	select {
	case _, ok := <-reqs:
		return ok
	default:
		return true
	}
}

// TestHostgateCloseReplyHeld: the answer to a forwarded connection's CLOSE
// goes out with the connection's next packet, not in a write of its own;
// a session's goes at once (a client's Wait returns on it).
func TestHostgateCloseReplyHeld(t *testing.T) {
	for _, tc := range []struct {
		chanType string
		held     bool
	}{
		{"direct-tcpip", true},
		{"forwarded-tcpip", true},
		{"session", false},
	} {
		t.Run(tc.chanType, func(t *testing.T) {
			p := newHeldPair(t, time.Hour)
			ch, reqs, srv := p.open(t, tc.chanType)
			p.sync(t) // the open's answer is out
			before := p.srvW.n.Load()
			if err := ch.Close(); err != nil {
				t.Fatal(err)
			}
			ended(t, srv.reqs, "server") // the server has answered the CLOSE
			if !tc.held {
				if got := p.srvW.n.Load() - before; got != 1 {
					t.Fatalf("server wrote %d times for its answer to a %s's CLOSE; want 1, at once", got, tc.chanType)
				}
				ended(t, reqs, "client")
				return
			}
			if got := p.srvW.n.Load() - before; got != 0 {
				t.Fatalf("server wrote %d times for its answer to a %s's CLOSE; want it held", got, tc.chanType)
			}
			if !isOpen(reqs) {
				t.Fatal("the client's channel ended before the held CLOSE was sent")
			}
			p.sync(t)
			if got := p.srvW.n.Load() - before; got != 1 {
				t.Fatalf("server wrote %d times for the sync's answer and the held CLOSE; want 1", got)
			}
			ended(t, reqs, "client")
		})
	}
}

// TestHostgateCloseAfterEOFsHeld: a forwarded connection's CLOSE sent
// after both sides' EOFs is held; one sent before them (it ends the
// stream) goes at once.
func TestHostgateCloseAfterEOFsHeld(t *testing.T) {
	for _, eofs := range []bool{true, false} {
		name := "after EOFs"
		if !eofs {
			name = "before EOFs"
		}
		t.Run(name, func(t *testing.T) {
			p := newHeldPair(t, time.Hour)
			ch, reqs, srv := p.open(t, "direct-tcpip")
			if eofs {
				if err := ch.CloseWrite(); err != nil {
					t.Fatal(err)
				}
				if err := srv.ch.CloseWrite(); err != nil {
					t.Fatal(err)
				}
				if b, err := io.ReadAll(srv.ch); err != nil || len(b) > 0 {
					t.Fatalf("server read %q, %v; want the client's EOF", b, err)
				}
				if b, err := io.ReadAll(ch); err != nil || len(b) > 0 {
					t.Fatalf("client read %q, %v; want the server's EOF", b, err)
				}
			}
			p.sync(t)
			before := p.srvW.n.Load()
			if err := srv.ch.Close(); err != nil {
				t.Fatal(err)
			}
			want := int64(1)
			if eofs {
				want = 0
			}
			if got := p.srvW.n.Load() - before; got != want {
				t.Fatalf("server wrote %d times for its CLOSE %s; want %d", got, name, want)
			}
			if eofs {
				p.sync(t)
			}
			ended(t, reqs, "client")
		})
	}
}

// TestHostgateCloseHeldEnds: with no packet to go with, a held CLOSE goes
// once holdDelay has passed.
func TestHostgateCloseHeldEnds(t *testing.T) {
	p := newHeldPair(t, time.Millisecond)
	ch, reqs, srv := p.open(t, "direct-tcpip")
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	ended(t, srv.reqs, "server")
	ended(t, reqs, "client")
}

// TestHostgateEarlyOpenHeld: an early open goes out in one write with the
// early data that follows it; a Read, Close or CloseWrite that comes
// instead sends it at once.
func TestHostgateEarlyOpenHeld(t *testing.T) {
	t.Run("write", func(t *testing.T) {
		p := newHeldPair(t, time.Hour)
		before := p.cliW.n.Load()
		conn, err := p.cli.DialEarly("tcp", "127.0.0.1:9")
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if got := p.cliW.n.Load() - before; got != 0 {
			t.Fatalf("client wrote %d times for an early open; want it held for the data", got)
		}
		if _, err := conn.Write([]byte("GET /")); err != nil {
			t.Fatal(err)
		}
		if got := p.cliW.n.Load() - before; got != 1 {
			t.Fatalf("client wrote %d times for an early open and its data; want 1", got)
		}
		srv := p.take(t)
		got := make([]byte, 5)
		if _, err := io.ReadFull(srv.ch, got); err != nil || string(got) != "GET /" {
			t.Fatalf("server read %q, %v", got, err)
		}
	})
	for _, tc := range []struct {
		name string
		do   func(net.Conn) error
	}{
		{"read", func(c net.Conn) error {
			_, err := c.Read(make([]byte, 1))
			return err
		}},
		{"close", func(c net.Conn) error { return c.Close() }},
		{"closewrite", func(c net.Conn) error { return c.(interface{ CloseWrite() error }).CloseWrite() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newHeldPair(t, time.Hour)
			conn, err := p.cli.DialEarly("tcp", "127.0.0.1:9")
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			done := make(chan error, 1)
			go func() { done <- tc.do(conn) }()
			srv := p.take(t) // the open came, with no timer to send it
			if tc.name == "read" {
				if _, err := srv.ch.Write([]byte("x")); err != nil {
					t.Fatal(err)
				}
			}
			if err := <-done; err != nil && !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
		})
	}
}
