//go:build unix

package sshlayer

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/accept"
	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

// The helpers of the tests that drive the server with x/crypto's own client,
// shared by those that run on every Unix and the Linux-only ones
// (server_test.go and others).

const srvTestWait = 30 * time.Second // generous: CI runs everything in parallel under -race

func srvStartServer(t testing.TB, cfg *ServerConfig) *TestServer {
	t.Helper()
	ts, err := StartTestServerConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ts.Close(); err != nil {
			t.Errorf("close test server: %v", err)
		}
	})
	return ts
}

func srvDialServer(t testing.TB, ts *TestServer) *ssh.Client {
	t.Helper()
	c, err := srvDialWith(ts.Addr, ts.HostPublicKey, ssh.PublicKeys(ts.ClientSigner))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func srvDialWith(addr string, hostKey ssh.PublicKey, auth ssh.AuthMethod) (*ssh.Client, error) {
	return ssh.Dial("tcp", addr, &ssh.ClientConfig{
		User:            "anyone",
		Auth:            []ssh.AuthMethod{auth},
		HostKeyCallback: ssh.FixedHostKey(hostKey),
		Timeout:         srvTestWait,
	})
}

// srvRunCmd runs cmd in a new session and returns stdout, stderr and the
// session's Wait error.
func srvRunCmd(t testing.TB, c *ssh.Client, cmd string, stdin io.Reader) (string, string, error) {
	t.Helper()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	var out, errb bytes.Buffer
	s.Stdout, s.Stderr, s.Stdin = &out, &errb, stdin
	err = s.Run(cmd)
	return out.String(), errb.String(), err
}

// srvStartEcho runs a loopback TCP echo server until the test ends.
func srvStartEcho(t testing.TB) string {
	t.Helper()
	return srvStartEchoOn(t, "127.0.0.1:0")
}

// srvStartEchoOn is srvStartEcho listening on addr.
func srvStartEchoOn(t testing.TB, addr string) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}()
		for {
			// Waits out EMFILE: TestRemoteForwardOutlivesEMFILE's limit is
			// the whole process's.
			c, err := accept.Next(context.Background(), ln, nil)
			if err != nil {
				return
			}
			conns = append(conns, c)
			go func() { _, _ = io.Copy(c, c); _ = c.(*net.TCPConn).CloseWrite() }()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-done })
	return ln.Addr().String()
}

// srvEchoCheck writes size random bytes through c, an echoing stream, in
// writes of random size, half-closes it, reads the echo in reads of random
// size, and reports whether the bytes came back unchanged.
func srvEchoCheck(c net.Conn, size int) error {
	cw, ok := c.(interface{ CloseWrite() error })
	if !ok {
		return fmt.Errorf("%T cannot half-close", c)
	}
	data := make([]byte, size)
	_, _ = rand.Read(data)
	werr := make(chan error, 1)
	go func() {
		_, err := io.Copy(c, &srvRandomChunks{b: data})
		if err == nil {
			err = cw.CloseWrite()
		}
		werr <- err
	}()
	got := make([]byte, 0, size)
	buf := make([]byte, 80<<10)
	for {
		n, _ := rand.Int(rand.Reader, big.NewInt(int64(len(buf))))
		k, err := c.Read(buf[:n.Int64()+1])
		got = append(got, buf[:k]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	if err := <-werr; err != nil {
		return err
	}
	if !bytes.Equal(got, data) {
		i := 0
		for i < min(len(got), len(data)) && got[i] == data[i] {
			i++
		}
		return fmt.Errorf("echo returned %d bytes, want the %d sent unchanged; first difference at byte %d", len(got), len(data), i)
	}
	return nil
}

// srvRandomChunks is an io.Reader that returns data in chunks of random size,
// as x/crypto's copyNRandomly does, to shake out framing bugs.
type srvRandomChunks struct{ b []byte }

func (r *srvRandomChunks) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n, _ := rand.Int(rand.Reader, big.NewInt(int64(min(len(p), len(r.b), 64<<10))))
	k := int(n.Int64()) + 1
	copy(p, r.b[:k])
	r.b = r.b[k:]
	return k, nil
}

// srvStartTweakedConfig is srvStartTweaked for a server configured by cfg,
// its keys replaced by generated ones.
func srvStartTweakedConfig(t *testing.T, cfg ServerConfig, tweak func(*Server)) (addr string, hostKey ssh.PublicKey, client ssh.Signer) {
	t.Helper()
	hk, _, _ := newEd25519Signer()
	ck, _, _ := newEd25519Signer()
	cfg.HostKey, cfg.AuthorizedKeys = hk, []ssh.PublicKey{ck.PublicKey()}
	srv, err := NewServer(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	tweak(srv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String(), hk.PublicKey(), ck
}

// srvSignCert certifies key as a user (or host) certificate signed by ca.
func srvSignCert(t testing.TB, ca ssh.Signer, key ssh.PublicKey, mod func(*ssh.Certificate)) *ssh.Certificate {
	t.Helper()
	now := time.Now()
	cert := &ssh.Certificate{
		Key:             key,
		KeyId:           "test-token",
		CertType:        ssh.UserCert,
		ValidPrincipals: []string{"host-1"},
		ValidAfter:      uint64(now.Add(-time.Minute).Unix()),
		ValidBefore:     uint64(now.Add(10 * time.Minute).Unix()),
		Permissions: ssh.Permissions{Extensions: map[string]string{
			"permit-pty": "", "permit-port-forwarding": "",
		}},
	}
	if mod != nil {
		mod(cert)
	}
	if err := cert.SignCert(rand.Reader, ca); err != nil {
		t.Fatal(err)
	}
	return cert
}

// readCounter counts the bytes a conn reads.
type readCounter struct {
	net.Conn
	n atomic.Int64
}

func (c *readCounter) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}
