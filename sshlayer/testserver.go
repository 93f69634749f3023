//go:build unix

package sshlayer

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

// TestServer is an embedded SSH server on loopback for tests and library
// users: it accepts exactly one freshly generated client key (any user
// name), runs exec requests with /bin/sh -c, serves SFTP over the local
// filesystem and supports both forwarding directions.
type TestServer struct {
	Host          string        // "127.0.0.1"
	Port          int           // the port listened on
	Addr          string        // Host:Port
	HostKey       string        // host key fingerprint, "SHA256:…"
	HostPublicKey ssh.PublicKey // the host key itself
	ClientKey     []byte        // the accepted client key, OpenSSH PEM private key
	ClientSigner  ssh.Signer    // the same key as a signer
	Server        *Server       // the server behind it

	done chan error // Serve's result
}

// StartTestServer starts a TestServer on 127.0.0.1 with a random port.
// Close it when done.
func StartTestServer() (*TestServer, error) {
	return StartTestServerConfig(nil)
}

// StartTestServerConfig is StartTestServer with knobs: cfg's HostKey and
// AuthorizedKeys are replaced by generated ones, the rest is used as given
// (cfg may be nil).
func StartTestServerConfig(cfg *ServerConfig) (*TestServer, error) {
	hostSigner, _, err := newEd25519Signer()
	if err != nil {
		return nil, err
	}
	clientSigner, clientPEM, err := newEd25519Signer()
	if err != nil {
		return nil, err
	}
	var c ServerConfig
	if cfg != nil {
		c = *cfg
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.HostKey = hostSigner
	c.AuthorizedKeys = []ssh.PublicKey{clientSigner.PublicKey()}
	srv, err := NewServer(&c)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("sshlayer: test server: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	t := &TestServer{
		Host:          "127.0.0.1",
		Port:          port,
		Addr:          net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		HostKey:       ssh.FingerprintSHA256(hostSigner.PublicKey()),
		HostPublicKey: hostSigner.PublicKey(),
		ClientKey:     clientPEM,
		ClientSigner:  clientSigner,
		Server:        srv,
		done:          make(chan error, 1),
	}
	go func() { t.done <- srv.Serve(ln) }()
	return t, nil
}

// Close stops the server and waits until every connection and process it
// ran is gone.
func (t *TestServer) Close() error {
	err := t.Server.Close()
	if serr := <-t.done; serr != nil && !errors.Is(serr, ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	// Make Close idempotent: later calls see ErrServerClosed again.
	t.done <- ErrServerClosed
	return err
}

func newEd25519Signer() (ssh.Signer, []byte, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("sshlayer: generate key: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		return nil, nil, fmt.Errorf("sshlayer: marshal key: %w", err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, nil, fmt.Errorf("sshlayer: signer: %w", err)
	}
	return s, pem.EncodeToMemory(block), nil
}
