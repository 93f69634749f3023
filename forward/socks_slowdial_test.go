package forward

import (
	"context"
	"net"
	"testing"
	"time"
)

// slowDialer is a host whose dials take delay to connect.
type slowDialer struct {
	*loopForwarder
	delay time.Duration
}

func (s slowDialer) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.loopForwarder.Dial(ctx, network, addr)
}

// TestDynamicForwardDialOutlastsHandshake: a SOCKS CONNECT whose dial
// takes longer than HandshakeTimeout, but less than DialTimeout, is
// answered and carries its bytes. The handshake's deadline on the
// client's connection was still set when the dial returned, so the reply
// to a connect the host had made failed, and the client's connection was
// closed without one.
func TestDynamicForwardDialOutlastsHandshake(t *testing.T) {
	ctx := testCtx(t)
	const handshake = time.Second
	h := newHost(t, slowDialer{newLoopForwarder(), 3 * handshake})
	fw, err := RunConfig(ctx, h, Spec{Kind: Dynamic, Listen: "127.0.0.1:0"}, &Config{HandshakeTimeout: handshake, DialTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	c := dialT(t, fw.Addr().String())
	if rep := socksConnect(t, c, socksIP("127.0.0.1"), echoPort(t, echoServer(t))); rep != repSucceeded {
		t.Fatalf("reply %d, want %d (succeeded)", rep, repSucceeded)
	}
	if got := roundTrip(t, c, []byte("hello socks")); string(got) != "hello socks" {
		t.Fatalf("echo %q", got)
	}
}
