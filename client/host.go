package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/dialfirst"
	"github.com/hostgate/hostgate/internal/gateway/sshca"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/sshlayer"
)

// LazyHost returns a lazy *hostgate.Host for host id. Nothing is dialed
// until its first use; that use's connect fetches the gateway's record of
// the host (GET /v1/hosts/{id}) and its pinned key, makes a session key,
// gets a certificate for it and connects SSH through the gateway, checking
// the host key before anything else is sent. The synchronous filesystem
// dials its own, separate stream.
//
// Info is the zero Info until that first connect has succeeded, and what
// the gateway published about the host from then on (as Dial's is at
// once). Dial, or Client.Host, for a caller that needs it before any use.
// Its errors name the host by id ("host box: …"), those of a failing first
// connect too.
func (c *Client) LazyHost(id string) *hostgate.Host {
	return hostgate.NewNamed(id, hostgate.Info{}, func(ctx context.Context) (*hostgate.Connection, error) {
		return c.connectLearning(ctx, id)
	}, c.hostOpts...)
}

// Dial turns (gateway URL, token, host id) into a ready, connected Host.
// The Host does not reconnect: once its connection is lost, Dial again, or
// use a Client made with Options.Reconnect. It leaves no connection to the
// gateway open once it failed or its Host is closed.
func Dial(ctx context.Context, gatewayURL, token, hostID string) (*hostgate.Host, error) {
	c, err := New(gatewayURL, token, nil)
	if err != nil {
		return nil, err
	}
	// c is the Host's alone, and the caller never sees it: its idle
	// connections go when the Host does, or at once if Dial fails.
	h, err := c.Dial(ctx, hostID)
	if err != nil {
		c.CloseIdleConnections()
		return nil, err
	}
	h.AfterClose(c.CloseIdleConnections)
	return h, nil
}

// Dial connects to host id and returns the ready Host, whose Info is what
// the gateway published. Its errors, a failing connect's too, name the host
// by id, once: "host box: offline: not connected to the gateway (503
// host_offline)".
func (c *Client) Dial(ctx context.Context, id string) (*hostgate.Host, error) {
	if id == "" {
		return nil, errEmptyID("host")
	}
	// The first connect runs here, under ctx, where a Host's runs under
	// the Host's own: a gateway that does not answer is then "Get …:
	// context deadline exceeded", not only the Host's "connect: context
	// deadline exceeded". The Host takes its outcome as its first
	// connect's. Connecting again (Options.Reconnect), it keeps the Info
	// it has and asks for no record: its errors are the stream's and the
	// handshake's ("no answer to the WebSocket handshake"), not a record
	// request's that timed out beside them.
	conn, err := c.connectLearning(ctx, id)
	var first atomic.Bool
	h := hostgate.NewNamed(id, hostgate.Info{}, func(ctx context.Context) (*hostgate.Connection, error) {
		if first.CompareAndSwap(false, true) {
			return conn, err
		}
		return c.connect(ctx, id)
	}, c.hostOpts...)
	// Its first connect returns at once: no ctx of the caller's, which
	// may have ended with the connect, races it.
	if _, err := h.Connection(context.WithoutCancel(ctx)); err != nil {
		_ = h.Close()
		return nil, err
	}
	return h, nil
}

// connectLearning is connect that also learns the host's record, which
// the connection carries as its Info. The record's request goes out with
// the connect's first (the certificate's), not before it: a round trip
// less, which a program far from its gateway feels (BenchmarkDialLatency:
// 5.2 -> 4.2 round trips). The record's error, where it has one, is the
// connect's: an unknown host is "not found" by its record first, as it
// was when the record was asked for alone.
func (c *Client) connectLearning(ctx context.Context, id string) (*hostgate.Connection, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		rec *HostRecord
		err error
	}
	record := make(chan answer, 1)
	go func() {
		rec, err := c.Host(ctx, id)
		if err != nil {
			cancel() // the connect is in vain
		}
		record <- answer{rec, err}
	}()
	conn, err := c.connect(ctx, id)
	a := <-record
	if a.err != nil {
		if err == nil {
			_ = conn.Close()
		}
		return nil, underHost(id, a.err) // named by the Host
	}
	if err != nil {
		return nil, err
	}
	conn.Info = &a.rec.Info
	return conn, nil
}

// credentials holds a session key and its certificate, renewed when the
// certificate is about to expire.
type credentials struct {
	c  *Client
	id string

	// turn is held (a token in it) by the auth that makes the key or
	// asks the gateway for a certificate, one at a time; a wait for it
	// ends with the waiter's ctx. mu alone, held across the request,
	// kept every other connect to the host (another Host of the same
	// id, a synchronous filesystem's) waiting for it, up to
	// apiCallTimeout, whatever their ctx: a cancelled connect, and the
	// Close waiting for it, too.
	turn chan struct{}

	mu      sync.Mutex
	key     *sshlayer.SessionKey
	cert    *Certificate
	hostKey string
	// renewBy is when cert is due for renewal by this machine's
	// monotonic clock, from its lifetime as the gateway signed it: a
	// client whose wall clock is behind the gateway's by more than the
	// lifetime kept an expired certificate by ValidBefore alone, and
	// every reconnect failed to authenticate. Zero when the certificate
	// does not say (it does not parse).
	renewBy time.Time
}

// certRenewBy is when a certificate received now is due for renewal,
// 30 s before its lifetime runs out by this machine's clock, or zero when
// it does not parse.
func certRenewBy(certificate string) time.Time {
	pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(certificate))
	cert, ok := pub.(*ssh.Certificate)
	if err != nil || !ok || cert.ValidBefore <= cert.ValidAfter || cert.ValidBefore == ssh.CertTimeInfinity {
		return time.Time{}
	}
	// The gateway backdates ValidAfter for agents whose clocks are
	// behind: the lifetime from the signing is the rest of the window.
	window := time.Duration(cert.ValidBefore-cert.ValidAfter) * time.Second
	return time.Now().Add(window - sshca.Backdate - 30*time.Second)
}

// certDue reports whether the next auth asks the gateway for a
// certificate: none yet, or the one kept is about to expire. cr.mu held.
func (cr *credentials) certDue() bool {
	return cr.cert == nil || time.Until(cr.cert.ValidBefore) < 30*time.Second || (!cr.renewBy.IsZero() && time.Now().After(cr.renewBy))
}

func (cr *credentials) auth(ctx context.Context) (sshlayer.Auth, error) {
	select {
	case cr.turn <- struct{}{}:
	case <-ctx.Done():
		return sshlayer.Auth{}, fmt.Errorf("client: waiting for another connect's certificate for the host: %w", context.Cause(ctx))
	}
	defer func() { <-cr.turn }()
	cr.mu.Lock()
	key, due := cr.key, cr.certDue()
	cr.mu.Unlock()
	if key == nil {
		k, err := sshlayer.GenerateSessionKey()
		if err != nil {
			return sshlayer.Auth{}, err
		}
		key = k
		cr.mu.Lock()
		cr.key = k
		cr.mu.Unlock()
	}
	if due {
		cert, err := cr.c.Certificate(ctx, cr.id, key.PublicKey)
		if err != nil {
			return sshlayer.Auth{}, err
		}
		if cert.HostKey == "" {
			return sshlayer.Auth{}, errors.New("client: the gateway has no pinned host key for the host yet")
		}
		// The key itself, where the gateway gives it, rather than its
		// fingerprint: the SSH client then asks for that key's type, and
		// a mismatch names the pinned key's type instead of advising to
		// pin a key of another type, which a gateway's caller cannot.
		hostKey := cert.HostKey
		if cert.HostPublicKey != "" {
			hostKey = cert.HostPublicKey
		}
		renewBy := certRenewBy(cert.Certificate)
		cr.mu.Lock()
		cr.cert, cr.hostKey, cr.renewBy = cert, hostKey, renewBy
		cr.mu.Unlock()
	}
	cr.mu.Lock()
	defer cr.mu.Unlock()
	return sshlayer.Auth{
		User:        "hostgate",
		Signer:      key.Signer,
		Certificate: []byte(cr.cert.Certificate),
		HostKey:     cr.hostKey,
		Host:        cr.id,
	}, nil
}

// credentialsFor is the credentials of host id, kept since an earlier
// connect (kept) or new. A reconnecting Host (Options.Reconnect) retries
// while its host is offline; each retry used to ask the gateway for a
// certificate (an audit entry each: 10 in a second were seen), where the
// kept one is valid for minutes.
func (c *Client) credentialsFor(id string) (cr *credentials, kept bool) {
	c.credMu.Lock()
	defer c.credMu.Unlock()
	if cr = c.creds[id]; cr != nil {
		return cr, true
	}
	if c.creds == nil {
		c.creds = map[string]*credentials{}
	}
	if len(c.creds) >= c.credsPruneAt {
		c.pruneCredentialsLocked()
	}
	cr = &credentials{c: c, id: id, turn: make(chan struct{}, 1)}
	c.creds[id] = cr
	return cr, false
}

// credsPruneMin is the fewest kept credentials pruneCredentialsLocked is
// run for.
const credsPruneMin = 64

// pruneCredentialsLocked drops the kept credentials whose certificate is
// due for renewal and that no auth is using: their next connect asks for
// a certificate anyway, and only the session key, made anew in
// microseconds, is lost. Every host id dialed was kept for the Client's
// life, a key and a certificate each, so a program that dials each
// execution it provisions grew by some KiB per execution, without end.
// It runs once the map has doubled since the last prune, so that dialing
// many live hosts costs no more than a constant per dial. c.credMu held.
func (c *Client) pruneCredentialsLocked() {
	for id, cr := range c.creds {
		if len(cr.turn) != 0 {
			continue // an auth holds it, and may keep a new certificate there
		}
		cr.mu.Lock()
		due := cr.certDue()
		cr.mu.Unlock()
		if due {
			delete(c.creds, id)
		}
	}
	c.credsPruneAt = max(credsPruneMin, 2*len(c.creds))
}

// forgetCredentials drops cr as host id's kept credentials.
func (c *Client) forgetCredentials(id string, cr *credentials) {
	c.credMu.Lock()
	defer c.credMu.Unlock()
	if c.creds[id] == cr {
		delete(c.creds, id)
	}
}

// connect is a Host's connect: its errors, which the Host names the host
// in, leave the gateway's name of it out (underHost).
func (c *Client) connect(ctx context.Context, id string) (*hostgate.Connection, error) {
	cr, kept := c.credentialsFor(id)
	pre := c.predial(ctx, id, cr)
	defer pre.close()
	auth, err := cr.auth(ctx)
	if err != nil {
		return nil, underHost(id, err)
	}
	sc, err := c.sshConnectVia(ctx, id, cr, auth, pre)
	var hs *sshHandshakeError
	if errors.As(err, &hs) {
		// The host's pinned key or the gateway's CA may have changed
		// since the kept certificate was issued (gateway host reset-key,
		// a gateway with new state): the next connect starts from a new
		// one, and one that reused a kept certificate tries a new one at
		// once.
		c.forgetCredentials(id, cr)
		if kept && ctx.Err() == nil {
			cr, _ = c.credentialsFor(id)
			if auth, err = cr.auth(ctx); err != nil {
				return nil, underHost(id, err)
			}
			if sc, err = c.sshConnectVia(ctx, id, cr, auth, nil); errors.As(err, &hs) {
				c.forgetCredentials(id, cr)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	sync := &hostgate.SyncSpec{Name: id, Connect: func(ctx context.Context) (*hostgate.SyncConnection, error) {
		auth, err := cr.auth(ctx)
		if err != nil {
			return nil, underHost(id, err)
		}
		if addrs := c.directAddrs(id, cr); addrs != nil {
			d := c.directFor(id)
			var addr string
			spec := sshlayer.SyncSpec(func(ctx context.Context) (net.Conn, error) {
				conn, err := dialfirst.Dial(ctx, addrs, directDialTimeout)
				if err == nil {
					addr = conn.RemoteAddr().String()
				}
				return conn, err
			}, auth)
			sc, err := spec.Connect(ctx)
			d.result(addr, err)
			if err == nil || ctx.Err() != nil {
				return sc, err
			}
		}
		spec := sshlayer.SyncSpec(func(ctx context.Context) (net.Conn, error) { return c.dialSSH(ctx, id) }, auth)
		return spec.Connect(ctx)
	}}
	return sc.Connection(sync), nil
}

// sshConnectVia connects SSH to host id straight to its agent when the
// host has direct addresses worth a try, else (or when that fails)
// through the gateway's relay.
func (c *Client) sshConnectVia(ctx context.Context, id string, cr *credentials, auth sshlayer.Auth, pre *predial) (*sshlayer.Client, error) {
	if addrs := c.directAddrs(id, cr); addrs != nil {
		pre.close()
		sc, err := c.sshDirect(ctx, c.directFor(id), addrs, auth)
		if err == nil {
			return sc, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		// The relay's request says why (wire.HeaderDirectFailed).
		ctx = context.WithValue(ctx, directFailedKey{}, err)
	}
	return c.sshConnect(ctx, id, auth, pre)
}

// directAddrs is host id's direct addresses when they are worth a try
// now, else nil.
func (c *Client) directAddrs(id string, cr *credentials) []string {
	if c.relayOnly {
		return nil
	}
	cr.mu.Lock()
	var addrs []string
	if cr.cert != nil {
		// As many as a gateway publishes: each is dialed at once (a
		// goroutine and a socket), and a broken or hostile gateway's
		// answer could list hundreds of thousands.
		addrs = cr.cert.Direct[:min(len(cr.cert.Direct), wire.MaxDirectAddrs)]
	}
	cr.mu.Unlock()
	if len(addrs) == 0 || !c.directFor(id).tryDirect() {
		return nil
	}
	return addrs
}

// sshConnect connects SSH to host id through the gateway's relay. Its
// errors leave the id to the Host's, which name it.
func (c *Client) sshConnect(ctx context.Context, id string, auth sshlayer.Auth, pre *predial) (*sshlayer.Client, error) {
	conn, err := c.dialSSHOn(ctx, id, pre.wait())
	if err != nil {
		// Only the gateway's host_offline is ErrOffline: a 503 is also a
		// full tunnel (too_many_streams) or a gateway stopping.
		var ae *APIError
		if errors.As(err, &ae) && ae.Status == http.StatusServiceUnavailable && ae.Code == "host_offline" {
			return nil, &offlineError{api: ae, err: err}
		}
		return nil, fmt.Errorf("ssh stream: %w", err)
	}
	sc, err := sshlayer.ConnectConfig(ctx, conn, auth, &sshlayer.ClientConfig{ForwardAgent: c.agent})
	if err != nil {
		_ = conn.Close()
		return nil, &sshHandshakeError{err} // "sshlayer: handshake: …", "sshlayer: host key mismatch: …"
	}
	return sc, nil
}

// predial is the connection to the gateway that a connect's SSH stream
// will be dialed on, made while the connect waits for its certificate:
// the stream's request then goes out as soon as the certificate is in, not
// after a connect of its own (a round trip, two over TLS;
// BenchmarkDialLatency). A host reached directly does not use it.
type predial struct {
	cancel context.CancelFunc // ends a dial still under way
	done   chan struct{}
	p      *bytestream.Predialed // nil: the predial failed, and the dial dials again
}

// predial starts a predial for a connect to host id with cr, where its
// auth will ask for a certificate (else there is nothing to wait for) and
// the stream is this package's to dial (not a caller's HTTPClient's).
// Nil: none.
func (c *Client) predial(ctx context.Context, id string, cr *credentials) *predial {
	cr.mu.Lock()
	due := cr.certDue()
	cr.mu.Unlock()
	if !due || c.ws != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	pd := &predial{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(pd.done)
		pd.p, _ = predialWebSocket(ctx, c.sshURL(id), &bytestream.WebSocketOptions{RootCAs: c.roots})
	}()
	return pd
}

// predialWebSocket is bytestream.PredialWebSocket; a test stalls it.
var predialWebSocket = bytestream.PredialWebSocket

// wait is the predialed connection once it is made, or nil.
func (pd *predial) wait() *bytestream.Predialed {
	if pd == nil {
		return nil
	}
	<-pd.done
	return pd.p
}

// close ends the predial: its dial, where it is still under way, and its
// connection, unless a dial took it.
func (pd *predial) close() {
	if pd == nil {
		return
	}
	pd.cancel()
	if p := pd.wait(); p != nil {
		_ = p.Close()
	}
}

// sshHandshakeError is an SSH handshake with the host that failed, where
// the stream to it opened: the credentials may be what failed.
type sshHandshakeError struct{ err error }

func (e *sshHandshakeError) Error() string { return e.err.Error() }
func (e *sshHandshakeError) Unwrap() error { return e.err }
