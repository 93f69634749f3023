package sshlayer

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

// SessionKey is a fresh key pair for one caller session: the gateway signs
// PublicKey into a short-lived certificate, and the caller authenticates
// with Signer (or PrivateKey) plus that certificate.
type SessionKey struct {
	PrivateKey []byte     // OpenSSH PEM ("-----BEGIN OPENSSH PRIVATE KEY-----"), unencrypted
	PublicKey  string     // authorized_keys line, without a trailing newline
	Signer     ssh.Signer // the same key, ready for Auth.Signer
}

// GenerateSessionKey returns a new ed25519 session key.
func GenerateSessionKey() (*SessionKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("sshlayer: generate key: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		return nil, fmt.Errorf("sshlayer: marshal key: %w", err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, fmt.Errorf("sshlayer: signer: %w", err)
	}
	return &SessionKey{
		PrivateKey: pem.EncodeToMemory(block),
		PublicKey:  strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))),
		Signer:     signer,
	}, nil
}

// authSigner builds the signer Auth describes: Signer or PrivateKey, wrapped
// in the certificate when one is given.
func (a *Auth) signer() (ssh.Signer, error) {
	s := a.Signer
	if s == nil {
		if len(a.PrivateKey) == 0 {
			return nil, errors.New("sshlayer: auth: no private key or signer")
		}
		var err error
		if s, err = ssh.ParsePrivateKey(a.PrivateKey); err != nil {
			return nil, fmt.Errorf("sshlayer: auth: parse private key: %w", err)
		}
	}
	if len(a.Certificate) == 0 {
		return s, nil
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey(a.Certificate)
	if err != nil {
		return nil, fmt.Errorf("sshlayer: auth: parse certificate: %w", err)
	}
	cert, ok := pub.(*ssh.Certificate)
	if !ok {
		return nil, fmt.Errorf("sshlayer: auth: %s is a plain key, not a certificate", pub.Type())
	}
	cs, err := ssh.NewCertSigner(cert, s)
	if err != nil {
		return nil, fmt.Errorf("sshlayer: auth: certificate: %w", err)
	}
	return cs, nil
}
