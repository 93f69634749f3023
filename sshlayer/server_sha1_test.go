//go:build linux

package sshlayer

import (
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

// rsaSigner is a new 2048-bit RSA key that signs with algo only.
func rsaSigner(t *testing.T, algo string) ssh.Signer {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(k)
	if err != nil {
		t.Fatal(err)
	}
	as, err := ssh.NewSignerWithAlgorithms(s.(ssh.AlgorithmSigner), []string{algo})
	if err != nil {
		t.Fatal(err)
	}
	return as
}

// RSA signed with SHA-1 (ssh-rsa) is refused for logins and in a
// certificate's CA signature, as OpenSSH's sshd refuses it since 8.8
// (PubkeyAcceptedAlgorithms, CASignatureAlgorithms); the same RSA keys
// signing with SHA-2 log in.
func TestServerRefusesSHA1RSA(t *testing.T) {
	t.Parallel()
	sha1Key := rsaSigner(t, ssh.KeyAlgoRSA)
	sha2Key := rsaSigner(t, ssh.KeyAlgoRSASHA256)
	sha1CA := rsaSigner(t, ssh.KeyAlgoRSA)
	sha2CA := rsaSigner(t, ssh.KeyAlgoRSASHA512)
	hostKey, _, _ := newEd25519Signer()
	srv, err := NewServer(&ServerConfig{
		HostKey:        hostKey,
		AuthorizedKeys: []ssh.PublicKey{sha1Key.PublicKey(), sha2Key.PublicKey()},
		TrustedUserCAs: []ssh.PublicKey{sha1CA.PublicKey(), sha2CA.PublicKey()},
		Principal:      "host-1",
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-served; err != nil && !errors.Is(err, ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	certSigner := func(ca ssh.Signer) ssh.Signer {
		key, _, _ := newEd25519Signer()
		cs, err := ssh.NewCertSigner(srvSignCert(t, ca, key.PublicKey(), nil), key)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	for _, tc := range []struct {
		name   string
		signer ssh.Signer
		ok     bool
	}{
		{"rsa-sha2-256 key", sha2Key, true},
		{"ssh-rsa key", sha1Key, false},
		{"certificate signed rsa-sha2-512", certSigner(sha2CA), true},
		{"certificate signed ssh-rsa", certSigner(sha1CA), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := srvDialWith(ln.Addr().String(), hostKey.PublicKey(), ssh.PublicKeys(tc.signer))
			if tc.ok {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				_ = c.Close()
				return
			}
			if err == nil {
				_ = c.Close()
				t.Fatal("logged in, want refused as sshd refuses SHA-1 RSA signatures")
			}
			if !strings.Contains(err.Error(), "unable to authenticate") {
				t.Fatalf("err %v, want an authentication failure", err)
			}
		})
	}
}
