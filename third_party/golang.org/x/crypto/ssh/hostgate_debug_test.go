package ssh

import (
	"crypto/ed25519"
	"crypto/rand"
	"net"
	"slices"
	"sync"
	"testing"
)

// TestHostgateDebugCallback: a client's DebugCallback is given each
// SSH_MSG_DEBUG the server sends, and one sent before a global request's
// reply has been given when the request returns (OpenSSH's sshd sends
// "Forwarding listen address ... overridden by server GatewayPorts" before
// its tcpip-forward reply). Upstream drops them unread.
func TestHostgateDebugCallback(t *testing.T) {
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
	// Loopback TCP, not net.Pipe: both ends write their version first.
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

	served := make(chan error, 1)
	go func() {
		sc, chans, reqs, err := NewServerConn(a, srvCfg)
		if err != nil {
			served <- err
			return
		}
		go func() {
			for nc := range chans {
				_ = nc.Reject(Prohibited, "")
			}
		}()
		tr := sc.Conn.(*connection).transport
		for r := range reqs {
			for _, m := range []string{"first", r.Type} {
				if err := tr.writePacket(Marshal(&debugMsg{AlwaysDisplay: false, Message: m})); err != nil {
					served <- err
					return
				}
			}
			_ = r.Reply(true, nil)
		}
		served <- nil
	}()
	var mu sync.Mutex
	var heard []string
	conn, chans, reqs, err := NewClientConn(b, "pipe", &ClientConfig{
		HostKeyCallback: InsecureIgnoreHostKey(),
		DebugCallback: func(m string) {
			mu.Lock()
			heard = append(heard, m)
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	go DiscardRequests(reqs)
	go func() {
		for nc := range chans {
			_ = nc.Reject(Prohibited, "")
		}
	}()
	for _, req := range []string{"one", "two"} {
		if ok, _, err := conn.SendRequest(req, true, nil); err != nil || !ok {
			t.Fatalf("request %s: %v %v", req, ok, err)
		}
		mu.Lock()
		got := slices.Clone(heard)
		mu.Unlock()
		if !slices.Equal(got[max(0, len(got)-2):], []string{"first", req}) {
			t.Errorf("after request %s returned, the callback had heard %q", req, got)
		}
	}
	_ = conn.Close()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}
