//go:build unix

package sshlayer

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/internal/testenv"
)

// addrConn is a conn whose ends say what a gateway's caller preamble made
// them say: the remote end the caller's TCP address, the local end none.
type addrConn struct {
	net.Conn
	remote net.Addr
}

func (c addrConn) RemoteAddr() net.Addr { return c.remote }
func (c addrConn) LocalAddr() net.Addr  { return yamuxAddr{} }

type yamuxAddr struct{}

func (yamuxAddr) Network() string { return "yamux" }
func (yamuxAddr) String() string  { return "yamux:local" }

// TestServerCallerAddress: a connection whose RemoteAddr is a TCP address
// (the caller a gateway named, internal/proxyproto) gives commands that
// address in SSH_CONNECTION and SSH_CLIENT, the local end UNKNOWN as over
// any stream without one, and the session's log names it.
func TestServerCallerAddress(t *testing.T) {
	t.Parallel()
	hostKey, _, _ := newEd25519Signer()
	clientKey, _, _ := newEd25519Signer()
	var logs testenv.LogBuffer
	srv, err := NewServer(&ServerConfig{HostKey: hostKey, AuthorizedKeys: []ssh.PublicKey{clientKey.PublicKey()},
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Close() }()
	b, a := testenv.TCPPair(t)
	caller := &net.TCPAddr{IP: net.ParseIP("203.0.113.7"), Port: 4242}
	served := make(chan error, 1)
	go func() { served <- srv.ServeConn(context.Background(), addrConn{Conn: a, remote: caller}) }()
	cc, chans, reqs, err := ssh.NewClientConn(b, "host", &ssh.ClientConfig{
		User: "anyone", Auth: []ssh.AuthMethod{ssh.PublicKeys(clientKey)},
		HostKeyCallback: ssh.FixedHostKey(hostKey.PublicKey()),
	})
	if err != nil {
		t.Fatal(err)
	}
	c := ssh.NewClient(cc, chans, reqs)
	defer func() { _ = c.Close() }()
	out, _, err := srvRunCmd(t, c, `echo "$SSH_CONNECTION"; echo "$SSH_CLIENT"`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "203.0.113.7 4242 UNKNOWN 65535\n203.0.113.7 4242 65535\n"; out != want {
		t.Errorf("got %q, want %q", out, want)
	}
	_ = c.Close()
	<-served
	if l := logs.String(); !strings.Contains(l, `msg="ssh session"`) || !strings.Contains(l, "remote=203.0.113.7:4242") {
		t.Errorf("the session's log does not name the caller:\n%s", l)
	}
}

func TestConnectionEnv(t *testing.T) {
	tcp := &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 22}
	v6 := &net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 5000}
	pipe, _ := net.Pipe()
	defer pipe.Close()
	for _, tc := range []struct {
		remote, local net.Addr
		want          string
	}{
		{v6, tcp, "SSH_CONNECTION=2001:db8::1 5000 127.0.0.1 22 SSH_CLIENT=2001:db8::1 5000 22"},
		{pipe.RemoteAddr(), pipe.LocalAddr(), "SSH_CONNECTION=UNKNOWN 65535 UNKNOWN 65535 SSH_CLIENT=UNKNOWN 65535 65535"},
		{v6, pipe.LocalAddr(), "SSH_CONNECTION=2001:db8::1 5000 UNKNOWN 65535 SSH_CLIENT=2001:db8::1 5000 65535"},
	} {
		if got := strings.Join(connectionEnv(tc.remote, tc.local), " "); got != tc.want {
			t.Errorf("connectionEnv(%v, %v) = %q, want %q", tc.remote, tc.local, got, tc.want)
		}
	}
}
