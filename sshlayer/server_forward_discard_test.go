//go:build linux

package sshlayer

import (
	"io"
	"net"
	"strconv"
	"testing"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
	"go.uber.org/goleak"
)

// openLazyDiscards opens a direct-tcpip channel to an echo server through
// c and makes the server start both of the goroutines ssh.DiscardLazily
// defers (x/crypto fork, change 13), which sshlayer's wait groups do not
// count: a channel request it answers false, and extended data it drops.
func openLazyDiscards(t *testing.T, c *ssh.Client, echo string) ssh.Channel {
	t.Helper()
	host, port, _ := net.SplitHostPort(echo)
	p, _ := strconv.Atoi(port)
	ch, reqs, err := c.OpenChannel("direct-tcpip", ssh.Marshal(&directTCPIPMsg{Host: host, Port: uint32(p), OrigHost: "127.0.0.1", OrigPort: 1}))
	if err != nil {
		t.Fatal(err)
	}
	go ssh.DiscardRequests(reqs)
	if ok, err := ch.SendRequest("hostgate-test@example.com", true, nil); ok || err != nil {
		t.Fatalf("a request on a forwarded connection: %v %v, want refused", ok, err)
	}
	if _, err := ch.Stderr().Write([]byte("dropped")); err != nil {
		t.Fatal(err)
	}
	// The echo shows the server read past the extended data.
	if _, err := ch.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(ch, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	return ch
}

// settled waits until the server serves c's connection: it answers a
// global request only once it started the connection's own goroutines.
func settled(t *testing.T, c *ssh.Client) {
	t.Helper()
	if _, _, err := c.SendRequest("hostgate-test@example.com", true, nil); err != nil {
		t.Fatal(err)
	}
}

// The goroutines DiscardLazily starts end with their channel, while the
// connection goes on: the mux closes the channel's request queue and
// extended stream when both sides have closed it, as upstream's `go
// DiscardRequests` and `go io.Copy(io.Discard, ch.Stderr())` did.
func TestForwardDiscardsEndWithChannel(t *testing.T) {
	ts := srvStartServer(t, nil)
	c := srvDialServer(t, ts)
	echo := srvStartEcho(t)
	settled(t, c)
	before := goleak.IgnoreCurrent()
	ch := openLazyDiscards(t, c, echo)
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, before)
}

// Nor do they outlive the server: the connection's end closes every
// channel before Close's wait on the connection is over (the mux closes
// each channel, then the channel list serve ranges over).
func TestForwardDiscardsEndWithServer(t *testing.T) {
	echo := srvStartEcho(t)
	before := goleak.IgnoreCurrent()
	ts := srvStartServer(t, nil)
	c := srvDialServer(t, ts)
	openLazyDiscards(t, c, echo)
	if err := ts.Close(); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	goleak.VerifyNone(t, before)
}
