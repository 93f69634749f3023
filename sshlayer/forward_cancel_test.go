package sshlayer

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

// mutedCancelServer is an x/crypto SSH server that grants tcpip-forward
// (port 4242 for port 0) and never answers cancel-tcpip-forward, while it
// keeps the connection: a host that stopped answering but whose TCP
// connection lives on. cancels receives each cancel it was sent; its
// connection is conn, from which the test opens forwarded-tcpip channels.
type mutedCancelServer struct {
	*countingServer
	cancels chan struct{}
	conn    chan *ssh.ServerConn
}

func newMutedCancelServer(t *testing.T) *mutedCancelServer {
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
	s := &mutedCancelServer{
		countingServer: &countingServer{ln: ln, hostKey: host.Signer, userKey: user},
		cancels:        make(chan struct{}, 8),
		conn:           make(chan *ssh.ServerConn, 1),
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		sc, chans, reqs, err := ssh.NewServerConn(conn, s.config())
		if err != nil {
			return
		}
		defer sc.Close()
		s.conn <- sc
		go func() {
			for nc := range chans {
				_ = nc.Reject(ssh.Prohibited, "muted server opens nothing")
			}
		}()
		for req := range reqs {
			switch req.Type {
			case "tcpip-forward":
				_ = req.Reply(true, ssh.Marshal(struct{ Port uint32 }{4242}))
			case "cancel-tcpip-forward":
				s.cancels <- struct{}{} // and no reply, ever
			default:
				_ = req.Reply(false, nil)
			}
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); s.wg.Wait() })
	return s
}

// TestListenerCloseBoundedOnSilentHost: closing a remote forward's
// listener on a host that never answers cancel-tcpip-forward returns,
// and the forward is gone on this side: a connection the host forwards
// for it afterwards is refused. Close waited for the answer
// with no bound, so a Forwarding's Close (and its ctx's end) waited as
// long as the connection lived.
func TestListenerCloseBoundedOnSilentHost(t *testing.T) {
	defer func(d time.Duration) { cancelForwardWait = d }(cancelForwardWait)
	cancelForwardWait = 100 * time.Millisecond
	s := newMutedCancelServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := ConnectConfig(ctx, s.dial(t), s.auth(), &ClientConfig{KeepaliveInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc := <-s.conn
	ln, err := c.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- ln.Close() }()
	select {
	case err := <-closed:
		if err == nil {
			t.Error("Close on a host that never answered the cancel: nil error")
		} else {
			t.Logf("Close: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Close still waits for a host that never answers cancel-tcpip-forward")
	}
	<-s.cancels // the cancel was sent all the same

	// The host forwards a connection for it after all: refused here.
	payload := ssh.Marshal(&struct {
		Addr       string
		Port       uint32
		OriginAddr string
		OriginPort uint32
	}{"127.0.0.1", 4242, "127.0.0.1", 5555})
	ch, _, err := sc.OpenChannel("forwarded-tcpip", payload)
	if err == nil {
		_ = ch.Close()
		t.Fatal("a forwarded channel for the closed listener was accepted")
	}
	if oce := (*ssh.OpenChannelError)(nil); !errors.As(err, &oce) || oce.Reason != ssh.Prohibited {
		t.Errorf("forwarded channel after Close: %v, want refused (administratively prohibited)", err)
	}
	if err := ln.Close(); err == nil {
		t.Error("second Close: nil, want the first's error")
	}
}

// TestListenerAcceptEndsAtCloseOnSilentHost: an Accept waiting on a
// remote forward's listener returns net.ErrClosed as soon as the
// listener is closed, on a host that answers nothing more. Accept asked
// the host whether the connection still lived before it answered (a
// keepalive, which waits behind the unanswered cancel), and so returned
// only after that probe's 10 s bound.
func TestListenerAcceptEndsAtCloseOnSilentHost(t *testing.T) {
	defer func(d time.Duration) { cancelForwardWait = d }(cancelForwardWait)
	cancelForwardWait = 100 * time.Millisecond
	s := newMutedCancelServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := ConnectConfig(ctx, s.dial(t), s.auth(), &ClientConfig{KeepaliveInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	<-s.conn
	ln, err := c.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err == nil {
			_ = conn.Close()
		}
		accepted <- err
	}()
	_ = ln.Close() // the host's silence is TestListenerCloseBoundedOnSilentHost's
	select {
	case err := <-accepted:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
		}
	case <-ctx.Done():
		t.Fatal("Accept still waits after its listener was closed")
	}
}
