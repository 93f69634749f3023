// Package agent is the agent's runtime: serving the embedded SSH server
// over a listener, stdio or a dialed-out tunnel to the gateway, and, beside
// the tunnel, on a direct listener whose connections the gateway admits
// (direct.go).
package agent

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/buildinfo"
	"github.com/hostgate/hostgate/internal/durable"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/tlshint"
	"github.com/hostgate/hostgate/internal/yamux"
	"github.com/hostgate/hostgate/sshlayer"
)

// Files `agent connect` keeps in its state directory.
const (
	HostKeyFile   = "host_key"       // the agent's SSH host key (OpenSSH PEM, 0600)
	GatewayCAFile = "gateway_ca.pub" // the gateway's user CA, pinned on first enrollment (0600)
)

// Connect backoff defaults: quick to come back after a gateway restart,
// gentle on a gateway that is down for long.
const (
	DefaultMinBackoff = 500 * time.Millisecond
	DefaultMaxBackoff = 30 * time.Second
)

// ErrCAChanged means the gateway presented a user CA other than the one
// pinned on first enrollment; the agent refuses to serve it. Delete
// GatewayCAFile in the state directory to accept a new gateway.
var ErrCAChanged = errors.New("agent: gateway CA differs from the pinned one")

// ConnectConfig configures Connect.
type ConnectConfig struct {
	// GatewayURL is the gateway's base URL: http(s):// or ws(s)://.
	GatewayURL string
	// RootCAs are the CAs the gateway's TLS certificate is checked
	// against (--ca-file: the system's and a private one); nil: the
	// system's.
	RootCAs *x509.CertPool
	// Token is an agent token; it names the host id.
	Token string
	// HostID, when set, must be the id the token enrolls.
	HostID string
	// StateDir holds HostKeyFile and GatewayCAFile. Required.
	StateDir string
	// Info is sent on enrollment; zero fields are filled from this machine.
	Info hostgate.Info
	// Logger receives the agent's logs; nil discards them.
	Logger *slog.Logger
	// Shell runs commands and interactive shells; empty means
	// sshlayer.DefaultShell (/bin/sh).
	Shell string
	// MinBackoff, MaxBackoff bound the wait between attempts; zero means
	// the defaults.
	MinBackoff, MaxBackoff time.Duration
	// NoAgentForwarding refuses every session's request to forward the
	// caller's SSH agent (ssh -A), which is otherwise granted to a
	// certificate with permit-agent-forwarding (sshd's
	// AllowAgentForwarding no).
	NoAgentForwarding bool
	// KeepBackground lets what a command starts in the background (cmd &,
	// nohup) outlive the command and its connection, as under sshd,
	// instead of ending with it (sshlayer.ServerConfig.KeepBackground);
	// the guard that kills a killed agent's commands is not started.
	KeepBackground bool
	// Direct, when set, is the address of the agent's direct listener
	// (`--direct`: ":2222", "10.0.0.5:2222", "127.0.0.1:0"), whose
	// callers run their SSH sessions on it instead of through the
	// gateway's relay, each admitted by the gateway over the tunnel (see
	// direct.go). DirectAdvertise, when set, is the comma-separated
	// host:port list the agent tells the gateway callers reach it at;
	// without it, the listen address when its host is specific, else this
	// machine's addresses.
	Direct, DirectAdvertise string
	// Server adjusts the SSH server config before each tunnel is served
	// (HostKey, TrustedUserCAs, Principal and Logger are already set).
	Server func(*sshlayer.ServerConfig)
	// OnTunnel, when set, is called each time a tunnel is up (tests,
	// readiness reporting). It must not block.
	OnTunnel func(hostID string)
}

// Connect dials the gateway, enrolls, and serves the embedded SSH server on
// every stream the gateway opens; when the tunnel ends it reconnects with
// exponential backoff and jitter, forever, until ctx ends (then it closes
// the tunnel, waits for every session and returns nil). An ended tunnel's
// commands wind down in the background, not holding up the next tunnel;
// Connect returns only once they are gone. It returns an error only for a
// configuration it cannot run with.
func Connect(ctx context.Context, cfg *ConnectConfig) error {
	c, err := newConnector(cfg)
	if err != nil {
		return err
	}
	// Nothing a tunnel started outlives the agent.
	defer c.windDowns.Wait()
	if cfg.Direct != "" {
		if c.direct, err = listenDirect(cfg, c.log); err != nil {
			return err
		}
		defer c.direct.close()
	} else if cfg.DirectAdvertise != "" {
		return errors.New("agent: --direct-advertise without --direct: give the direct listener's address with --direct")
	}
	backoff := c.min
	// The failure last logged and how often it came again since: an agent
	// that cannot connect for hours (revoked token, changed CA, gateway
	// down) says why once, not once per attempt.
	var (
		lastErr, lastKey string // lastKey: failureKey's
		repeats          int
	)
	standby := false // another agent took the host's tunnel over: ask only while it has none
	for {
		// Atomic: with a host key to prove, the tunnel's first
		// connection reports it up, from its own goroutine. A time.Time
		// keeps the monotonic reading: as UnixNano, a wall clock stepped
		// (NTP) made a long tunnel look short, or one that died at once
		// healthy.
		var upAt atomic.Pointer[time.Time]
		err := c.once(ctx, &standby, func() { now := time.Now(); upAt.Store(&now) })
		if ctx.Err() != nil {
			c.stopping(ctx, upAt.Load() != nil)
			return nil
		}
		if errors.Is(err, errReplaced) {
			standby = true
		}
		if upAt.Load() != nil {
			c.downSince, c.failed = time.Now(), 0
		} else {
			c.failed++
		}
		if at := upAt.Load(); at != nil && time.Since(*at) > c.max {
			// A tunnel that outlived the longest wait between attempts
			// ended for a new reason, whatever it says; a shorter one
			// (two agents with one identity taking turns) is the same
			// failure again.
			lastErr, lastKey, repeats = "", "", 0
		}
		// A tunnel that stayed up a while was healthy: come back fast
		// (a gateway restart). One that dies at once keeps backing off.
		if at := upAt.Load(); at != nil && time.Since(*at) >= healthyTunnel {
			backoff = c.min
		}
		var ref *refusal
		isRef := errors.As(err, &ref)
		if isRef && ref.slowDown() || errors.Is(err, ErrCAChanged) {
			// Asking again soon cannot help, and counts against the
			// agent's address at the gateway.
			backoff = c.max
		}
		if isRef && ref.standingBy() || errors.Is(err, errReplaced) {
			// Not a failure: the wait is how soon this agent serves the
			// host after the other one's end.
			backoff = min(standbyPoll, c.max)
		}
		wait := jitter(backoff)
		args := []any{"err", err, "in", wait.Round(time.Millisecond)}
		key := failureKey(err)
		switch {
		case key == lastKey:
			repeats++
			c.log.Debug("gateway tunnel failed again; reconnecting", append(args, "repeats", repeats)...)
		case isRef && ref.standingBy():
			c.log.Info("standing by: another agent serves this host; this one serves it when that one's tunnel ends, logging again only when that changes", append(args, previous(lastErr, repeats)...)...)
		case errors.Is(err, ErrCAChanged):
			c.log.Error("this agent refuses the gateway, and will until the gateway's CA is restored or the pinned one deleted; retrying with backoff, logging again only when the error changes", append(args, previous(lastErr, repeats)...)...)
		case ref != nil && ref.lasting():
			c.log.Error("the gateway refuses this agent, and will until its token (or, for a host key conflict, the pinned key) is fixed; retrying with backoff, logging again only when the error changes", append(args, previous(lastErr, repeats)...)...)
		default:
			c.log.Warn("gateway tunnel ended; reconnecting with backoff, logging again only when the error changes", append(args, previous(lastErr, repeats)...)...)
		}
		if key != lastKey {
			lastErr, lastKey, repeats = err.Error(), key, 0
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			c.stopping(ctx, false)
			return nil
		case <-t.C:
		}
		backoff = min(backoff*2, c.max)
	}
}

// stopping logs that the agent stops (ctx ended: SIGTERM, SIGINT), which
// it did not: its log ended with the last tunnel's news. served: a
// tunnel was up, whose end the gateway was told of (tunnel.stopping).
func (c *connector) stopping(ctx context.Context, served bool) {
	if served {
		c.log.Info("agent stopping: closed its tunnel, telling the gateway it stops; the tunnel's sessions end and their commands are killed", "cause", context.Cause(ctx))
		return
	}
	c.log.Info("agent stopping", "cause", context.Cause(ctx))
}

// previous names the failure a new one follows, and how often it came
// again unlogged.
func previous(lastErr string, repeats int) []any {
	if lastErr == "" {
		return nil
	}
	return []any{"previousErr", lastErr, "previousRepeats", repeats}
}

// localPort is the port of a connection's local end in the errors of its
// reads and writes (net.OpError's "tcp 10.0.0.2:52278->203.0.113.5:443").
var localPort = regexp.MustCompile(`:[0-9]+->`)

// checkedAt is the time crypto/x509 names in the error of a certificate
// outside its validity ("current time 2026-12-07T21:41:47Z is after …").
var checkedAt = regexp.MustCompile(`current time [^ ]+ is`)

// failureKey is what tells one failure from another: err's words but
// what each attempt has of its own, the local port (a new ephemeral one)
// and the time a certificate was checked at. A gateway's address that
// reset every connection (a load balancer without a healthy target), or
// whose certificate expired, was a new failure each time, logged at every
// attempt for as long as it lasted.
func failureKey(err error) string {
	k := localPort.ReplaceAllString(err.Error(), "->")
	return checkedAt.ReplaceAllString(k, "current time is")
}

// jitter picks uniformly in [d/2, d], so agents cut off together do not
// come back together.
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}

// UserAgent is what the agent says it is when it connects: its build, as
// agent version prints it.
func UserAgent() string { return "hostgate-agent (" + buildinfo.Version() + ")" }

type connector struct {
	cfg      ConnectConfig
	log      *slog.Logger
	url      string
	min, max time.Duration
	hostKey  ssh.Signer
	header   http.Header
	token    string // the bearer token, which the key signature names
	// windDowns are the ended tunnels whose connections and commands are
	// still winding down.
	windDowns sync.WaitGroup
	// downSince is when the last tunnel ended (zero before the first),
	// and failed how many attempts failed since: the next "tunnel up"
	// says how long the host was offline, which an operator restarting
	// the gateway otherwise read off two lines' times, the first of them
	// often hours back (failures are logged once). Set by Connect
	// between attempts, read by the attempt's tunnelUp.
	downSince time.Time
	failed    int
	// direct is the direct listener (--direct); nil without one.
	direct *directListener
}

func newConnector(cfg *ConnectConfig) (*connector, error) {
	if cfg == nil || cfg.GatewayURL == "" || strings.TrimSpace(cfg.Token) == "" || cfg.StateDir == "" {
		return nil, errors.New("agent: connect needs a gateway URL, a token and a state directory")
	}
	c := &connector{cfg: *cfg, log: cfg.Logger, min: cfg.MinBackoff, max: cfg.MaxBackoff}
	// Trimmed as the token is: an id read from a file (a ConfigMap's
	// env var) kept its newline, which net/http refused in the header at
	// every dial, retried for ever as if the network failed.
	c.cfg.HostID = strings.TrimSpace(cfg.HostID)
	if strings.IndexFunc(c.cfg.HostID, unicode.IsControl) >= 0 {
		return nil, fmt.Errorf("--host-id (HOSTGATE_HOST_ID) %q holds a control character: give the host's id alone, as `gateway token create --role agent --host ID` named it", c.cfg.HostID)
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.min <= 0 {
		c.min = DefaultMinBackoff
	}
	if c.max <= 0 {
		c.max = DefaultMaxBackoff
	}
	c.max = max(c.max, c.min)
	u, err := gatewayURL(cfg.GatewayURL)
	if err != nil {
		return nil, err
	}
	u.Path = strings.TrimRight(u.Path, "/") + wire.ConnectPath
	c.url = u.String()
	if err := checkNotGatewayState(cfg.StateDir); err != nil {
		return nil, err
	}
	if err := makeStateDir(cfg.StateDir); err != nil {
		return nil, err
	}
	if err := protectStateDir(cfg.StateDir, c.log); err != nil {
		return nil, err
	}
	if c.hostKey, err = loadOrCreateHostKey(filepath.Join(cfg.StateDir, HostKeyFile), c.log); err != nil {
		return nil, err
	}
	info := fillInfo(cfg.Info)
	c.header = http.Header{}
	// Trimmed for the header too: a token file's newline, kept by an
	// environment variable made of the file, made every dial fail in
	// net/http ("invalid header field value"), retried for ever.
	c.token = strings.TrimSpace(cfg.Token)
	c.header.Set("Authorization", "Bearer "+c.token)
	// The build, for the gateway's tunnel up line (and a proxy's access
	// log): in a rolling upgrade, which hosts run an old agent.
	c.header.Set("User-Agent", UserAgent())
	c.header.Set(wire.HeaderHostKey, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(c.hostKey.PublicKey()))))
	c.header.Set(wire.HeaderInfo, wire.EncodeInfo(info))
	if c.cfg.HostID != "" {
		c.header.Set(wire.HeaderHostID, c.cfg.HostID)
	}
	// This agent reads a caller preamble on each stream, if the gateway
	// answers that it sends them.
	c.header.Set(wire.HeaderCallerPreamble, wire.CallerPreambleProxyV1)
	if cfg.NoAgentForwarding {
		// The gateway's certificates for this host then say so.
		c.header.Set(wire.HeaderAgentForwarding, wire.AgentForwardingOff)
	}
	c.log = c.log.With("gateway", cfg.GatewayURL, "hostKey", sshlayer.Fingerprint(c.hostKey.PublicKey()))
	if (u.Scheme == "http" || u.Scheme == "ws") && !loopbackHost(u.Hostname()) {
		// Allowed (a private network, a gateway behind a proxy on
		// another port), but never silently: the CA is pinned on first
		// use, so whoever answers that first connection in between
		// gets to log in to this machine.
		c.log.Warn("the gateway URL is plain " + u.Scheme + "://: this agent's token, and its first pin of the gateway's CA, cross the network unencrypted, so whoever is on the path can take the token or pin a CA of theirs; give the gateway's https:// URL (a TLS-terminating proxy in front of it, or gateway serve --tls-cert)")
	}
	return c, nil
}

// gatewayURL parses the gateway's base URL (--gateway). What it refuses
// it quotes only where no credentials can be in it: url.Parse's error
// quotes the URL whole, and "TOKEN:x@gw" parses as the scheme TOKEN.
// Credentials before an '@' are refused: the agent never sent them (its
// bearer token is the request's Authorization, which net/http then
// leaves alone), and the URL is in every log line.
func gatewayURL(raw string) (*url.URL, error) {
	const want = "want https://HOST[:PORT] (or http://, ws://, wss://), the gateway's --public-url"
	u, err := url.Parse(strings.TrimRight(raw, "/"))
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL
		}
		return nil, fmt.Errorf("gateway URL (--gateway, HOSTGATE_GATEWAY) is not a URL (%v): %s", err, want)
	}
	switch u.Scheme {
	case "http", "https", "ws", "wss":
	default:
		return nil, fmt.Errorf("gateway URL (--gateway, HOSTGATE_GATEWAY) does not begin with https://, http://, wss:// or ws://: %s", want)
	}
	if u.User != nil {
		return nil, errors.New("gateway URL (--gateway, HOSTGATE_GATEWAY) holds credentials before an '@', which are never sent (the token is, by --token or HOSTGATE_TOKEN) and would be written into every log line: give the URL without them")
	}
	if u.Host == "" {
		return nil, fmt.Errorf("gateway URL (--gateway, HOSTGATE_GATEWAY) %q names no host: %s", raw, want)
	}
	return u, nil
}

// loopbackHost reports whether host (a URL's, without port) is this
// machine: localhost or a loopback address.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// makeStateDir makes dir (0700) where it is missing. One it cannot make
// is most often a service's User= that may not write /var/lib, where
// systemd makes it for that user given StateDirectory=.
func makeStateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("--state-dir %s could not be made (%w): create it for the agent's user (a systemd service's StateDirectory=hostgate-agent makes /var/lib/hostgate-agent for its User=), or give a --state-dir that user may write", dir, err)
	}
	return nil
}

// protectStateDir takes group and others' write permission off dir, the
// state directory, when it has them, saying so: whoever may write it can
// swap the host key for one they hold (the file's mode is checked, its
// owner is not) or plant the pin before the first enrollment. Its
// other bits are left: the files in it are 0600. A shared directory
// (sticky, as /tmp) or one this user may not change is refused, naming
// the fix. A missing one is left to its creator.
func protectStateDir(dir string, log *slog.Logger) error {
	st, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("agent: state dir: %w", err)
	}
	was := st.Mode().Perm()
	if !st.IsDir() || was&0o022 == 0 {
		return nil
	}
	if st.Mode()&fs.ModeSticky != 0 {
		// A shared directory (/tmp): others' write is what it is for,
		// and taking it off would break it for every user.
		return fmt.Errorf("agent: state dir %s is a shared directory (%v): others may create the host key or the pin before the agent does; give a --state-dir of the agent's own (the default, or a directory in this one)", dir, st.Mode())
	}
	now := was &^ 0o022
	if err := os.Chmod(dir, now); err != nil {
		return fmt.Errorf("agent: state dir %s is writable by group or others (%#o), and could not be made %#o (%w): whoever may write it can replace the host key; chmod go-w it as its owner, or give a --state-dir of this user's own", dir, was, now, err)
	}
	if log != nil {
		log.Warn("the state dir was writable by group or others: took their write permission off, since whoever may write it can replace the host key", "dir", dir, "was", fmt.Sprintf("%#o", was), "now", fmt.Sprintf("%#o", now))
	}
	return nil
}

// checkNotGatewayState refuses a state directory that is a gateway's.
func checkNotGatewayState(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, wire.GatewayStateFile)); err == nil {
		return fmt.Errorf("agent: state dir %s is a gateway's (it holds %s): give the agent its own --state-dir (HOSTGATE_STATE_DIR, if exported for the gateway, is read by the agent too)", dir, wire.GatewayStateFile)
	}
	return nil
}

// fillInfo completes info from this machine.
func fillInfo(info hostgate.Info) hostgate.Info {
	if info.Kind == "" {
		// A machine outlives every session to it: callers use Persistent
		// to decide what to clean up (Spawn's watchdog is not needed, as
		// the agent ends each command's session with its connection).
		info.Kind = "machine"
		info.Persistent = true
	}
	if info.OS == "" {
		info.OS = runtime.GOOS
	}
	if info.Home == "" {
		info.Home, _ = os.UserHomeDir()
	}
	if info.TempDir == "" {
		info.TempDir = os.TempDir()
	}
	if info.Workspace == "" {
		info.Workspace = info.Home
	}
	return info
}

// refusal is the gateway's error answer to the agent's connect.
type refusal struct {
	status    int
	code, msg string
}

func (r *refusal) Error() string {
	return fmt.Sprintf("gateway refused the agent (%d %s): %s", r.status, r.code, r.msg)
}

// lasting reports whether the refusal stays until a person acts: a bad,
// revoked or expired token, a token for another host, a host key other
// than the pinned one.
func (r *refusal) lasting() bool {
	return r.status == http.StatusUnauthorized || r.status == http.StatusForbidden ||
		(r.status == http.StatusConflict && !r.standingBy())
}

// standingBy reports whether the gateway turned a standby attempt away
// because another agent's tunnel serves the host.
func (r *refusal) standingBy() bool {
	return r.status == http.StatusConflict && r.code == wire.CodeHostServed
}

// standbyPoll is how long a standing-by agent waits between attempts (at
// most MaxBackoff): how long, plus the gateway's keepalive for a tunnel
// that died without a word, the host may be offline after the serving
// agent's end.
const standbyPoll = 5 * time.Second

// slowDown reports whether the next attempt should wait the longest
// backoff: a lasting refusal, or a rate limit.
func (r *refusal) slowDown() bool {
	return r.lasting() || r.status == http.StatusTooManyRequests
}

// dialTimeout bounds a dial to the gateway, from the TCP connection to
// the WebSocket handshake's answer.
var dialTimeout = bytestream.DefaultHandshakeTimeout // a var for tests

// healthyTunnel is how long a tunnel must have stayed up for the next
// attempt to start again from the minimum backoff.
const healthyTunnel = 5 * time.Second

// once runs one tunnel: dial, check the CA, serve until it ends. up is
// called when the tunnel is established.
//
// standby asks for the tunnel only while the host has none, and is
// cleared once the gateway gave it: the gateway registered this tunnel
// for the host, so a tunnel that fails from here on (this agent's CA
// check, its network) must be replaced by the next attempt, not waited
// behind until the gateway's keepalive ends it.
func (c *connector) once(ctx context.Context, standby *bool, up func()) error {
	h := c.header.Clone()
	if c.direct != nil {
		h.Set(wire.HeaderDirect, strings.Join(c.direct.currentAdvertise(), ","))
	}
	if *standby {
		h.Set(wire.HeaderStandby, wire.StandbyOn)
	}
	// A fresh signature per dial (it carries its time): a gateway that
	// has not pinned the key pins it on this, with no SSH key exchange.
	if sig, err := wire.SignKey(c.hostKey, c.token, h.Get(wire.HeaderHostID), time.Now()); err == nil {
		h.Set(wire.HeaderKeySignature, sig)
	}
	// The dial's own bound, not a ctx of ours: one that ends says that no
	// answer came (a path that died, a frozen gateway), where a 30 s ctx
	// here logged "context deadline exceeded".
	conn, resp, err := bytestream.DialWebSocket(ctx, c.url, &bytestream.WebSocketOptions{Header: h, HandshakeTimeout: dialTimeout, RootCAs: c.cfg.RootCAs})
	if err != nil {
		var he *bytestream.HandshakeError
		if errors.As(err, &he) {
			if we, ok := wire.ParseError([]byte(he.Body)); ok {
				return &refusal{status: he.StatusCode, code: we.Code, msg: we.Message}
			}
			if he.StatusCode == http.StatusNotFound {
				// Not the gateway's JSON: something else answers there.
				return fmt.Errorf("%s answered 404: check that the gateway URL is the gateway's --public-url, with no path beyond the gateway's own", c.url)
			}
			return errors.New(wire.ForeignAnswer(he.StatusCode, he.Body))
		}
		return tlshint.Wrap(err)
	}
	defer conn.Close()
	stoodBy := *standby
	*standby = false // the gateway took this tunnel for the host
	hostID := resp.Header.Get(wire.HeaderHostID)
	if hostID == "" || (c.cfg.HostID != "" && hostID != c.cfg.HostID) {
		return fmt.Errorf("agent: gateway enrolled host %q, want %q", hostID, c.cfg.HostID)
	}
	ca, err := c.pinCA(resp.Header.Get(wire.HeaderCAKey))
	if err != nil {
		if errors.Is(err, ErrCAChanged) {
			// Said to the gateway, whose log showed a tunnel up and then
			// down with EOF and no reason.
			_ = bytestream.CloseWithReason(conn, bytestream.StatusPolicyViolation,
				"agent refuses this gateway: its CA differs from the one the agent pinned (a new gateway state directory?)")
		}
		return err
	}
	scfg := &sshlayer.ServerConfig{
		HostKey:          c.hostKey,
		TrustedUserCAs:   []ssh.PublicKey{ca},
		Principal:        hostID,
		Logger:           c.log.With("host", hostID),
		Shell:            c.cfg.Shell,
		SFTPReuseBuffers: true, // a machine, not a sandbox's memory limit
		AgentForwarding:  !c.cfg.NoAgentForwarding,
		KeepBackground:   c.cfg.KeepBackground,
	}
	if c.cfg.Server != nil {
		c.cfg.Server(scfg)
	}
	srv, err := sshlayer.NewServer(scfg)
	if err != nil {
		return err
	}
	// The direct listener's gate for this tunnel, put in service once the
	// tunnel is up and out of it when the tunnel ends.
	directUp := func(*yamux.Session) {}
	if c.direct != nil {
		gate := c.direct.newGate(srv, resp.Header.Get(wire.HeaderDirect) == wire.DirectOn, c.log.With("host", hostID))
		defer gate.end()
		directUp = gate.start
	}
	var isUp atomic.Bool
	tunnelUp := func() {
		isUp.Store(true)
		args := []any{"host", hostID, "version", buildinfo.Version()}
		switch {
		case stoodBy && !c.downSince.IsZero():
			// Another agent served the host meanwhile: it was not offline
			// that long, and the turned-away attempts were no failures.
			args = append(args, "stoodBy", time.Since(c.downSince).Round(time.Millisecond))
		case !c.downSince.IsZero():
			args = append(args, "offline", time.Since(c.downSince).Round(time.Millisecond), "failedAttempts", c.failed)
		}
		c.log.Info("tunnel up", args...)
		up()
		if c.cfg.OnTunnel != nil {
			c.cfg.OnTunnel(hostID)
		}
	}
	var proved func(ran bool, sess *yamux.Session)
	if resp.Header.Get(wire.HeaderKeyProof) != "" {
		// The gateway pins our host key only once we have signed an SSH
		// key exchange with it, on the first stream, and ends that
		// connection when the host is routable: up only then.
		c.log.Info("gateway checks that this agent holds its host key before pinning it", "host", hostID, "hostKey", ssh.FingerprintSHA256(c.hostKey.PublicKey()))
		proved = func(ran bool, sess *yamux.Session) {
			if ran && !sess.IsClosed() {
				directUp(sess)
				tunnelUp()
			}
		}
	}
	var opened func(*yamux.Session)
	if proved == nil {
		// Up once the direct listener's gate is in service too: a caller
		// told the host is up finds its direct sessions admitted.
		opened = func(sess *yamux.Session) {
			directUp(sess)
			tunnelUp()
		}
	}
	// Agent side of the tunnel: the gateway opens streams, one per SSH
	// connection; the agent opens one only, the direct sessions' control
	// stream, when the gateway admits them.
	// The gateway names each stream's caller only when it says so: an
	// older one sends no preamble, whatever this agent asked.
	callers := resp.Header.Get(wire.HeaderCallerPreamble) == wire.CallerPreambleProxyV1
	wait, err := serveMux(ctx, conn, srv, nil, tunnel{callers: callers, log: c.log.With("host", hostID), first: proved, opened: opened, stopping: wire.AgentStopping})
	// The tunnel's commands get EOF, then SIGHUP, then SIGKILL, a
	// KillGrace apart: up to 2 s by default. Waiting for that before
	// redialing kept the host offline as long. Closing the server
	// after its connections are gone kills whatever they left running.
	c.windDowns.Go(func() {
		wait()
		_ = srv.Close()
	})
	if err != nil {
		return err
	}
	if !isUp.Load() {
		return errors.New("the gateway closed the tunnel before pinning this agent's host key: another agent may have enrolled this host first (its log says host_key_mismatch on the next try), or the key proof failed (the gateway's log says why)")
	}
	// A gateway that ends a tunnel says why in its close frame (revoked,
	// replaced, stopping; serveMux returns that). Here the connection
	// ended without one: a proxy restarting in between looked like the
	// gateway closing it.
	return errConnLost
}

// errConnLost is the end of a tunnel whose connection closed without the
// gateway's close frame.
var errConnLost = errors.New("the tunnel's connection ended without the gateway saying why: the gateway was killed or crashed, a proxy in between restarted, or the network dropped it")

// gatewayEnded is the error of a tunnel the gateway closed saying why.
func gatewayEnded(ce *bytestream.CloseError) error {
	if ce.Code == wire.CloseReplaced {
		// This agent did not reconnect (it had this one tunnel), so
		// another one did: with this host's token and key, elsewhere.
		return fmt.Errorf("%w (%s): this one stands by, and serves the host when that one's tunnel ends; stop one of them if two are not meant", errReplaced, ce.Reason)
	}
	return fmt.Errorf("the gateway ended the tunnel: %s", ce.Reason)
}

// errReplaced is a tunnel that another agent of the host took over: the
// next attempts ask to stand by (wire.HeaderStandby) until this agent
// serves the host again. Taking the tunnel back at once, as agents did,
// made two agents of one host take turns for ever, each turn cutting the
// host's sessions.
var errReplaced = errors.New("another agent serves this host with this agent's token and host key, and took over its tunnel")

// pinCA parses the gateway's CA key and compares it with the pinned one,
// pinning it (0600) on first enrollment.
func (c *connector) pinCA(header string) (ssh.PublicKey, error) {
	ca, _, _, rest, err := ssh.ParseAuthorizedKey([]byte(header))
	if err != nil || len(bytes.TrimSpace(rest)) != 0 {
		return nil, fmt.Errorf("agent: gateway sent no usable CA key (%s)", wire.HeaderCAKey)
	}
	// A certificate never signs one (user certificates name a plain
	// key): pinned, it would refuse every login until the pin is deleted.
	if _, ok := ca.(*ssh.Certificate); ok {
		return nil, fmt.Errorf("agent: gateway sent a certificate, not a CA key (%s); nothing pinned", wire.HeaderCAKey)
	}
	path := filepath.Join(c.cfg.StateDir, GatewayCAFile)
	line := ssh.MarshalAuthorizedKey(ca)
	pinned, err := readPin(path)
	if errors.Is(err, fs.ErrNotExist) {
		if err := writeNew(path, line); err != nil {
			return nil, fmt.Errorf("agent: pin gateway CA: %w", err)
		}
		// Read back once, not again and again: a concurrent first writer
		// wins, and a name writeNew found taken that still reads as
		// missing is a symbolic link to nothing, which pinCA followed
		// for ever, writing and syncing a temporary pin each round.
		pinned, err = readPin(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("agent: pin gateway CA: %s is a symbolic link to a file that does not exist: remove the link (the agent then pins this gateway's CA) or restore its target", path)
		}
		if err == nil {
			c.log.Info("pinned gateway CA", "ca", ssh.FingerprintSHA256(ca))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("agent: gateway CA: %w", err)
	}
	want, _, _, _, err := ssh.ParseAuthorizedKey(pinned)
	if err != nil {
		return nil, fmt.Errorf("agent: pinned gateway CA %s: %w", path, err)
	}
	if !bytes.Equal(want.Marshal(), ca.Marshal()) {
		return nil, fmt.Errorf("%w: pinned %s, gateway sent %s (delete %s to trust the new gateway)",
			ErrCAChanged, ssh.FingerprintSHA256(want), ssh.FingerprintSHA256(ca), path)
	}
	return ca, nil
}

// maxPin bounds the pin's file: one public key's line, an RSA key of
// 16384 bits a few KiB of it.
const maxPin = 64 << 10

// readPin reads the pinned CA at path, a regular file of at most maxPin
// bytes. Opened non-blocking: a FIFO there held the tunnel's attempt in
// its open for ever, deaf to the agent's stop, as a device such as
// /dev/zero held it in a read that took all memory.
func readPin(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%v): remove it, and the agent pins the gateway's CA anew", path, st.Mode().Type())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxPin+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxPin {
		return nil, fmt.Errorf("%s is larger than %d bytes, which no CA key's line is: remove it, and the agent pins the gateway's CA anew", path, maxPin)
	}
	return b, nil
}

// writeNew creates path with data, mode 0600, failing quietly when another
// writer created it first. The file appears whole or not at all (written
// aside, synced, then linked, and its directory synced): created empty and then written, a crash or
// power loss between the two left an empty pin, which the agent refused
// for ever ("ssh: no key found") until someone deleted it.
func writeNew(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// Link, unlike rename, fails when path exists: the first writer wins.
	// Its directory synced too, or a power loss can lose the new name.
	if err := durable.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}
