//go:build unix

package sshlayer

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

// chanServer is an x/crypto SSH server whose direct-tcpip channels are
// handled by the test itself, to see what the client sends on them.
type chanServer struct {
	*countingServer
	chans chan ssh.NewChannel
}

func newChanServer(t *testing.T) *chanServer { return newChanServerVersion(t, "") }

// newChanServerVersion is newChanServer announcing version (x/crypto's
// default when empty); serverVersion makes the client dial it early.
func newChanServerVersion(t *testing.T, version string) *chanServer {
	return newChanServerOpts(t, chanServerOpts{version: version})
}

// chanServerOpts shape a chanServer: its version, its EarlyConfirmHold,
// and a counter of the writes on its side of the connection (x/crypto
// writes each packet with one Write).
type chanServerOpts struct {
	version string
	hold    time.Duration
	writes  *atomic.Int64
}

func newChanServerOpts(t *testing.T, o chanServerOpts) *chanServer {
	t.Helper()
	host, err := GenerateSessionKey()
	if err != nil {
		t.Fatal(err)
	}
	user, err := GenerateSessionKey()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &chanServer{countingServer: &countingServer{ln: ln, hostKey: host.Signer, userKey: user}, chans: make(chan ssh.NewChannel, 1)}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		if o.writes != nil {
			conn = &writeCounter{Conn: conn, n: o.writes}
		}
		cfg := s.config()
		cfg.ServerVersion = o.version
		cfg.EarlyConfirmHold = o.hold
		sc, chans, reqs, err := ssh.NewServerConn(conn, cfg)
		if err != nil {
			return
		}
		defer sc.Close()
		go ssh.DiscardRequests(reqs)
		for nc := range chans {
			s.chans <- nc
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); s.wg.Wait() })
	return s
}

// writeCounter counts its conn's writes.
type writeCounter struct {
	net.Conn
	n *atomic.Int64
}

func (w *writeCounter) Write(p []byte) (int, error) {
	w.n.Add(1)
	return w.Conn.Write(p)
}

// open connects a client to s and returns the client and server sides of
// one direct-tcpip channel it opened.
func (s *chanServer) open(t *testing.T) (net.Conn, ssh.Channel, <-chan *ssh.Request) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Connect(ctx, s.dial(t), s.auth())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	type opened struct {
		ch   ssh.Channel
		reqs <-chan *ssh.Request
	}
	got := make(chan opened, 1)
	go func() {
		nc := <-s.chans
		ch, reqs, err := nc.Accept()
		if err != nil {
			t.Error(err)
		}
		got <- opened{ch, reqs}
	}()
	conn, err := c.Dial(ctx, "tcp", "127.0.0.1:9")
	if err != nil {
		t.Fatal(err)
	}
	o := <-got
	if o.ch == nil {
		t.FailNow()
	}
	return conn, o.ch, o.reqs
}

// closedWithin reports whether the channel was closed by the client within
// d: x/crypto closes a channel's request stream when CLOSE arrives.
func closedWithin(reqs <-chan *ssh.Request, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case _, ok := <-reqs:
			if !ok {
				return true
			}
		case <-t.C:
			return false
		}
	}
}

// TestDialCloseWriteAfterEOFClosesChannel: the host answered and ended its
// side; the client's CloseWrite then ends the whole channel (CLOSE), and
// everything sent either way arrived.
func TestDialCloseWriteAfterEOFClosesChannel(t *testing.T) {
	s := newChanServer(t)
	conn, ch, reqs := s.open(t)
	defer conn.Close()
	if _, err := ch.Write([]byte("answer")); err != nil {
		t.Fatal(err)
	}
	if err := ch.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte("request")); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(conn)
	if err != nil || string(got) != "answer" {
		t.Fatalf("client read %q, %v", got, err)
	}
	if err := conn.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	req, err := io.ReadAll(ch)
	if err != nil || string(req) != "request" {
		t.Fatalf("server read %q, %v", req, err)
	}
	if !closedWithin(reqs, 30*time.Second) {
		t.Fatal("channel still open on the server after the client's CloseWrite following EOF")
	}
}

// TestDialCloseWriteBeforeEOFHalfCloses: a CloseWrite while the host still
// sends is a half-close: the host sees EOF and can still answer.
func TestDialCloseWriteBeforeEOFHalfCloses(t *testing.T) {
	s := newChanServer(t)
	conn, ch, reqs := s.open(t)
	defer conn.Close()
	if _, err := conn.Write([]byte("request")); err != nil {
		t.Fatal(err)
	}
	if err := conn.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	req, err := io.ReadAll(ch)
	if err != nil || string(req) != "request" {
		t.Fatalf("server read %q, %v", req, err)
	}
	if _, err := ch.Write([]byte("answer after EOF")); err != nil {
		t.Fatalf("host cannot answer after the client's half-close: %v", err)
	}
	_ = ch.CloseWrite()
	got, err := io.ReadAll(conn)
	if err != nil || string(got) != "answer after EOF" {
		t.Fatalf("client read %q, %v", got, err)
	}
	_ = conn.Close()
	if !closedWithin(reqs, 30*time.Second) {
		t.Fatal("channel not closed after the client's Close")
	}
}

// TestDialDataBeforeCloseArrives: the target answers and half-closes first;
// the client then sends a large request and CloseWrite, which (the host's
// side having ended) sends CLOSE without EOF. Every byte sent before it
// still reaches the target, through our server and through OpenSSH's.
func TestDialDataBeforeCloseArrives(t *testing.T) {
	peers := map[string]func(t *testing.T) *Client{
		"ours": func(t *testing.T) *Client {
			ts, err := StartTestServer()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = ts.Close() })
			conn, err := net.Dial("tcp", ts.Addr)
			if err != nil {
				t.Fatal(err)
			}
			c, err := Connect(testCtx(t), conn, Auth{Signer: ts.ClientSigner, HostKey: ts.HostKey})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			return c
		},
		"sshd": func(t *testing.T) *Client { return startSSHD(t, sshdOptions{}).connect(t, nil) },
	}
	for name, connect := range peers {
		t.Run(name, func(t *testing.T) {
			c := connect(t)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			got := make(chan []byte, 1)
			go func() {
				s, err := ln.Accept()
				if err != nil {
					got <- nil
					return
				}
				defer s.Close()
				_, _ = s.Write([]byte("answer"))
				_ = s.(*net.TCPConn).CloseWrite()
				_ = s.SetReadDeadline(time.Now().Add(60 * time.Second))
				b, _ := io.ReadAll(s)
				got <- b
			}()
			conn, err := c.Dial(testCtx(t), "tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ans, err := io.ReadAll(conn)
			if err != nil || string(ans) != "answer" {
				t.Fatalf("client read %q, %v", ans, err)
			}
			req := bytes.Repeat([]byte("request "), 1<<17) // 1 MiB, beyond one channel window
			if _, err := conn.Write(req); err != nil {
				t.Fatal(err)
			}
			if err := conn.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
				t.Fatal(err)
			}
			if b := <-got; !bytes.Equal(b, req) {
				t.Fatalf("target got %d bytes, want the %d sent before CLOSE", len(b), len(req))
			}
		})
	}
}
