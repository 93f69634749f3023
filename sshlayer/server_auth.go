//go:build unix

package sshlayer

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

// Permission extensions the authenticator records for the connection.
const (
	extFingerprint = "hostgate-fingerprint"
	extCertKeyID   = "hostgate-cert-key-id"
)

// Certificate extensions the server enforces, as sshd does: a certificate
// grants a PTY, port forwarding or agent forwarding only when it carries
// the extension. A plain authorized key is granted all three (sshd's
// default without restrictions in authorized_keys). The gateway CA sets
// the first two, and agent forwarding for hosts that forward an agent.
const (
	extPermitPTY             = "permit-pty"
	extPermitPortForwarding  = "permit-port-forwarding"
	extPermitAgentForwarding = "permit-agent-forwarding"
)

// errAuthRefused is what every refusal reports to the library; the client
// sees only a generic failure, the log gets the detail.
var errAuthRefused = errors.New("key not accepted")

// authenticator checks public keys and user certificates.
type authenticator struct {
	keys      map[string]struct{} // Marshal() of each authorized key
	cas       []ssh.PublicKey
	principal string // required certificate principal
	checker   *ssh.CertChecker
}

func newAuthenticator(cfg *ServerConfig, osUser string) *authenticator {
	a := &authenticator{keys: make(map[string]struct{}), cas: cfg.TrustedUserCAs, principal: cfg.Principal}
	if a.principal == "" {
		a.principal = osUser
	}
	for _, k := range cfg.AuthorizedKeys {
		a.keys[string(k.Marshal())] = struct{}{}
	}
	a.checker = &ssh.CertChecker{
		// No critical option is supported (force-command, source-address
		// and verify-required mean nothing here), so any refuses the
		// certificate: a restriction we cannot honour must not be ignored.
		SupportedCriticalOptions: nil,
		IsUserAuthority:          a.isCA,
	}
	return a
}

func (a *authenticator) isCA(k ssh.PublicKey) bool {
	m := k.Marshal()
	return slices.ContainsFunc(a.cas, func(ca ssh.PublicKey) bool { return bytes.Equal(ca.Marshal(), m) })
}

// authenticate is the ssh.ServerConfig PublicKeyCallback. Any user name is
// accepted; commands run as the server's own OS user.
func (a *authenticator) authenticate(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
	cert, ok := key.(*ssh.Certificate)
	if !ok {
		if _, ok := a.keys[string(key.Marshal())]; !ok {
			return nil, fmt.Errorf("%w: unknown public key %s", errAuthRefused, ssh.FingerprintSHA256(key))
		}
		return &ssh.Permissions{Extensions: map[string]string{
			extFingerprint:           ssh.FingerprintSHA256(key),
			extPermitPTY:             "",
			extPermitPortForwarding:  "",
			extPermitAgentForwarding: "",
		}}, nil
	}
	if err := a.checkCert(cert); err != nil {
		return nil, fmt.Errorf("%w: certificate %q: %w", errAuthRefused, cert.KeyId, err)
	}
	ext := map[string]string{
		extFingerprint: ssh.FingerprintSHA256(cert.Key),
		extCertKeyID:   cert.KeyId,
	}
	for _, k := range []string{extPermitPTY, extPermitPortForwarding, extPermitAgentForwarding} {
		if _, ok := cert.Permissions.Extensions[k]; ok {
			ext[k] = ""
		}
	}
	return &ssh.Permissions{Extensions: ext}, nil
}

func (a *authenticator) checkCert(cert *ssh.Certificate) error {
	if len(a.cas) == 0 {
		return errors.New("certificates are not accepted (no trusted CA)")
	}
	if cert.CertType != ssh.UserCert {
		return errors.New("not a user certificate")
	}
	if !a.isCA(cert.SignatureKey) {
		return fmt.Errorf("signed by an untrusted authority %s", ssh.FingerprintSHA256(cert.SignatureKey))
	}
	if cert.Signature != nil && cert.Signature.Format == ssh.KeyAlgoRSA {
		// As sshd's CASignatureAlgorithms since OpenSSH 8.8: SHA-1 is
		// broken for signatures (chosen-prefix collisions).
		return fmt.Errorf("signed by authority %s with ssh-rsa (RSA with SHA-1), which is refused: sign certificates with rsa-sha2-512 (ssh-keygen -t rsa-sha2-512 -s CA ...) or an ed25519 CA", ssh.FingerprintSHA256(cert.SignatureKey))
	}
	if len(cert.ValidPrincipals) == 0 {
		return errors.New("certificate has no principals")
	}
	// CheckCert verifies critical options, principal, validity window and
	// the CA signature.
	if err := a.checker.CheckCert(a.principal, cert); err != nil {
		return clockHint(cert, err, time.Now())
	}
	return nil
}

// clockHint adds the validity window and this host's time to err when
// cert is outside its window. The gateway's certificates are valid from a
// minute before it signed them, for minutes: one refused as "not yet
// valid" or "expired" as it is used means this host's clock and the
// gateway's disagree (a clock that jumped: a laptop back from sleep, a
// restored VM, no NTP), which the log said nothing of, while every caller
// saw only "Permission denied".
func clockHint(cert *ssh.Certificate, err error, now time.Time) error {
	after, before := int64(cert.ValidAfter), int64(cert.ValidBefore)
	forever := cert.ValidBefore == ssh.CertTimeInfinity
	if after >= 0 && now.Unix() >= after && (forever || before >= 0 && now.Unix() < before) {
		return err
	}
	at := func(v uint64) string {
		if v == ssh.CertTimeInfinity || int64(v) < 0 {
			return "forever"
		}
		return time.Unix(int64(v), 0).UTC().Format(time.RFC3339)
	}
	return fmt.Errorf("%w: valid from %s to %s, and this host's clock reads %s: for a certificate just issued, this host's clock and its issuer's (the gateway's) disagree; check that NTP runs on both",
		err, at(cert.ValidAfter), at(cert.ValidBefore), now.UTC().Format(time.RFC3339))
}
