package sshlayer

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hostgate/hostgate/internal/rawio"
	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate"
)

// DefaultUser is the SSH user name when Auth.User is empty. The agent
// accepts any user name (commands run as the agent's own OS user).
const DefaultUser = "hostgate"

// Client defaults; see ClientConfig.
const (
	defaultKeepaliveInterval      = 15 * time.Second
	defaultKeepaliveMaxMissed     = 3
	defaultClientHandshakeTimeout = 20 * time.Second
)

// Errors callers branch on.
var (
	// ErrHostKeyMismatch: the server presented a host key other than the
	// pinned one. No authentication request was sent.
	ErrHostKeyMismatch = errors.New("sshlayer: host key mismatch")
	// ErrConnectionLost: the SSH connection ended before the operation
	// finished (transport closed, peer gone, keepalive timeout).
	ErrConnectionLost = errors.New("sshlayer: connection lost")
	// ErrKeepaliveTimeout: the peer stopped answering keepalives; the
	// connection was closed. Errors carrying it also match ErrConnectionLost.
	ErrKeepaliveTimeout = errors.New("sshlayer: keepalive timeout")
	// ErrClientClosed: the operation was refused or ended by Client.Close.
	// It matches hostgate.ErrClosed too, so that what a Host handed out
	// before its Close (a Provider, a Process, the base of a Wrap host)
	// fails afterwards as the Host's own methods do.
	ErrClientClosed error = clientClosedError{}
)

// clientClosedError is ErrClientClosed's type: a sentinel that also
// matches hostgate.ErrClosed.
type clientClosedError struct{}

func (clientClosedError) Error() string        { return "sshlayer: client closed" }
func (clientClosedError) Is(target error) bool { return target == hostgate.ErrClosed }

// Auth is who the client is and which host it expects.
type Auth struct {
	// User is the SSH user name; DefaultUser when empty.
	User string
	// PrivateKey is an unencrypted private key in OpenSSH PEM format. Either
	// it or Signer is required; Signer wins when both are set.
	PrivateKey []byte
	Signer     ssh.Signer
	// Certificate is an optional authorized_keys-format user certificate
	// for the key.
	Certificate []byte
	// HostKey pins the host's key: its fingerprint, "SHA256:…" as
	// ssh-keygen -lf prints it, or the public key itself, a line as in its
	// .pub file or authorized_keys ("ssh-rsa AAAA… [comment]"). Required
	// unless InsecureSkipHostKeyCheck; when set it is always checked.
	//
	// A server holding several host keys (every stock OpenSSH install)
	// presents one, of the first type the client asks for. A fingerprint
	// does not say its key's type, so with one the client asks for ed25519
	// first, then ECDSA, then RSA: pin such a host's ed25519 key
	// (ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub). To pin another of
	// its keys, pin that public key itself (the line of
	// /etc/ssh/ssh_host_rsa_key.pub): the client then asks for that key's
	// type only.
	HostKey string
	// InsecureSkipHostKeyCheck accepts any host key. Use it ONLY for a stream
	// that is already authenticated end to end (for example a pipe to a
	// process this program started); otherwise anyone on the path can
	// impersonate the host.
	InsecureSkipHostKeyCheck bool
	// Host, when set, names the host (its gateway id) in the error every
	// operation gets once the connection is lost ("host build-01:
	// sshlayer: connection lost: …"): a caller holding several hosts
	// learns which one went. It is the Name of the client's Connection
	// too, so that a hostgate.Host names it in every error.
	Host string
}

// ClientConfig holds the client's knobs; a nil *ClientConfig or a zero field
// means the default.
type ClientConfig struct {
	// KeepaliveInterval is how often a keepalive@openssh.com request is
	// sent; defaultKeepaliveInterval when zero, disabled when negative.
	KeepaliveInterval time.Duration
	// KeepaliveMaxMissed is how many intervals may pass without a reply
	// before the connection is closed; defaultKeepaliveMaxMissed when zero.
	KeepaliveMaxMissed int
	// HandshakeTimeout bounds the SSH handshake, host key check and
	// authentication; defaultClientHandshakeTimeout when zero.
	HandshakeTimeout time.Duration
	// Logger receives debug logs about the connection; none when nil.
	Logger *slog.Logger
	// ForwardAgent, when set, forwards an SSH agent to every process the
	// client spawns, as ssh -A does: each asks for agent forwarding before
	// it starts, and every connection a process makes to its
	// SSH_AUTH_SOCK is carried to a connection ForwardAgent dials (say,
	// to the local SSH_AUTH_SOCK's socket). The host may refuse without a
	// word (a sandbox always does); the process then has no
	// SSH_AUTH_SOCK. While the client is connected, whoever controls the
	// host can sign with the agent.
	ForwardAgent func() (net.Conn, error)
}

func (cfg *ClientConfig) withDefaults() ClientConfig {
	var c ClientConfig
	if cfg != nil {
		c = *cfg
	}
	if c.KeepaliveInterval == 0 {
		c.KeepaliveInterval = defaultKeepaliveInterval
	}
	if c.KeepaliveMaxMissed <= 0 {
		c.KeepaliveMaxMissed = defaultKeepaliveMaxMissed
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = defaultClientHandshakeTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// preferredCiphers is the client's cipher list (ciphers.go): AES-GCM first
// where this machine runs it in hardware, which measured fastest (see
// bench_test.go's BenchmarkCipher), chacha20-poly1305 first where not.
var preferredCiphers = clientCiphers(aesGCMHardware)

// hostKeyAlgorithms, asked for when the pin is a fingerprint (whose key
// type is unknown) or there is none, puts ed25519 first: hostgate's keys are
// ed25519, and with x/crypto's default order (ECDSA first) an OpenSSH server
// holding several host keys would present its ECDSA key and fail an ed25519
// pin. A pinned public key asks for its own type (algorithmsFor).
var hostKeyAlgorithms = []string{
	ssh.KeyAlgoED25519,
	ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521,
	ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSASHA512,
}

// Client is one SSH connection to a host. It is safe for concurrent use.
type Client struct {
	ssh  *ssh.Client
	conn net.Conn
	cfg  ClientConfig
	log  *slog.Logger

	// done is closed by watch when the SSH connection has ended; err says
	// why (nil after Close) and is written before done closes.
	done chan struct{}
	err  error
	host string // Auth.Host

	mu      sync.Mutex
	closing bool         // set by Close; track refuses new goroutines after it
	cause   error        // why we closed the connection ourselves (first wins)
	sftp    *sftpSession // the open SFTP session, if any; see sftpSession
	// wg counts every goroutine the client starts: watch, keepalive,
	// process waiters, spare openers, abandoned operations. Close waits
	// for it.
	wg sync.WaitGroup

	spareMu sync.Mutex
	spare   *ssh.Session // a session channel opened ahead for the next command
	// spareOpened is closed once the spare being opened is open (or
	// failed); nil while none is being opened. spareClaimed: a caller
	// waits for it (takeSpareWait).
	spareOpened  chan struct{}
	spareClaimed bool

	earlyData bool // the server takes early data (DialEarly)
	// earlyReqs: the server takes early requests (newSession).
	earlyReqs bool
	ours      bool // the server is this project's (OwnsSupervision)
	sftpErrno bool // the server's SFTP names every errno (sftpErrnoToken)
	// bindsAll is set once the server said that it binds remote forwards
	// on every address whatever was asked (sshd's GatewayPorts yes; see
	// remoteBindIP). Set by the connection's read loop.
	bindsAll *atomic.Bool
}

// Connect runs the SSH handshake over conn with the default ClientConfig.
// See ConnectConfig.
func Connect(ctx context.Context, conn net.Conn, auth Auth) (*Client, error) {
	return ConnectConfig(ctx, conn, auth, nil)
}

// ConnectConfig runs the SSH handshake over conn: key exchange, the pinned
// host key check, then public-key authentication. ctx bounds the handshake
// only. The client owns conn from now on: it is closed on failure and by
// Client.Close.
func ConnectConfig(ctx context.Context, conn net.Conn, auth Auth, cfg *ClientConfig) (*Client, error) {
	c, err := connect(ctx, conn, auth, cfg)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	return c, nil
}

func connect(ctx context.Context, conn net.Conn, auth Auth, cfg *ClientConfig) (*Client, error) {
	conf := cfg.withDefaults()
	hostKeyCallback, hostKeyAlgos, err := auth.hostKeyCallback()
	if err != nil {
		return nil, err
	}
	signer, err := auth.signer()
	if err != nil {
		return nil, err
	}
	user := auth.User
	if user == "" {
		user = DefaultUser
	}
	bindsAll := new(atomic.Bool)
	config := &ssh.ClientConfig{
		Config:            ssh.Config{Ciphers: preferredCiphers},
		User:              user,
		Auth:              []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback:   hostKeyCallback,
		HostKeyAlgorithms: hostKeyAlgos,
		ClientVersion:     "SSH-2.0-" + clientSoftware,
		// One key, which the server takes (a certificate the gateway
		// signed for this connection, or the key it was given): its
		// signed request goes behind the service request, without the
		// "none" probe or the key's query, half the round trips of a
		// connection's setup (BenchmarkConnectLatency).
		SignFirst: true,
		DebugCallback: func(msg string) {
			if gatewayPortsOverride(msg) {
				bindsAll.Store(true)
			}
		},
	}

	// Our own bound says so: a host whose path stalled read as "context
	// deadline exceeded", which a caller with minutes left took for its
	// own ctx's end. It still matches context.DeadlineExceeded.
	hctx, cancel := context.WithTimeoutCause(ctx, conf.HandshakeTimeout,
		fmt.Errorf("the host did not finish the SSH handshake within %v (the path to it stalled, or the host is overloaded): %w", conf.HandshakeTimeout, context.DeadlineExceeded))
	defer cancel()
	// Closing conn is the only way to interrupt a handshake blocked on a
	// silent peer.
	stop := context.AfterFunc(hctx, func() { _ = conn.Close() })
	// Over TCP (a direct session, sshd), raw reads and writes, as the
	// server's (see serveConn).
	sc, chans, reqs, err := ssh.NewClientConn(rawio.NewTCPConn(conn), "hostgate", config)
	if !stop() {
		if sc != nil {
			_ = sc.Close()
		}
		return nil, fmt.Errorf("sshlayer: handshake: %w", context.Cause(hctx))
	}
	if err != nil {
		if hm, ok := errors.AsType[*hostKeyMismatch](err); ok {
			return nil, hm.error
		}
		return nil, fmt.Errorf("sshlayer: handshake: %w", err)
	}

	c := &Client{
		ssh:  ssh.NewClient(sc, chans, reqs),
		conn: conn,
		cfg:  conf,
		log:  conf.Logger.With("remote", remoteAddr(conn)),
		done: make(chan struct{}),
		host: auth.Host,

		earlyData: takesEarlyData(sc.ServerVersion()),
		earlyReqs: takesEarlyRequests(sc.ServerVersion()),
		ours:      isHostgate(sc.ServerVersion()),
		sftpErrno: announces(sc.ServerVersion(), sftpErrnoToken),
		bindsAll:  bindsAll,
	}
	c.wg.Add(1)
	go c.watch()
	if conf.ForwardAgent != nil {
		chans := c.ssh.HandleChannelOpen(agentChannel)
		c.wg.Add(1)
		go c.serveAgent(chans)
	}
	if conf.KeepaliveInterval > 0 {
		c.wg.Add(1)
		go c.keepalive()
	}
	c.log.Debug("ssh connected", "server_version", string(sc.ServerVersion()))
	return c, nil
}

// remoteAddr names conn's peer for logs; some streams have no address.
func remoteAddr(conn net.Conn) string {
	if a := conn.RemoteAddr(); a != nil {
		return a.String()
	}
	return ""
}

// hostKeyCallback returns the check of the pinned host key and the host
// key algorithms to ask for: those of the pinned key's type when the pin
// is a public key, else hostKeyAlgorithms.
func (a *Auth) hostKeyCallback() (ssh.HostKeyCallback, []string, error) {
	if a.HostKey == "" {
		if a.InsecureSkipHostKeyCheck {
			return ssh.InsecureIgnoreHostKey(), hostKeyAlgorithms, nil
		}
		return nil, nil, errors.New("sshlayer: auth: HostKey is required (or InsecureSkipHostKeyCheck for an end-to-end authenticated stream)")
	}
	want, pinnedKey, err := parseHostKeyPin(a.HostKey)
	if err != nil {
		return nil, nil, fmt.Errorf("sshlayer: auth: host key: %w", err)
	}
	algos, pinned := hostKeyAlgorithms, a.HostKey
	if pinnedKey != nil {
		algos = algorithmsFor(pinnedKey)
		pinned = fmt.Sprintf("%s (%s key)", Fingerprint(pinnedKey), pinnedKey.Type())
	}
	// The callback runs inside key exchange, after the server proved it
	// holds the key and before the client sends its userauth request; an
	// error here aborts the handshake with nothing about the caller sent.
	return func(_ string, _ net.Addr, key ssh.PublicKey) error {
		if cert, ok := key.(*ssh.Certificate); ok {
			key = cert.Key
		}
		got := sha256.Sum256(key.Marshal())
		if subtle.ConstantTimeCompare(got[:], want) == 1 {
			return nil
		}
		err := fmt.Errorf("%w: host presented its %s key %s, pinned %s", ErrHostKeyMismatch, key.Type(), Fingerprint(key), pinned)
		if pinnedKey == nil {
			// The likeliest innocent cause: the pin is another of this
			// host's keys, of a type the client asked for later.
			err = fmt.Errorf("%w; if the pin is this host's key of another type (RSA, ECDSA), pin that public key itself (the line of its .pub file) so that the client asks for its type", err)
		}
		return &hostKeyMismatch{err}
	}, algos, nil
}

// hostKeyMismatch is the host key callback's refusal, which Connect
// returns as it is: x/crypto's "ssh: handshake failed: " and Connect's
// "sshlayer: handshake: " would only stack prefixes before
// "sshlayer: host key mismatch: host presented …".
type hostKeyMismatch struct{ error }

func (e *hostKeyMismatch) Unwrap() error { return e.error }

// parseHostKeyPin parses Auth.HostKey: a fingerprint gives its hash, a
// public key line its hash and the key.
func parseHostKeyPin(s string) ([]byte, ssh.PublicKey, error) {
	if strings.HasPrefix(s, fingerprintPrefix) {
		want, err := ParseFingerprint(s)
		return want, nil, err
	}
	pub, _, options, rest, err := ssh.ParseAuthorizedKey([]byte(s))
	if err != nil || len(options) > 0 || len(strings.TrimSpace(string(rest))) > 0 {
		return nil, nil, fmt.Errorf("%w, or a public key line such as \"ssh-ed25519 AAAA…\"", ErrBadFingerprint)
	}
	if _, ok := pub.(*ssh.Certificate); ok {
		return nil, nil, errors.New("a certificate cannot be pinned: pin the host's own public key or its fingerprint")
	}
	want := sha256.Sum256(pub.Marshal())
	return want[:], pub, nil
}

// algorithmsFor is the host key algorithms that make a server present a
// key of pub's type.
func algorithmsFor(pub ssh.PublicKey) []string {
	if pub.Type() == ssh.KeyAlgoRSA {
		// The key type names SHA-1 signatures; ask for SHA-2 ones, as
		// hostKeyAlgorithms does.
		return []string{ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSASHA512}
	}
	return []string{pub.Type()}
}

// watch waits for the SSH connection to end and publishes why.
func (c *Client) watch() {
	defer c.wg.Done()
	werr := c.ssh.Wait()
	c.mu.Lock()
	switch {
	case c.cause != nil:
		c.err = c.cause
	case werr == nil:
		c.err = ErrConnectionLost
	default:
		c.err = fmt.Errorf("%w: %w", ErrConnectionLost, werr)
	}
	// Unless the cause names the host already (the gateway's reason for
	// ending the relay does).
	if c.host != "" && !errors.Is(c.err, ErrClientClosed) && !strings.Contains(c.err.Error(), "host "+c.host+":") {
		c.err = fmt.Errorf("host %s: %w", c.host, c.err)
	}
	closing := c.closing
	c.mu.Unlock()
	if !closing {
		c.log.Debug("ssh connection ended", "err", c.err)
	}
	close(c.done)
}

// fail closes the connection for cause; the first cause wins.
func (c *Client) fail(cause error) {
	c.mu.Lock()
	if c.cause == nil {
		c.cause = cause
	}
	c.mu.Unlock()
	_ = c.ssh.Close()
}

// keepalive sends keepalive@openssh.com every interval and closes the
// connection after KeepaliveMaxMissed intervals without an answer. At most
// one request is in flight: SendRequest blocks forever on a dead transport,
// so it runs in its own goroutine raced against the ticker, and closing the
// connection is what releases it.
func (c *Client) keepalive() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.KeepaliveInterval)
	defer t.Stop()
	var (
		reply  chan error // nil when no request is in flight
		missed int
	)
	for {
		select {
		case <-c.done:
			return
		case err := <-reply:
			reply = nil
			if err != nil {
				return // the connection is ending; watch reports why
			}
			missed = 0
		case <-t.C:
			if reply != nil {
				missed++
				if missed >= c.cfg.KeepaliveMaxMissed {
					d := c.cfg.KeepaliveInterval * time.Duration(missed)
					c.log.Warn("ssh keepalive timeout, closing connection", "silent_for", d)
					c.fail(&keepaliveError{silent: d})
					<-reply
					return
				}
				continue
			}
			reply = make(chan error, 1)
			c.wg.Add(1)
			go func(reply chan<- error) {
				defer c.wg.Done()
				// Any reply, success or failure, proves the peer is alive
				// (OpenSSH answers this request with a failure).
				_, _, err := c.ssh.SendRequest("keepalive@openssh.com", true, nil)
				reply <- err
			}(reply)
		}
	}
}

// keepaliveError is why a connection whose peer went silent was closed. It
// matches ErrConnectionLost and ErrKeepaliveTimeout, and is a net.Error
// whose Timeout is true.
type keepaliveError struct{ silent time.Duration }

var _ net.Error = (*keepaliveError)(nil)

func (e *keepaliveError) Error() string {
	return fmt.Sprintf("sshlayer: connection lost: keepalive timeout: no reply for %v", e.silent)
}
func (e *keepaliveError) Is(target error) bool {
	return target == ErrConnectionLost || target == ErrKeepaliveTimeout
}
func (e *keepaliveError) Timeout() bool   { return true }
func (e *keepaliveError) Temporary() bool { return false }

// track registers one more goroutine with the client; false once Close has
// started (the caller must not start it).
func (c *Client) track() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return false
	}
	c.wg.Add(1)
	return true
}

// usable reports why the client cannot take new work, or nil.
func (c *Client) usable() error {
	select {
	case <-c.done:
		return c.endErr()
	default:
		return nil
	}
}

// endErr is why the connection ended; only valid after done closed.
func (c *Client) endErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing && c.cause == nil {
		return ErrClientClosed
	}
	return c.err
}

// Close closes the connection, every process, forward and the SFTP client
// with it, and waits for the client's goroutines. It is idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		<-c.done
		return nil
	}
	c.closing = true
	if c.cause == nil {
		c.cause = ErrClientClosed
	}
	s := c.sftp
	c.mu.Unlock()
	// The connection first: closing the SFTP channel on a silent peer could
	// block on a full send buffer; on a closed connection it returns at once.
	_ = c.ssh.Close()
	if s != nil {
		_ = s.cli.Close()
	}
	c.wg.Wait()
	if s, ok := c.takeSpare(); ok {
		_ = s.Close() // its channel went with the connection
	}
	return nil
}

// Wait blocks until the connection ends and returns why: nil after Close,
// otherwise an error matching ErrConnectionLost (and ErrKeepaliveTimeout
// when keepalives failed).
func (c *Client) Wait() error {
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	if errors.Is(c.err, ErrClientClosed) {
		return nil
	}
	return c.err
}

// Done is closed when the connection has ended.
func (c *Client) Done() <-chan struct{} { return c.done }

// SSH returns the underlying x/crypto client, an escape hatch for what this
// package does not wrap. Closing it closes the Client's connection.
func (c *Client) SSH() *ssh.Client { return c.ssh }

// OwnsSupervision reports whether the server is one of this project's,
// which run each command in a session of its own that dies with the
// channel, and report exit only after remote termination, so hosts need
// no watchdog on top. OpenSSH's sshd does neither (a command whose
// channel closes runs on), so a persistent host over it gets the
// watchdog.
func (c *Client) OwnsSupervision() bool { return c.ours }

// isHostgate reports whether an SSH version string is this project's
// server or client: software version serverSoftware or clientSoftware (a
// server older than serverSoftware's), with or without comments.
func isHostgate(version []byte) bool {
	v, ok := strings.CutPrefix(string(version), "SSH-2.0-")
	v, _, _ = strings.Cut(v, " ")
	return ok && (v == clientSoftware || v == serverSoftware)
}

// await runs op (a blocking SSH round trip that takes no ctx) in a goroutine
// owned by the client and returns its result, or ctx's error when ctx ends
// first; a result that arrives after the caller gave up is passed to undo.
// op itself is bounded by the connection: closing it fails every pending
// request.
func await[T any](ctx context.Context, c *Client, op func() (T, error), undo func(T)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	if err := c.usable(); err != nil {
		return zero, err
	}
	if !c.track() {
		return zero, ErrClientClosed
	}
	type result struct {
		v   T
		err error
	}
	var (
		mu     sync.Mutex
		gaveUp bool
		ch     = make(chan result, 1)
	)
	go func() {
		defer c.wg.Done()
		v, err := op()
		mu.Lock()
		defer mu.Unlock()
		if gaveUp {
			if err == nil && undo != nil {
				undo(v)
			}
			return
		}
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		select {
		case r := <-ch:
			return r.v, r.err
		default:
			gaveUp = true
			return zero, context.Cause(ctx)
		}
	}
}
