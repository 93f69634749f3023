package ssh

import (
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"net"
	"testing"
)

// TestHostgateWindowCeiling: a server whose WindowCeiling names a limit
// for a client grants that client's channels no more than it, however
// fast the program reads, and asks with the client's metadata (the
// version tells OpenSSH's ssh, which holds what the window lets it send in
// buffers of its own, from hostgate's client). Without it the same reads
// grow the window to 8 MiB.
func TestHostgateWindowCeiling(t *testing.T) {
	const ceiling = 256 << 10
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	hostKey, err := NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	asked := make(chan string, 1)
	srvCfg := &ServerConfig{
		NoClientAuth: true,
		WindowCeiling: func(m ConnMetadata) uint32 {
			asked <- string(m.ClientVersion())
			return ceiling
		},
	}
	srvCfg.AddHostKey(hostKey)
	// Loopback TCP, not net.Pipe: both ends write their version first,
	// which an unbuffered pipe deadlocks.
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

	type accepted struct {
		ch  *channel
		err error
	}
	got := make(chan accepted, 1)
	go func() {
		_, chans, reqs, err := NewServerConn(a, srvCfg)
		if err != nil {
			got <- accepted{err: err}
			return
		}
		go DiscardRequests(reqs)
		nc := <-chans
		ch, creqs, err := nc.Accept()
		if err != nil {
			got <- accepted{err: err}
			return
		}
		go DiscardRequests(creqs)
		got <- accepted{ch: ch.(*channel)}
	}()
	conn, chans, reqs, err := NewClientConn(b, "pipe", &ClientConfig{
		ClientVersion:   "SSH-2.0-OpenSSH_10.0",
		HostKeyCallback: InsecureIgnoreHostKey(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	go DiscardRequests(reqs)
	go func() {
		for nc := range chans {
			_ = nc.Reject(Prohibited, "")
		}
	}()
	cch, creqs, err := conn.OpenChannel("session", nil)
	if err != nil {
		t.Fatal(err)
	}
	go DiscardRequests(creqs)
	acc := <-got
	if acc.err != nil {
		t.Fatal(acc.err)
	}
	if v := <-asked; v != "SSH-2.0-OpenSSH_10.0" {
		t.Errorf("WindowCeiling was asked with client version %q", v)
	}
	// 16 MiB through, the server's program reading as fast as it comes:
	// without a ceiling that doubles the window up to 8 MiB.
	const total = 16 << 20
	go func() {
		buf := make([]byte, 64<<10)
		for sent := 0; sent < total; sent += len(buf) {
			if _, err := cch.Write(buf); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	if _, err := io.CopyN(io.Discard, acc.ch, total); err != nil {
		t.Fatal(err)
	}
	acc.ch.windowMu.Lock()
	limit := acc.ch.myLimit
	acc.ch.windowMu.Unlock()
	if limit > ceiling {
		t.Fatalf("the server granted a window of %d bytes, want at most the ceiling, %d", limit, ceiling)
	}
}
