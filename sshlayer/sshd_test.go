package sshlayer

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/internal/sshdtest"
)

// OpenSSH sshd as the interop peer: internal/sshdtest runs it (one
// `sshd -i` per connection); this wraps it with the client's own helpers.

type sshdOptions = sshdtest.Options

type sshdServer struct {
	*sshdtest.Server
	hostKey string // fingerprint of the host key
	hostPub ssh.PublicKey
	user    *SessionKey
	dir     string
}

func startSSHD(t testing.TB, opts sshdOptions) *sshdServer {
	t.Helper()
	srv := sshdtest.Start(t, opts)
	signer, err := ssh.ParsePrivateKey(srv.UserKey)
	if err != nil {
		t.Fatal(err)
	}
	return &sshdServer{
		Server: srv, hostKey: srv.HostKey, hostPub: srv.HostPub, dir: srv.Dir,
		user: &SessionKey{PrivateKey: srv.UserKey, PublicKey: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(srv.UserPub))), Signer: signer},
	}
}

func writeTestFile(t testing.TB, name string, data []byte) { sshdtest.WriteFile(t, name, data) }

func (s *sshdServer) waitIdle(ctx context.Context) error { return s.WaitIdle(ctx) }

func (s *sshdServer) log() string { return s.Log() }

func (s *sshdServer) addr() string { return s.Addr() }

func (s *sshdServer) auth() Auth {
	return Auth{User: "root", PrivateKey: s.user.PrivateKey, HostKey: s.hostKey}
}

func (s *sshdServer) dial(t testing.TB) net.Conn {
	t.Helper()
	return s.Dial(t)
}

// connect returns a client to sshd, closed at cleanup.
func (s *sshdServer) connect(t testing.TB, cfg *ClientConfig) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := ConnectConfig(ctx, s.dial(t), s.auth(), cfg)
	if err != nil {
		t.Fatalf("connect to sshd: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// testCtx is a per-test context with a generous deadline.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}
