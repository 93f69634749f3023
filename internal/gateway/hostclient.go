package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/proxyproto"
	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/sshlayer"
)

// HostClients gives gateway-side features (the browser pty, previews) an
// SSH client to a host, with the gateway as the caller: it signs a
// certificate for its own session key with its CA and pins the host key it
// published. One connection per host is shared and replaced when it dies,
// so previews cost one round trip, not a handshake, per request.
type HostClients struct {
	srv *Server
	key *sshlayer.SessionKey

	mu      sync.Mutex
	clients map[string]*sshlayer.Client
	closed  bool
	wg      sync.WaitGroup // forget, one per shared client
}

// NewHostClients returns gateway-side SSH clients for s's hosts. The
// caller owns them and calls Close when the gateway stops.
func NewHostClients(s *Server) (*HostClients, error) {
	key, err := sshlayer.GenerateSessionKey()
	if err != nil {
		return nil, err
	}
	return &HostClients{srv: s, key: key, clients: map[string]*sshlayer.Client{}}, nil
}

// Get returns the shared live SSH client to host id, connecting when
// needed.
func (hc *HostClients) Get(ctx context.Context, id string) (*sshlayer.Client, error) {
	hc.mu.Lock()
	if hc.closed {
		hc.mu.Unlock()
		return nil, ErrClosed
	}
	// A certificate is checked only when a connection authenticates, so a
	// live connection stays usable after its certificate expires; only a
	// dead one is replaced.
	if cur := hc.clients[id]; cur != nil {
		select {
		case <-cur.Done():
			delete(hc.clients, id)
		default:
			hc.mu.Unlock()
			return cur, nil
		}
	}
	hc.mu.Unlock()

	// Shared by every caller (previews): it names none to the host,
	// whatever ctx says (WithCaller), nor a token (Live).
	ctx = context.WithValue(context.WithValue(ctx, callerKey{}, proxyproto.Header{}), tokenIDKey{}, "")
	c, _, err := hc.Dial(ctx, id, "gateway")
	if err != nil {
		return nil, err
	}
	hc.mu.Lock()
	defer hc.mu.Unlock()
	if hc.closed {
		_ = c.Close()
		return nil, ErrClosed
	}
	if cur := hc.clients[id]; cur != nil {
		// Another caller connected first; use theirs.
		_ = c.Close()
		return cur, nil
	}
	hc.clients[id] = c
	hc.wg.Add(1)
	go hc.forget(id, c)
	return c, nil
}

// forget drops c from the shared clients once its connection ends.
// Waiting for the next Get of its host is not enough: executions are
// hosts whose ids never come back, so each one a preview or terminal had
// reached kept its dead client, transport buffers and all.
func (hc *HostClients) forget(id string, c *sshlayer.Client) {
	defer hc.wg.Done()
	<-c.Done()
	hc.mu.Lock()
	if hc.clients[id] == c {
		delete(hc.clients, id)
	}
	hc.mu.Unlock()
}

// Dial opens a new, unshared SSH connection to host id (the browser pty
// uses one per terminal), naming ctx's caller (WithCaller) to the host. The
// caller closes it.
func (hc *HostClients) Dial(ctx context.Context, id, keyID string) (*sshlayer.Client, time.Time, error) {
	c, validBefore, _, err := hc.dial(ctx, id, keyID)
	return c, validBefore, err
}

// DialLost is Dial, with lost: once the connection has failed, lost says
// why in words for a person when the host's tunnel ended under it (the
// gateway is shutting down, the host's agent went or reconnected, its
// execution ended: that error matches ErrExecutionEnded), and is nil
// otherwise. The SSH connection itself reads only EOF: a web terminal
// showed "sshlayer: process: sshlayer: connection lost: EOF" for each.
func (hc *HostClients) DialLost(ctx context.Context, id, keyID string) (c *sshlayer.Client, lost func() error, err error) {
	c, _, conn, err := hc.dial(ctx, id, keyID)
	if err != nil {
		return nil, nil, err
	}
	return c, func() error { return hc.lost(id, conn) }, nil
}

// lost is why conn, a stream to host id, lost its host, in
// relayEndReason's words (the relays' close reasons): the gateway is
// shutting down, or the host's tunnel ended (its agent went, reconnected
// or was revoked; its execution ended). nil while neither.
func (hc *HostClients) lost(id string, conn net.Conn) error {
	done, cause := tunnelOf(conn)
	var endedWhy string
	code, reason := relayEndReason(hc.srv.ctx, done, cause, func(id string) string {
		endedWhy = hc.srv.endedHost(id)
		return endedWhy
	}, id)
	switch {
	case endedWhy != "":
		// Gone for good: not the relays' "provision a new one", meant
		// for a program, and no reload of the page reaches it again.
		return &executionEndedError{wire.HostMessage(id, "its execution ended ("+endedWhy+"): start a new sandbox")}
	case code == bytestream.StatusServiceRestart:
		// Not the relays' "; reconnect", meant for a program: the shell
		// ended with the gateway, and the page says to reload for a new one.
		return errors.New(wire.HostMessage(id, "the gateway is shutting down"))
	case reason != "":
		return errors.New(reason)
	}
	return nil
}

func (hc *HostClients) dial(ctx context.Context, id, keyID string) (*sshlayer.Client, time.Time, net.Conn, error) {
	h, err := hc.srv.store.Host(ctx, id)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, time.Time{}, nil, fmt.Errorf("%w: %s", ErrUnknownHost, id)
		}
		return nil, time.Time{}, nil, err
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(h.HostKey))
	if err != nil {
		return nil, time.Time{}, nil, fmt.Errorf("gateway: host %s has no pinned host key", id)
	}
	// The gateway's own connections (a browser's terminal) forward no
	// agent: their certificate does not permit it. A terminal's names the
	// token it runs for (Live's context), as a caller's does.
	cert, err := hc.srv.ca.SignToken(hc.key.Signer.PublicKey(), id, keyID, tokenIDOf(ctx), hc.srv.cfg.CertTTL, false)
	if err != nil {
		return nil, time.Time{}, nil, err
	}
	certSigner, err := ssh.NewCertSigner(cert, hc.key.Signer)
	if err != nil {
		return nil, time.Time{}, nil, err
	}
	conn, err := hc.srv.tunnels.Open(ctx, id)
	if err != nil {
		return nil, time.Time{}, nil, err
	}
	c, err := sshlayer.Connect(ctx, conn, sshlayer.Auth{
		User:    "hostgate",
		Signer:  certSigner,
		HostKey: ssh.FingerprintSHA256(pub),
	})
	if err != nil {
		_ = conn.Close()
		return nil, time.Time{}, nil, fmt.Errorf("gateway: ssh to host %s: %w", id, err)
	}
	return c, time.Unix(int64(cert.ValidBefore), 0), conn, nil
}

// Close closes every shared client.
func (hc *HostClients) Close() {
	hc.mu.Lock()
	hc.closed = true
	clients := hc.clients
	hc.clients = nil
	hc.mu.Unlock()
	for _, c := range clients {
		_ = c.Close()
	}
	hc.wg.Wait()
}

// ErrExecutionEnded is matched by DialLost's lost for a host, an
// execution, that ended for good (terminated, its runtime out): a new
// connection will not reach it.
var ErrExecutionEnded = errors.New("gateway: the host's execution ended")

// executionEndedError is lost's words for an execution that ended, matching
// ErrExecutionEnded.
type executionEndedError struct{ msg string }

func (e *executionEndedError) Error() string        { return e.msg }
func (e *executionEndedError) Is(target error) bool { return target == ErrExecutionEnded }
