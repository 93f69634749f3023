// Package sshca is the gateway's SSH certificate authority: one ed25519 key
// kept in a file, signing short-lived user certificates whose principal is
// the host id the caller may reach and whose key id names the token, so an
// agent's auth log says who came in, and whose token-id extension names it
// for the gateway, which admits a direct session by it.
package sshca

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hostgate/hostgate/internal/durable"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

// DefaultTTL is a certificate's lifetime when none is configured: long
// enough to connect, short enough that a leaked certificate soon expires.
// An established SSH session outlives its certificate.
const DefaultTTL = 10 * time.Minute

// MaxTTL bounds configured lifetimes.
const MaxTTL = 24 * time.Hour

// Backdate is how far a certificate's ValidAfter is set before its
// signing, so an agent whose clock is a little behind still accepts a
// fresh one. Clients count a certificate's lifetime as its window less
// this (client's certRenewBy).
const Backdate = time.Minute

// CA signs user certificates.
type CA struct {
	signer ssh.Signer
	now    func() time.Time
}

// New returns a CA that signs with signer.
func New(signer ssh.Signer) *CA { return &CA{signer: signer, now: time.Now} }

// LoadOrCreate returns the CA whose key is stored at path, creating a new
// ed25519 key (OpenSSH PEM, mode 0600) when the file does not exist.
// Creation is race-free across processes: the first key linked into place
// wins. A key file readable by group or others is refused, like sshd does.
func LoadOrCreate(path string) (*CA, error) {
	s, err := load(path)
	if err == nil {
		return New(s), nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sshca: key dir: %w", err)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("sshca: generate key: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "hostgate user CA")
	if err != nil {
		return nil, fmt.Errorf("sshca: marshal key: %w", err)
	}
	if err := writeNew(path, pem.EncodeToMemory(block)); err != nil {
		return nil, fmt.Errorf("sshca: write key: %w", err)
	}
	s, err = load(path)
	if err != nil {
		return nil, err
	}
	return New(s), nil
}

// writeNew writes data to a temporary file and links it to path; link fails
// when path exists, so a concurrent creator's key is kept.
func writeNew(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".ca_key-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if err := tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	// Synced, its directory too: the new name on disk, or a power loss
	// can lose the key, and the gateway make another CA that every agent
	// refuses.
	if err := durable.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}

func load(path string) (ssh.Signer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("sshca: key: %w", err)
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("sshca: key: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("sshca: key %s: permissions %#o are too open (want 0600)", path, st.Mode().Perm())
	}
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("sshca: key: %w", err)
	}
	s, err := ssh.ParsePrivateKey(b)
	if err != nil {
		// Not made again: a new CA is one every enrolled agent refuses.
		return nil, fmt.Errorf("sshca: key %s cannot be read (%w): it is cut short or not a CA key (a copy of the state dir gone wrong?); put it back from a backup of the state dir, or, to change the CA on purpose, delete it (the README's CA change: every agent must then forget the pinned CA)", path, err)
	}
	return s, nil
}

// PublicKey is the CA's public key, which agents trust.
func (ca *CA) PublicKey() ssh.PublicKey { return ca.signer.PublicKey() }

// AuthorizedKey is the CA public key in authorized_keys form, one line
// without the trailing newline ("ssh-ed25519 AAAA…").
func (ca *CA) AuthorizedKey() string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(ca.signer.PublicKey())))
}

// Sign issues a user certificate for pub: principal hostID, key id keyID
// (the token name), valid from a minute ago for ttl (DefaultTTL when zero),
// permitting a pty and port forwarding, agent forwarding when
// agentForwarding is set, and nothing else (no X11 forwarding, no critical
// options). A certificate says what its host allows: agentForwarding is
// for a host whose agent forwards one (ssh -A), never a sandbox's, nor a
// machine's agent started with --no-agent-forwarding, whose refusal is
// then no surprise to a caller reading the certificate (ssh-keygen -L).
//
// Sign is for the gateway's own certificates, which no token was issued
// (a key proof, an execution's, gateway dev's printed command): they name
// no token, so an agent admits no direct session with them. A caller's
// certificate is SignToken's.
func (ca *CA) Sign(pub ssh.PublicKey, hostID, keyID string, ttl time.Duration, agentForwarding bool) (*ssh.Certificate, error) {
	return ca.SignToken(pub, hostID, keyID, "", ttl, agentForwarding)
}

// SignToken is Sign for a certificate issued to the token with id
// tokenID, which it carries in the wire.CertTokenExtension extension: an
// agent's direct listener has the gateway look that token up again before
// it admits the session (the relay checks the token itself, at its door).
// An empty tokenID adds no extension.
func (ca *CA) SignToken(pub ssh.PublicKey, hostID, keyID, tokenID string, ttl time.Duration, agentForwarding bool) (*ssh.Certificate, error) {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if ttl > MaxTTL {
		return nil, fmt.Errorf("sshca: ttl %v exceeds %v", ttl, MaxTTL)
	}
	if hostID == "" {
		return nil, errors.New("sshca: empty principal")
	}
	if _, ok := pub.(*ssh.Certificate); ok {
		return nil, errors.New("sshca: will not sign a certificate")
	}
	now := ca.now()
	var serial [8]byte
	_, _ = rand.Read(serial[:])
	cert := &ssh.Certificate{
		Key:             pub,
		Serial:          binary.BigEndian.Uint64(serial[:]),
		CertType:        ssh.UserCert,
		KeyId:           keyID,
		ValidPrincipals: []string{hostID},
		ValidAfter:      uint64(now.Add(-Backdate).Unix()),
		ValidBefore:     uint64(now.Add(ttl).Unix()),
		Permissions: ssh.Permissions{Extensions: map[string]string{
			"permit-pty":             "",
			"permit-port-forwarding": "",
		}},
	}
	if agentForwarding {
		cert.Permissions.Extensions["permit-agent-forwarding"] = ""
	}
	if tokenID != "" {
		cert.Permissions.Extensions[wire.CertTokenExtension] = tokenID
	}
	if err := cert.SignCert(rand.Reader, ca.signer); err != nil {
		return nil, fmt.Errorf("sshca: sign: %w", err)
	}
	return cert, nil
}
