//go:build unix

package sshlayer

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/internal/testenv"
)

// admitServer serves ServeConnAdmitted on a loopback listener with admit,
// for a server that trusts ca and also holds a plain authorized key
// (returned), until the test ends.
func admitServer(t *testing.T, ca ssh.Signer, logs *testenv.LogBuffer, admit func(*ssh.Certificate) error) (addr string, hostKey ssh.PublicKey, plain ssh.Signer) {
	t.Helper()
	hk, _, _ := newEd25519Signer()
	plain, _, _ = newEd25519Signer()
	srv, err := NewServer(&ServerConfig{HostKey: hk, TrustedUserCAs: []ssh.PublicKey{ca.PublicKey()}, AuthorizedKeys: []ssh.PublicKey{plain.PublicKey()},
		Principal: "host-1", Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { _ = srv.ServeConnAdmitted(context.Background(), c, admit) })
		}
	})
	t.Cleanup(func() { _ = ln.Close(); _ = srv.Close(); wg.Wait() })
	return ln.Addr().String(), hk.PublicKey(), plain
}

// TestServeConnAdmitted: a certificate's connection goes on only when
// admit says so, and admit hears of it once its client signed; a refusal
// is the client's failed authentication and the server's log line with
// admit's reason; a plain authorized key, which the same server takes
// through ServeConn, is refused there without admit being asked.
func TestServeConnAdmitted(t *testing.T) {
	t.Parallel()
	ca, _, _ := newEd25519Signer()
	var logs testenv.LogBuffer
	var asked atomic.Int32
	var refuse atomic.Bool
	addr, hk, plain := admitServer(t, ca, &logs, func(cert *ssh.Certificate) error {
		asked.Add(1)
		if cert.KeyId != "test-token" {
			t.Errorf("admit asked about certificate %q", cert.KeyId)
		}
		if refuse.Load() {
			return errors.New("token revoked at the gateway")
		}
		return nil
	})
	key, _, _ := newEd25519Signer()
	cs, err := ssh.NewCertSigner(srvSignCert(t, ca, key.PublicKey(), nil), key)
	if err != nil {
		t.Fatal(err)
	}

	c, err := srvDialWith(addr, hk, ssh.PublicKeys(cs))
	if err != nil {
		t.Fatalf("admitted certificate refused: %v", err)
	}
	if out, _, err := srvRunCmd(t, c, "echo ok", nil); err != nil || out != "ok\n" {
		t.Errorf("exec on an admitted connection: %q %v", out, err)
	}
	_ = c.Close()
	if n := asked.Load(); n != 1 {
		t.Errorf("admit asked %d times for one connection, want 1", n)
	}

	refuse.Store(true)
	if c, err := srvDialWith(addr, hk, ssh.PublicKeys(cs)); err == nil {
		_ = c.Close()
		t.Fatal("a refused certificate authenticated")
	} else if !strings.Contains(err.Error(), "unable to authenticate") {
		t.Errorf("refused: %v, want an authentication failure", err)
	}
	if l := logs.String(); !strings.Contains(l, "token revoked at the gateway") {
		t.Errorf("the refusal's reason is not logged:\n%s", l)
	}

	asked.Store(0)
	if c, err := srvDialWith(addr, hk, ssh.PublicKeys(plain)); err == nil {
		_ = c.Close()
		t.Fatal("a plain authorized key authenticated on an admitted listener")
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("admit asked %d times about a plain key", n)
	}
	if l := logs.String(); !strings.Contains(l, "takes only certificates") {
		t.Errorf("the plain key's refusal is not logged as such:\n%s", l)
	}
}

// wrongSigner offers a certificate it cannot sign for: its signatures are
// another key's.
type wrongSigner struct {
	ssh.Signer
	cert *ssh.Certificate
}

func (w wrongSigner) PublicKey() ssh.PublicKey { return w.cert }

// TestServeConnAdmittedNotForOffers: a client that holds a certificate but
// not its key (a certificate is no secret) gets its offer answered, as
// x/crypto answers offers, but admit is never asked: the agent would
// otherwise have the gateway admit a session nobody can run.
func TestServeConnAdmittedNotForOffers(t *testing.T) {
	t.Parallel()
	ca, _, _ := newEd25519Signer()
	var logs testenv.LogBuffer
	var asked atomic.Int32
	addr, hk, _ := admitServer(t, ca, &logs, func(*ssh.Certificate) error { asked.Add(1); return nil })
	key, _, _ := newEd25519Signer()
	other, _, _ := newEd25519Signer()
	cert := srvSignCert(t, ca, key.PublicKey(), nil)
	if c, err := srvDialWith(addr, hk, ssh.PublicKeys(wrongSigner{Signer: other, cert: cert})); err == nil {
		_ = c.Close()
		t.Fatal("a certificate signed for by another key authenticated")
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("admit asked %d times about a certificate whose key never signed", n)
	}
}
