package ssh

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net"
	"testing"
	"time"
)

// TestHostgateForwardCloseUnaccepted: a forward listener that is not
// being accepted from closes, while the server forwards it more
// connections than its queue holds, and every one of them is answered
// (refused). Upstream queued the second while holding the forward list's
// lock, waiting for an Accept, so Close (which takes that lock to remove
// the forward) waited for good, and so did the connection's end, and
// every forwarded connection after it on the connection.
func TestHostgateForwardCloseUnaccepted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	hostKey, err := NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	srvCfg := &ServerConfig{NoClientAuth: true}
	srvCfg.AddHostKey(hostKey)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	b, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	a, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()

	server := make(chan *ServerConn, 1)
	go func() {
		sc, chans, reqs, err := NewServerConn(a, srvCfg)
		if err != nil {
			close(server)
			return
		}
		go func() {
			for nc := range chans {
				_ = nc.Reject(Prohibited, "")
			}
		}()
		go func() {
			for r := range reqs {
				_ = r.Reply(true, Marshal(struct{ Port uint32 }{4242}))
			}
		}()
		server <- sc
	}()
	conn, chans, reqs, err := NewClientConn(b, "pipe", &ClientConfig{HostKeyCallback: InsecureIgnoreHostKey()})
	if err != nil {
		t.Fatal(err)
	}
	client := NewClient(conn, chans, reqs)
	defer client.Close()
	sc := <-server
	if sc == nil {
		t.Fatal("server handshake failed")
	}
	defer sc.Close()
	fl, err := client.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}

	// One queued, one waiting for room, one behind it in the mux.
	const forwarded = 3
	answered := make(chan error, forwarded)
	for i := range forwarded {
		go func() {
			ch, _, err := sc.OpenChannel("forwarded-tcpip", Marshal(&forwardedTCPPayload{"127.0.0.1", 4242, "127.0.0.1", uint32(5000 + i)}))
			if err == nil {
				_ = ch.Close()
			}
			answered <- err
		}()
	}
	// All three sent; the client has at least queued the first.
	if _, _, err := sc.SendRequest("keepalive@openssh.com", true, nil); err != nil {
		t.Fatal(err)
	}

	closed := make(chan error, 1)
	go func() { closed <- fl.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Close of a forward listener nobody accepts from waits for good")
	}
	for range forwarded {
		select {
		case err := <-answered:
			if oce := (*OpenChannelError)(nil); !errors.As(err, &oce) || oce.Reason != Prohibited {
				t.Errorf("a connection forwarded before Close: %v, want refused (administratively prohibited)", err)
			}
		case <-ctx.Done():
			t.Fatal("a connection forwarded before Close was never answered")
		}
	}
	if _, err := fl.Accept(); err == nil {
		t.Error("Accept after Close: a connection")
	}
}
