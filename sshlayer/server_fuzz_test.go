//go:build unix

package sshlayer

import (
	"crypto/rand"
	"testing"

	"golang.org/x/crypto/ssh"
)

func FuzzParsePtyRequest(f *testing.F) {
	f.Add(ssh.Marshal(struct {
		Term                 string
		Cols, Rows, PxW, PxH uint32
		Modes                string
	}{"xterm-256color", 80, 24, 0, 0, "\x35\x00\x00\x00\x00\x00"}))
	f.Add([]byte{})
	f.Add([]byte("\x00\x00\x00\x05vt100\xff\xff\xff\xff\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parsePtyRequest(b)
		if err != nil {
			return
		}
		if p.Term == "" || len(p.Term) > maxTermLen || p.Cols == 0 || p.Rows == 0 {
			t.Fatalf("accepted %+v", p)
		}
		for _, c := range []byte(p.Term) {
			if c <= ' ' || c >= 0x7f || c == '=' {
				t.Fatalf("TERM %q holds %q", p.Term, c)
			}
		}
	})
}

func FuzzParseWindowChange(f *testing.F) {
	f.Add(ssh.Marshal(struct{ Cols, Rows, PxW, PxH uint32 }{132, 50, 0, 0}))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := parseWindowChange(b)
		if err == nil && (w.Cols == 0 || w.Rows == 0) {
			t.Fatalf("zero size accepted: %+v", w)
		}
	})
}

// FuzzAuthenticate feeds arbitrary public keys and certificates to the
// authenticator: nothing that was not issued by the trusted CA or listed
// may pass, and nothing may panic.
func FuzzAuthenticate(f *testing.F) {
	ca, _, _ := newEd25519Signer()
	user, _, _ := newEd25519Signer()
	cert := &ssh.Certificate{Key: user.PublicKey(), CertType: ssh.UserCert, ValidPrincipals: []string{"h"}, ValidBefore: ssh.CertTimeInfinity}
	if err := cert.SignCert(rand.Reader, ca); err != nil {
		f.Fatal(err)
	}
	f.Add(user.PublicKey().Marshal())
	f.Add(cert.Marshal())
	authorized, _, _ := newEd25519Signer()
	a := newAuthenticator(&ServerConfig{AuthorizedKeys: []ssh.PublicKey{authorized.PublicKey()}, TrustedUserCAs: []ssh.PublicKey{ca.PublicKey()}, Principal: "h"}, "root")
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := ssh.ParsePublicKey(b)
		if err != nil {
			return
		}
		perms, err := a.authenticate(nil, k)
		if err != nil {
			return
		}
		c, isCert := k.(*ssh.Certificate)
		switch {
		case !isCert && string(k.Marshal()) == string(authorized.PublicKey().Marshal()):
		case isCert && string(c.SignatureKey.Marshal()) == string(ca.PublicKey().Marshal()):
		default:
			t.Fatalf("accepted %s (%v)", k.Type(), perms)
		}
		// A certificate grants a PTY or forwarding only when it says so.
		for _, ext := range []string{extPermitPTY, extPermitPortForwarding} {
			_, granted := perms.Extensions[ext]
			if isCert {
				if _, inCert := c.Permissions.Extensions[ext]; granted && !inCert {
					t.Fatalf("%s granted to a certificate without it", ext)
				}
			} else if !granted {
				t.Fatalf("%s not granted to an authorized key", ext)
			}
		}
	})
}

func FuzzParseTTYModes(f *testing.F) {
	f.Add(ssh.Marshal(struct{ A, B byte }{53, 0})) // truncated
	f.Add([]byte{53, 0, 0, 0, 1, 1, 0, 0, 0, 3, 0})
	f.Add([]byte{200, 1, 2, 3, 4, 53, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		modes := parseTTYModes(b)
		if len(modes) > maxTTYModes || len(modes)*5 > len(b) {
			t.Fatalf("%d modes from %d bytes", len(modes), len(b))
		}
		for i, m := range modes {
			if m.Op == 0 || m.Op >= 160 || b[5*i] != m.Op {
				t.Fatalf("mode %d: %+v", i, m)
			}
		}
	})
}
