//go:build unix

package sshlayer

import (
	"context"
	"fmt"
	"net"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

// ServeConnAdmitted serves conn as ServeConn does, for a listener whose
// callers an authority admits one by one: the agent's direct listener,
// whose callers the gateway admits over the agent's tunnel. Only user
// certificates are accepted there (TrustedUserCAs' checks, then admit); a
// plain authorized key is refused, since nobody could admit or end its
// session. admit is called once the client has proved it holds the
// certificate's key, not for a key it only offers (x/crypto asks
// PublicKeyCallback about an offer, before any signature, and caches the
// answer): an error from it refuses the authentication, logged with the
// error, and the client sees its key refused. A client that signs again
// gets admit called again: the caller keeps what it decided per
// connection. The handshake is counted against conn's source address too,
// as Serve's connections are.
//
// The hook is an argument, not a ServerConfig field, because one server
// serves both: the tunnel's streams, which the gateway authenticated, and
// the direct listener's connections, which it admits.
func (s *Server) ServeConnAdmitted(ctx context.Context, conn net.Conn, admit func(cert *ssh.Certificate) error) error {
	cfg := *s.sshCfg // NewServerConn copies it too
	cfg.PublicKeyCallback = func(md ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
		if _, ok := key.(*ssh.Certificate); !ok {
			return nil, fmt.Errorf("%w: public key %s: this listener takes only certificates of a trusted CA (the gateway's); plain keys are not accepted", errAuthRefused, ssh.FingerprintSHA256(key))
		}
		return s.auth.authenticate(md, key)
	}
	cfg.VerifiedPublicKeyCallback = func(_ ssh.ConnMetadata, key ssh.PublicKey, perms *ssh.Permissions, _ string) (*ssh.Permissions, error) {
		cert := key.(*ssh.Certificate) // PublicKeyCallback refused every other key
		if err := admit(cert); err != nil {
			return nil, fmt.Errorf("%w: certificate %q: %w", errAuthRefused, cert.KeyId, err)
		}
		return perms, nil
	}
	return s.serveConn(ctx, conn, sourceKey(conn.RemoteAddr()), &cfg)
}
