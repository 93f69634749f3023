//go:build linux

package sshlayer

import (
	"errors"
	"net"
	"os/user"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

func TestServerCertificates(t *testing.T) {
	t.Parallel()
	ca, _, _ := newEd25519Signer()
	otherCA, _, _ := newEd25519Signer()
	ts := srvStartServer(t, &ServerConfig{TrustedUserCAs: []ssh.PublicKey{ca.PublicKey()}, Principal: "host-1"})
	past := time.Now().Add(-time.Hour)
	for _, tc := range []struct {
		name string
		ca   ssh.Signer
		mod  func(*ssh.Certificate)
		ok   bool
	}{
		{name: "valid", ca: ca, ok: true},
		{name: "valid among principals", ca: ca, ok: true, mod: func(c *ssh.Certificate) { c.ValidPrincipals = []string{"x", "host-1"} }},
		{name: "wrong principal", ca: ca, mod: func(c *ssh.Certificate) { c.ValidPrincipals = []string{"host-2"} }},
		{name: "expired", ca: ca, mod: func(c *ssh.Certificate) {
			c.ValidAfter, c.ValidBefore = uint64(past.Add(-time.Hour).Unix()), uint64(past.Unix())
		}},
		{name: "not yet valid", ca: ca, mod: func(c *ssh.Certificate) {
			c.ValidAfter = uint64(time.Now().Add(time.Hour).Unix())
		}},
		{name: "untrusted CA", ca: otherCA},
		{name: "host certificate", ca: ca, mod: func(c *ssh.Certificate) { c.CertType = ssh.HostCert }},
		{name: "critical option force-command", ca: ca, mod: func(c *ssh.Certificate) {
			c.CriticalOptions = map[string]string{"force-command": "true"}
		}},
		{name: "unknown critical option", ca: ca, mod: func(c *ssh.Certificate) {
			c.CriticalOptions = map[string]string{"made-up@example.com": ""}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, _, _ := newEd25519Signer()
			cert := srvSignCert(t, tc.ca, key.PublicKey(), tc.mod)
			cs, err := ssh.NewCertSigner(cert, key)
			if err != nil {
				t.Fatal(err)
			}
			c, err := srvDialWith(ts.Addr, ts.HostPublicKey, ssh.PublicKeys(cs))
			if tc.ok {
				if err != nil {
					t.Fatalf("valid certificate refused: %v", err)
				}
				out, _, err := srvRunCmd(t, c, "echo ok", nil)
				if err != nil || out != "ok\n" {
					t.Errorf("exec with certificate: %q %v", out, err)
				}
				_ = c.Close()
				return
			}
			if err == nil {
				_ = c.Close()
				t.Fatal("certificate accepted, want refused")
			}
			if !strings.Contains(err.Error(), "unable to authenticate") {
				t.Fatalf("err %v, want an authentication failure", err)
			}
		})
	}
}

// TestServerCertificateOSUserPrincipal: without Principal, a certificate
// must name the server's OS user, as sshd requires by default.
func TestServerCertificateOSUserPrincipal(t *testing.T) {
	t.Parallel()
	u, err := user.Current()
	if err != nil {
		t.Skip("no OS user name:", err)
	}
	ca, _, _ := newEd25519Signer()
	ts := srvStartServer(t, &ServerConfig{TrustedUserCAs: []ssh.PublicKey{ca.PublicKey()}})
	for _, principal := range []string{u.Username, "someone-else"} {
		key, _, _ := newEd25519Signer()
		cert := srvSignCert(t, ca, key.PublicKey(), func(c *ssh.Certificate) { c.ValidPrincipals = []string{principal} })
		cs, _ := ssh.NewCertSigner(cert, key)
		c, err := srvDialWith(ts.Addr, ts.HostPublicKey, ssh.PublicKeys(cs))
		if ok := err == nil; ok != (principal == u.Username) {
			t.Errorf("principal %q: err %v", principal, err)
		}
		if c != nil {
			_ = c.Close()
		}
	}
}

// TestServerPlainKeyNotAcceptedAsCA: a certificate whose CA is only an
// authorized (plain) key is refused, and a plain key that is only a CA is
// refused too.
func TestServerKeyRolesAreSeparate(t *testing.T) {
	t.Parallel()
	ca, _, _ := newEd25519Signer()
	ts := srvStartServer(t, &ServerConfig{TrustedUserCAs: []ssh.PublicKey{ca.PublicKey()}, Principal: "host-1"})
	// The CA key itself, used as a plain key, is not an authorized key.
	if c, err := srvDialWith(ts.Addr, ts.HostPublicKey, ssh.PublicKeys(ca)); err == nil {
		_ = c.Close()
		t.Error("CA key accepted as a plain user key")
	}
	// A certificate signed by the (authorized) client key is refused.
	key, _, _ := newEd25519Signer()
	cert := srvSignCert(t, ts.ClientSigner, key.PublicKey(), nil)
	cs, _ := ssh.NewCertSigner(cert, key)
	if c, err := srvDialWith(ts.Addr, ts.HostPublicKey, ssh.PublicKeys(cs)); err == nil {
		_ = c.Close()
		t.Error("certificate signed by an authorized user key accepted")
	}
}

func TestNewServerValidates(t *testing.T) {
	t.Parallel()
	hk, _, _ := newEd25519Signer()
	for _, cfg := range []*ServerConfig{nil, {}, {HostKey: hk}} {
		if _, err := NewServer(cfg); err == nil {
			t.Errorf("NewServer(%+v) succeeded", cfg)
		}
	}
}

// TestServerCertificateExtensions: a certificate grants a PTY only with
// permit-pty, and direct-tcpip and tcpip-forward only with
// permit-port-forwarding, as sshd enforces them; exec works either way.
func TestServerCertificateExtensions(t *testing.T) {
	t.Parallel()
	ca, _, _ := newEd25519Signer()
	ts := srvStartServer(t, &ServerConfig{TrustedUserCAs: []ssh.PublicKey{ca.PublicKey()}, Principal: "host-1"})
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan struct{})
	defer func() { _ = echo.Close(); <-accepted }()
	go func() {
		defer close(accepted)
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	for _, tc := range []struct {
		name     string
		ext      map[string]string
		pty, fwd bool
	}{
		{"both", map[string]string{"permit-pty": "", "permit-port-forwarding": ""}, true, true},
		{"pty only", map[string]string{"permit-pty": ""}, true, false},
		{"forwarding only", map[string]string{"permit-port-forwarding": ""}, false, true},
		{"none", nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, _, _ := newEd25519Signer()
			cert := srvSignCert(t, ca, key.PublicKey(), func(c *ssh.Certificate) { c.Permissions.Extensions = tc.ext })
			cs, _ := ssh.NewCertSigner(cert, key)
			c, err := srvDialWith(ts.Addr, ts.HostPublicKey, ssh.PublicKeys(cs))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c.Close() }()
			if out, _, err := srvRunCmd(t, c, "echo ok", nil); err != nil || out != "ok\n" {
				t.Fatalf("exec: %q %v", out, err)
			}

			s, err := c.NewSession()
			if err != nil {
				t.Fatal(err)
			}
			err = s.RequestPty("xterm", 24, 80, ssh.TerminalModes{})
			_ = s.Close()
			if got := err == nil; got != tc.pty {
				t.Errorf("pty-req granted=%v (%v), want %v", got, err, tc.pty)
			}

			conn, err := c.Dial("tcp", echo.Addr().String())
			if got := err == nil; got != tc.fwd {
				t.Errorf("direct-tcpip granted=%v (%v), want %v", got, err, tc.fwd)
			}
			if err == nil {
				_ = conn.Close()
			} else if oce := (*ssh.OpenChannelError)(nil); !errors.As(err, &oce) || oce.Reason != ssh.Prohibited {
				t.Errorf("direct-tcpip refusal: %v, want Prohibited", err)
			}

			ln, err := c.Listen("tcp", "127.0.0.1:0")
			if got := err == nil; got != tc.fwd {
				t.Errorf("tcpip-forward granted=%v (%v), want %v", got, err, tc.fwd)
			}
			if err == nil {
				_ = ln.Close()
			}
		})
	}
}

// TestServerCertificateClockSays: a certificate refused for its validity
// window says the window and this host's time, and that the two clocks
// may disagree: an agent whose clock jumped refused every session with
// "ssh: cert is not yet valid" alone in its log.
func TestServerCertificateClockSays(t *testing.T) {
	ca, _, _ := newEd25519Signer()
	a := newAuthenticator(&ServerConfig{TrustedUserCAs: []ssh.PublicKey{ca.PublicKey()}, Principal: "host-1"}, "u")
	ahead := time.Now().Add(2 * time.Hour)
	for name, mod := range map[string]func(*ssh.Certificate){
		"not yet valid": func(c *ssh.Certificate) {
			c.ValidAfter, c.ValidBefore = uint64(ahead.Unix()), uint64(ahead.Add(10*time.Minute).Unix())
		},
		"expired": func(c *ssh.Certificate) {
			c.ValidAfter, c.ValidBefore = uint64(time.Now().Add(-3*time.Hour).Unix()), uint64(time.Now().Add(-2*time.Hour).Unix())
		},
	} {
		key, _, _ := newEd25519Signer()
		_, err := a.authenticate(nil, srvSignCert(t, ca, key.PublicKey(), mod))
		if err == nil || !strings.Contains(err.Error(), "this host's clock reads") || !strings.Contains(err.Error(), "NTP") {
			t.Errorf("%s: %v, want the window, this host's time and a word on the clocks", name, err)
		}
	}
	// A certificate refused for anything else says nothing of clocks.
	key, _, _ := newEd25519Signer()
	_, err := a.authenticate(nil, srvSignCert(t, ca, key.PublicKey(), func(c *ssh.Certificate) { c.ValidPrincipals = []string{"host-2"} }))
	if err == nil || strings.Contains(err.Error(), "clock") {
		t.Errorf("wrong principal: %v, want a refusal that says nothing of clocks", err)
	}
}
