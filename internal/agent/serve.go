package agent

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/hostgate/hostgate/internal/yamux"
	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/proxyproto"
	"github.com/hostgate/hostgate/sshlayer"
)

// maxKeysFile bounds an authorized-keys or CA file.
const maxKeysFile = 1 << 20

// ServeConfig says where `agent serve` finds its keys.
type ServeConfig struct {
	// StateDir holds the host key (HostKeyFile) unless HostKeyPath is set.
	StateDir string
	// HostKeyPath overrides StateDir/HostKeyFile; it is created when
	// missing (sshlayer.LoadOrCreateHostKey).
	HostKeyPath string
	// AuthorizedKeys are accepted user keys; TrustedCAs accepted user
	// certificate authorities. At least one key in either is required.
	AuthorizedKeys []ssh.PublicKey
	TrustedCAs     []ssh.PublicKey
	// HostID is the principal certificates must carry; empty means the OS
	// user name (see sshlayer.ServerConfig.Principal).
	HostID string
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
	// Shell runs commands and interactive shells; empty means
	// sshlayer.DefaultShell (/bin/sh).
	Shell string
	// NoAgentForwarding refuses every session's request to forward the
	// caller's SSH agent (ssh -A), which is otherwise granted to a plain
	// authorized key and to a certificate with permit-agent-forwarding
	// (sshd's AllowAgentForwarding no).
	NoAgentForwarding bool
	// KeepBackground lets what a command starts in the background (cmd &,
	// nohup) outlive the command and its connection, as under sshd,
	// instead of ending with it (sshlayer.ServerConfig.KeepBackground);
	// the guard that kills a killed agent's commands is not started.
	KeepBackground bool
	// Server adjusts the SSH server config before the server is built.
	Server func(*sshlayer.ServerConfig)
}

// NewServer loads (or creates) the host key and builds the SSH server
// ServeConfig describes.
func NewServer(cfg *ServeConfig) (*sshlayer.Server, error) {
	path := cfg.HostKeyPath
	if path == "" {
		if cfg.StateDir == "" {
			return nil, errors.New("agent: a state dir or a host key path is required")
		}
		if err := checkNotGatewayState(cfg.StateDir); err != nil {
			return nil, err
		}
		if err := makeStateDir(cfg.StateDir); err != nil {
			return nil, err
		}
		if err := protectStateDir(cfg.StateDir, cfg.Logger); err != nil {
			return nil, err
		}
		path = filepath.Join(cfg.StateDir, HostKeyFile)
	}
	hk, err := loadOrCreateHostKey(path, cfg.Logger)
	if err != nil {
		return nil, err
	}
	sc := &sshlayer.ServerConfig{
		HostKey:          hk,
		AuthorizedKeys:   cfg.AuthorizedKeys,
		TrustedUserCAs:   cfg.TrustedCAs,
		Principal:        cfg.HostID,
		Logger:           cfg.Logger,
		Shell:            cfg.Shell,
		SFTPReuseBuffers: true, // a machine, not a sandbox's memory limit
		AgentForwarding:  !cfg.NoAgentForwarding,
		KeepBackground:   cfg.KeepBackground,
	}
	if cfg.Server != nil {
		cfg.Server(sc)
	}
	return sshlayer.NewServer(sc)
}

// ParseKeys reads public keys in authorized_keys format: one a line,
// comments and blank lines skipped. A line that does not parse is an error
// naming it, so a typo never silently drops a key. A line with options
// (restrict, command=, from=, no-pty, cert-authority…) is an error too:
// the server cannot honour them, and ignoring a restriction would grant
// more than the file says.
func ParseKeys(data []byte) ([]ssh.PublicKey, error) {
	var keys []ssh.PublicKey
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 16<<10), maxKeysFile)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		k, _, opts, _, err := ssh.ParseAuthorizedKey(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if len(opts) > 0 {
			return nil, fmt.Errorf("line %d: key options are not supported (%s)", n, strings.Join(opts, ","))
		}
		keys = append(keys, k)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("agent: keys: %w", err)
	}
	return keys, nil
}

// LoadKeys reads a file of public keys (ParseKeys), bounded in size. Its
// errors name the file, for the caller to name the flag that gave it.
func LoadKeys(path string) ([]ssh.PublicKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, maxKeysFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > maxKeysFile {
		return nil, fmt.Errorf("%s: larger than %d bytes, which no file of keys is", path, maxKeysFile)
	}
	keys, err := ParseKeys(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return keys, nil
}

// ServeListener serves SSH connections from ln until ctx ends, then closes
// the server (which waits for every connection and process) and returns
// nil. A listener failure is returned after the same teardown.
func ServeListener(ctx context.Context, ln net.Listener, srv *sshlayer.Server) error {
	stop := context.AfterFunc(ctx, func() { _ = srv.Close() })
	defer stop()
	err := srv.Serve(ln)
	_ = srv.Close()
	if errors.Is(err, sshlayer.ErrServerClosed) {
		return nil
	}
	return err
}

// ServeStdio serves one SSH connection over conn (this process's stdio in
// `agent serve --stdio`) until the client leaves or ctx ends.
func ServeStdio(ctx context.Context, conn net.Conn, srv *sshlayer.Server) error {
	err := srv.ServeConn(ctx, conn)
	if errors.Is(err, sshlayer.ErrServerClosed) || ctx.Err() != nil {
		return nil
	}
	return err
}

// ServeMux runs the agent side of a tunnel over conn: a yamux server on
// which every stream the peer opens is one SSH connection. It returns when
// the peer ends the session or resets the connection (nil), the session
// fails (its error, e.g. a keepalive timeout), or ctx ends (nil); every
// connection it served is gone by then. conn is closed. The server is not closed: it may serve other
// tunnels. The streams close both ways whatever cfg says
// (MuxConfig.CloseEndsReads).
func ServeMux(ctx context.Context, conn net.Conn, srv *sshlayer.Server, cfg *bytestream.MuxConfig) error {
	wait, err := serveMux(ctx, conn, srv, cfg, tunnel{})
	wait()
	return err
}

// tunnel is how serveMux serves a tunnel's streams.
type tunnel struct {
	// callers: every stream starts with the gateway's caller preamble
	// (internal/proxyproto), which names the caller to the SSH server;
	// a stream without a well-formed one is closed, and logged to log.
	callers bool
	log     *slog.Logger
	// first, when not nil, is called when the tunnel's first SSH
	// connection ends, with whether it ran (not a failed handshake): the
	// gateway's proof of the host key.
	first func(ran bool, sess *yamux.Session)
	// opened, when not nil, is called with the tunnel's session once it
	// is made (the direct listener's gate opens its control stream on it).
	opened func(sess *yamux.Session)
	// stopping, when not empty, is the reason of the close frame (1001,
	// going away) the tunnel's WebSocket ends with when ctx ends (the
	// agent stops), ahead of the session's own plain close: the gateway
	// then logs that the agent stopped, where it logged EOF.
	stopping string
}

// callerConn is st as the SSH server sees it: after its caller preamble,
// with the caller as its RemoteAddr, when t carries them. ok is false
// when st is done with: a malformed preamble (logged) or none before EOF.
func (t tunnel) callerConn(st net.Conn) (net.Conn, bool) {
	if !t.callers {
		return st, true
	}
	c, _, err := proxyproto.Accept(st)
	if err != nil {
		switch {
		case t.log == nil || errors.Is(err, io.EOF):
		case errors.Is(err, proxyproto.ErrMalformed):
			t.log.Warn("stream from the gateway closed: its caller preamble is not a PROXY line", "err", err)
		default: // a timeout, the tunnel ending
			t.log.Debug("stream from the gateway ended before its caller preamble", "err", err)
		}
		return nil, false
	}
	return c, true
}

// serveMux is ServeMux without the wait at the end: it returns as soon as
// the tunnel is over, with its connections told to end, and wait blocks
// until they have, which takes as long as their commands' wind-down
// (sshlayer.ServerConfig.KillGrace, twice).
func serveMux(ctx context.Context, conn net.Conn, srv *sshlayer.Server, cfg *bytestream.MuxConfig, t tunnel) (wait func(), err error) {
	first := t.first
	// Every stream is one SSH connection, which reads nothing after its
	// Close, so Close ends both ways. With yamux's half-close, x/crypto's
	// transport Close waited for a read that only the gateway's FIN ends:
	// a connection whose caller's path stalled outlived the keepalive
	// that gave up on it by 5 minutes (StreamCloseTimeout), its goroutines,
	// buffers and stream slot held, when the gateway never closed its side.
	var mc bytestream.MuxConfig
	if cfg != nil {
		mc = *cfg
	}
	mc.CloseEndsReads = true
	sess, err := bytestream.MuxServer(conn, &mc)
	if err != nil {
		_ = conn.Close()
		return func() {}, fmt.Errorf("agent: mux: %w", err)
	}
	// The SSH connections end only after the tunnel: when the agent
	// stops (SIGTERM), a connection that closed first sent its stream's
	// FIN ahead of the tunnel's end, and the gateway took the session for
	// one that ended by itself, so `gateway proxy` could not say the
	// host's agent had gone (e2e TestAgentStopsCleanly).
	connCtx, cancelConns := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		if t.stopping != "" {
			_ = bytestream.CloseWithReason(conn, bytestream.StatusGoingAway, t.stopping)
		}
		_ = sess.Close()
		cancelConns()
	})
	if t.opened != nil {
		t.opened(sess)
	}
	var wg sync.WaitGroup
	defer func() {
		stop()
		_ = sess.Close()
		cancelConns() // ends every ServeConn of this tunnel
	}()
	for {
		st, err := sess.AcceptStream()
		if err != nil {
			var ce *bytestream.CloseError
			if ctx.Err() == nil && errors.As(err, &ce) && ce.Reason != "" {
				return wg.Wait, gatewayEnded(ce)
			}
			// A reset or a broken pipe is a peer that left too: closing a
			// socket with unread data (our replies still in flight) sends
			// RST, and a write racing that close gets EPIPE (seen once in
			// CI under load).
			if ctx.Err() != nil || errors.Is(err, yamux.ErrSessionShutdown) || errors.Is(err, io.EOF) ||
				errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
				return wg.Wait, nil
			}
			if errors.Is(err, bytestream.ErrKeepAliveTimeout) || errors.Is(err, bytestream.ErrWriteTimeout) {
				// A path that stalled with its sockets open (a NAT that
				// lost its state, a laptop's network gone) was logged as
				// "agent: mux: bytestream: mux keepalive timed out".
				return wg.Wait, fmt.Errorf("%w: %w", errGatewayUnresponsive, err)
			}
			return wg.Wait, fmt.Errorf("agent: mux: %w", err)
		}
		done := first
		first = nil
		wg.Go(func() {
			c, ok := t.callerConn(st)
			if !ok {
				if done != nil {
					done(false, sess)
				}
				return
			}
			err := srv.ServeConn(connCtx, c) // the server logs failures
			if done != nil {
				done(err == nil, sess)
			}
		})
	}
}

// errGatewayUnresponsive ends a tunnel whose gateway stopped answering
// its keepalive or taking its writes.
var errGatewayUnresponsive = errors.New("the gateway stopped answering (a network in between dropped the tunnel's path, or the gateway is frozen or overloaded)")

// CheckShell checks a --shell value: an absolute path to an executable
// file (the server runs `SHELL -c COMMAND`, and a login shell for
// interactive sessions).
func CheckShell(path string) error {
	if path == "" {
		return nil
	}
	if !filepath.IsAbs(path) {
		return fmt.Errorf("--shell %q: want an absolute path", path)
	}
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("--shell: %w", err)
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("--shell %q: not an executable file", path)
	}
	return nil
}

// loadOrCreateHostKey is sshlayer.LoadOrCreateHostKey, saying so when it
// made a new key: after a rotation, or a state dir lost by accident, that
// line is what an operator looks for (a gateway that pinned the old key
// refuses the new one until its host is reset).
func loadOrCreateHostKey(path string, log *slog.Logger) (ssh.Signer, error) {
	_, statErr := os.Lstat(path)
	hk, err := sshlayer.LoadOrCreateHostKey(path)
	if err != nil || !errors.Is(statErr, fs.ErrNotExist) {
		return hk, err
	}
	if log != nil {
		log.Info("made a new host key", "path", path, "fingerprint", ssh.FingerprintSHA256(hk.PublicKey()),
			"note", "a gateway that pinned this host's earlier key refuses this one until `gateway host reset-key HOST`")
	}
	return hk, nil
}
