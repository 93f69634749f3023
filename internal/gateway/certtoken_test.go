package gateway

import (
	"errors"
	"testing"

	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/internal/testenv"
	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

// TestTerminalCertificateNamesToken: the certificate of a web terminal's
// connection (HostClients.Dial under Live's context) carries its token's
// id, as a caller's does; the shared connection of previews (Get), the
// gateway's own, names none.
func TestTerminalCertificateNamesToken(t *testing.T) {
	e := newEnv(t, nil)
	hostSigner, hostKey := newKey(t)
	e.pin("h", hostKey)
	_, tok, err := e.store.CreateToken(e.ctx, store.TokenSpec{Role: store.RoleClient, Hosts: []string{"h"}, Name: "browser"})
	if err != nil {
		t.Fatal(err)
	}
	hc, err := NewHostClients(e.srv)
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	// certOf runs one SSH server on a stub tunnel for h while dial runs,
	// and returns the certificate the gateway presented to it.
	certOf := func(dial func()) *ssh.Certificate {
		t.Helper()
		gw, host := testenv.TCPPair(t) // net.Pipe would deadlock: both sides write their SSH version first
		unregister, _, err := e.srv.tunnels.Register("h", stubTunnel{gw})
		if err != nil {
			t.Fatal(err)
		}
		defer unregister()
		got := make(chan *ssh.Certificate, 1)
		cfg := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if c, ok := key.(*ssh.Certificate); ok {
				select {
				case got <- c:
				default:
				}
			}
			return nil, errors.New("the test only looks at the certificate")
		}}
		cfg.AddHostKey(hostSigner)
		served := make(chan struct{})
		go func() {
			defer close(served)
			if c, _, _, err := ssh.NewServerConn(host, cfg); err == nil {
				_ = c.Close()
			}
			_ = host.Close()
		}()
		dial()
		<-served
		select {
		case c := <-got:
			return c
		default:
			t.Fatal("the gateway presented no certificate")
			return nil
		}
	}
	ctx, done := e.srv.Live(e.ctx, tok, "pty", "h")
	defer done()
	term := certOf(func() {
		if c, _, err := hc.Dial(ctx, "h", "browser"); err == nil {
			_ = c.Close()
		}
	})
	if got := term.Extensions[wire.CertTokenExtension]; got != tok.ID {
		t.Errorf("a terminal's certificate: %s %q, want the token's id %q", wire.CertTokenExtension, got, tok.ID)
	}
	shared := certOf(func() {
		if c, err := hc.Get(ctx, "h"); err == nil {
			_ = c.Close()
		}
	})
	if got, ok := shared.Extensions[wire.CertTokenExtension]; ok {
		t.Errorf("the previews' shared connection's certificate names token %q", got)
	}
}
