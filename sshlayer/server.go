//go:build unix

package sshlayer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/internal/accept"
	"github.com/hostgate/hostgate/internal/rawio"
)

// ErrServerClosed is returned by Server.Serve and Server.ServeConn after
// Close.
var ErrServerClosed = errors.New("sshlayer: server closed")

var errTooManyHandshakes = errors.New("sshlayer: too many handshakes in progress")

// Server defaults.
const (
	DefaultHandshakeTimeout = 10 * time.Second
	DefaultMaxSessions      = 64
	DefaultMaxDirectTCPIP   = 512
	DefaultShell            = "/bin/sh"
)

// ServerConfig configures the embedded SSH server. HostKey is required, and
// at least one of AuthorizedKeys and TrustedUserCAs.
type ServerConfig struct {
	// HostKey is the server's host key. Required.
	HostKey ssh.Signer
	// AuthorizedKeys are the plain public keys accepted, for any user name.
	AuthorizedKeys []ssh.PublicKey
	// TrustedUserCAs are the authorities whose user certificates are
	// accepted: certificate type user, signed by one of these, valid now,
	// with no critical options (none is supported, so any is refused), and
	// with the required principal among its principals. As with sshd, a
	// certificate grants a PTY only with the permit-pty extension and
	// forwarding (TCP and Unix sockets, both ways) only with
	// permit-port-forwarding, and a forwarded agent only with
	// permit-agent-forwarding (and AgentForwarding).
	TrustedUserCAs []ssh.PublicKey
	// Principal is the principal a certificate must carry (the host id).
	// When empty, the certificate must carry the name of the OS user the
	// server runs as, as sshd does without AuthorizedPrincipalsFile. A
	// certificate with no principals is always refused.
	Principal string
	// Logger receives connection and session logs; nil discards them.
	Logger *slog.Logger
	// Shell runs every command as `Shell -c COMMAND`; default /bin/sh.
	// When Shell is dash, the command lines hostgate's client writes are
	// run by doing what dash would do with them, without starting it
	// (about 0.9 ms less per command); see AlwaysShell.
	Shell string
	// AlwaysShell starts every command through Shell, even the lines the
	// server could run itself.
	AlwaysShell bool
	// SFTPReuseBuffers has each SFTP session reuse its request buffers
	// (pkg/sftp's page allocator) instead of allocating 256 KiB per read:
	// SFTP downloads through the gateway ran 1.18-1.28x as fast, but a
	// session keeps the pages its busiest moment needed (about 14 MiB
	// after large transfers with hostgate's client) until it ends. Worth
	// it on a machine; not where memory is a sandbox's limit.
	SFTPReuseBuffers bool
	// Dir is the working directory of commands and SFTP; default the home
	// directory of the server's user, else "/".
	Dir string
	// Env, when non-nil, is the environment every child starts from
	// (NAME=value), in place of a clean one: PATH, HOME (Dir), SHELL,
	// USER, LOGNAME, and LANG, LC_ALL and TZ from the server's own. The
	// server's own environment is never passed on by default: an agent's
	// may hold its token. A sandbox's agent, whose environment is the
	// container's, passes it on this way.
	Env []string
	// HandshakeTimeout bounds the SSH handshake and authentication;
	// default 10 s.
	HandshakeTimeout time.Duration
	// IdleTimeout closes a connection that has had no open channel and no
	// remote forward for that long; 0 means never. This package's client
	// keeps a session channel open ahead for its next command once it has
	// run one, so a connection it holds counts as busy.
	IdleTimeout time.Duration
	// KeepaliveInterval is how often the server asks an otherwise quiet
	// client for a sign of life (keepalive@openssh.com; any reply counts).
	// When no reply comes within KeepaliveInterval × KeepaliveMaxMissed the
	// connection is closed and its processes killed, so a client that
	// vanished without a FIN does not keep them forever (sshd's
	// ClientAliveInterval). Default 30 s; negative disables.
	KeepaliveInterval time.Duration
	// KeepaliveMaxMissed is the number of intervals without a reply that
	// ends the connection; default 3.
	KeepaliveMaxMissed int
	// MaxHandshakes bounds the connections in handshake or authentication
	// at once, server-wide; more are closed at once (sshd's MaxStartups).
	// Default 64.
	MaxHandshakes int
	// MaxHandshakesPerSource bounds the handshakes in progress from one
	// source address (an IPv4 address, an IPv6 /64) among the connections
	// Serve accepts, so that one source cannot take every MaxHandshakes
	// slot and shut everyone else out (sshd's PerSourceMaxStartups).
	// Default MaxHandshakes/4. ServeConn's connections (yamux streams
	// through the gateway, stdio) all carry the gateway's or no address
	// and are not counted per source: the gateway authenticated them.
	MaxHandshakesPerSource int
	// MaxSessions bounds the session channels (exec, shell, subsystem) a
	// connection may have open at once; default 64.
	MaxSessions int
	// MaxDirectTCPIP bounds the forwarded connections (direct-tcpip and
	// direct-streamlocal channels) a connection may have open at once; default 512, what
	// forward.Config.MaxConns allows a forwarder by default. They counted
	// against MaxSessions, and a busy forward, or a host's previews, ran
	// out at 64 (sshd does not count them against its MaxSessions).
	MaxDirectTCPIP int
	// MaxForwards bounds the tcpip-forward and streamlocal-forward
	// listeners per connection;
	// default 16.
	MaxForwards int
	// AgentForwarding lets a session forward the client's SSH agent (ssh
	// -A, auth-agent-req@openssh.com): its commands get SSH_AUTH_SOCK, a
	// Unix socket (0600, in a 0700 directory of its own) whose
	// connections reach the client's agent, at most 16 at once, removed
	// when the session ends. Granted to a plain authorized key and to a
	// certificate with permit-agent-forwarding, as sshd does with
	// AllowAgentForwarding yes. Off by default: whoever runs as the
	// server's user, or root, can sign with the agent while the session
	// lasts, so a sandbox, whose code is not trusted, never sets it.
	AgentForwarding bool
	// AllowRemoteBind lets tcpip-forward listen on non-loopback addresses.
	// Without it every remote forward listens on loopback, whatever the
	// client asked (sshd's GatewayPorts no).
	AllowRemoteBind bool
	// KillGrace is how long a command's session has between SIGHUP and SIGKILL
	// when its channel or connection goes away; default 1 s. A command
	// without a terminal first has as long again after its stdin ends and
	// its output pipes close, as sshd gives it (srvProcess.terminate).
	KillGrace time.Duration
	// OnSession, when set, is called as each exec, shell or subsystem
	// starts (for audit). It must not block.
	OnSession func(SessionInfo)
	// LeaveBackground keeps what a command started in the background
	// running after the command exits, as docker exec does, instead of
	// killing the rest of its session. The exit status is sent when
	// the command exits and its output is awaited at most 2 s more, so a
	// background process that keeps the output open then writes to a
	// closed pipe (as under docker exec). For sandbox containers, where
	// terminating the container ends everything; a channel closed or a
	// connection lost while the command runs still kills the session.
	LeaveBackground bool
	// KeepBackground ends a command's session as sshd does, for a
	// machine whose users expect it: what the command started in the
	// background outlives the command's exit (as with LeaveBackground)
	// and its channel or connection going away. The command itself is
	// hung up then (its pipes closed, or SIGHUP to its process group for
	// a terminal, which a shell passes on to its jobs), and the command
	// alone is killed if it has not exited after KillGrace twice; what
	// ignores the hangup (nohup, a daemon) keeps running. VS Code's
	// Remote-SSH server is one: started with nohup, it must survive a
	// dropped connection for the editor's reconnect to find it. Never for
	// a sandbox, whose code is not trusted.
	KeepBackground bool
	// ChildOOMScoreAdj, when above 0, is the oom_score_adj (up to 1000)
	// every command has from its first instruction, and what it forks
	// inherits (Linux): when a memory limit runs out, the kernel's OOM
	// killer then takes a command before the server, which holds every
	// command's channel, and whose end loses them all. A sandbox's agent
	// sets it; an unprivileged server may raise its children's score, not
	// lower it. A command starts traced and stops at its exec, where the
	// server sets it and lets it go: a setuid binary run as the command
	// itself (not through the shell) may run without its privileges, as
	// under no-new-privileges, which a sandbox has. Where tracing is
	// refused (seccomp, Yama's ptrace_scope 2 or 3) it is set just after
	// the start, which the command and its first children may beat.
	ChildOOMScoreAdj int
	// ChildTasks, when set, keeps commands from taking every process and
	// thread a limit allows (Linux), so the server keeps some for itself:
	// a sandbox's pids limit counts the agent's threads too, and a thread
	// the Go runtime needs and cannot create is fatal.
	ChildTasks *TaskLimit
	// ProcessGroups, when set, is told each command's process group (its
	// session's id too, since every command is a session of its own) as
	// it starts (running true) and once it is gone (false; called before
	// the leader is reaped, so the id cannot have been reused yet). The agent
	// hands them to a guard process that kills what is left if the agent
	// itself is killed. It must not block.
	ProcessGroups func(pgid int, running bool)
	// AgentSockets, when set, is told each forwarded agent's socket
	// directory (ssh -A) once it is made (made true) and once it is
	// removed (false). The agent hands them to its guard, which removes
	// what is left if the agent itself is killed: the session's own
	// cleanup never runs then. It must not block.
	AgentSockets func(dir string, made bool)
}

// TaskLimit bounds the tasks (processes and threads) of a server's
// commands, for ServerConfig.ChildTasks.
type TaskLimit struct {
	// Max is how many tasks the commands' user may hold, counted as the
	// kernel counts RLIMIT_NPROC (every task of the user's uid, the
	// server's threads included): each command is forked while the
	// server's own soft RLIMIT_NPROC is lowered to Max, so it starts with
	// that limit (its hard one the server's) and cannot fork past it.
	Max int
	// Count, when set, is how many tasks count against Max now (a
	// cgroup's pids.current): a command is refused, as a fork past the
	// limit fails (EAGAIN), instead of started while Count is Max or
	// more. The server's limit is lowered only while it forks, and a
	// thread its runtime makes meanwhile is bound by it too: at the
	// limit that would be fatal, so the server does not go there.
	Count func() (int, error)
}

// SessionInfo describes a starting session, for ServerConfig.OnSession.
type SessionInfo struct {
	User        string // SSH user name as the client sent it
	RemoteAddr  string
	Fingerprint string // SHA256 fingerprint of the client key (the certified key for certificates)
	CertKeyID   string // certificate key id; "" for plain keys
	Kind        string // "exec", "shell" or "subsystem"
	Command     string // the command line, or the subsystem name
	PTY         bool
}

// Server is the embedded SSH server: exec and shell (with PTY), SFTP,
// direct-tcpip and tcpip-forward, and their Unix-socket forms
// (direct-streamlocal and streamlocal-forward@openssh.com). It serves connections on any byte
// stream (ServeConn) or a listener (Serve). Close stops everything and waits
// until every connection, channel and child process is gone.
type Server struct {
	cfg    ServerConfig
	log    *slog.Logger
	sshCfg *ssh.ServerConfig
	auth   *authenticator
	env    []string // base environment of child processes

	drainGrace   time.Duration // the const drainGrace; tests shorten it
	coalesceWait time.Duration // the const coalesceWait; tests lengthen it
	// wrapForwardListener, when set, wraps a tcpip-forward's listener: a
	// test's way to make one fail for good.
	wrapForwardListener func(net.Listener) net.Listener

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	mu         sync.Mutex // guards the fields below
	closing    bool
	listeners  map[net.Listener]struct{}
	conns      map[net.Conn]struct{}
	wg         sync.WaitGroup // every Serve and ServeConn call and their goroutines
	nextID     uint64
	handshakes int // connections before authentication completed
	// bySource counts Serve's connections before authentication by
	// sourceKey; entries at zero are deleted.
	bySource map[string]int

	// startMu serializes command starts under cfg.ChildTasks, so that
	// each start's count sees the ones before it.
	startMu sync.Mutex

	dash         bool         // cfg.Shell is dash: directCommand applies
	directStarts atomic.Int64 // commands started by directCommand (tests)
	// agentClosed, when set (tests), is told each forwarded agent's
	// directory once its session removed it.
	agentClosed func(dir string)
	// channelOpenTimeout, when set (tests), replaces the const of that name.
	channelOpenTimeout time.Duration
}

// NewServer validates cfg and returns a server. The config is copied.
func NewServer(cfg *ServerConfig) (*Server, error) {
	if cfg == nil || cfg.HostKey == nil {
		return nil, errors.New("sshlayer: server: HostKey is required")
	}
	if len(cfg.AuthorizedKeys) == 0 && len(cfg.TrustedUserCAs) == 0 {
		return nil, errors.New("sshlayer: server: AuthorizedKeys or TrustedUserCAs is required")
	}
	c := *cfg
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Shell == "" {
		c.Shell = DefaultShell
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if c.MaxSessions <= 0 {
		c.MaxSessions = DefaultMaxSessions
	}
	if c.ChildTasks != nil {
		if c.ChildTasks.Max <= 0 {
			return nil, fmt.Errorf("sshlayer: server: ChildTasks.Max %d: must be above 0", c.ChildTasks.Max)
		}
		lim := *c.ChildTasks
		c.ChildTasks = &lim
	}
	if c.MaxDirectTCPIP <= 0 {
		c.MaxDirectTCPIP = DefaultMaxDirectTCPIP
	}
	if c.KeepaliveInterval == 0 {
		c.KeepaliveInterval = 30 * time.Second
	}
	if c.KeepaliveMaxMissed <= 0 {
		c.KeepaliveMaxMissed = 3
	}
	if c.MaxHandshakes <= 0 {
		c.MaxHandshakes = 64
	}
	if c.MaxHandshakesPerSource <= 0 {
		c.MaxHandshakesPerSource = max(c.MaxHandshakes/4, 1)
	}
	if c.MaxForwards <= 0 {
		c.MaxForwards = 16
	}
	if c.KillGrace <= 0 {
		c.KillGrace = time.Second
	}
	u, uerr := user.Current()
	if c.Dir == "" {
		if home, err := os.UserHomeDir(); err == nil {
			c.Dir = home
		} else {
			c.Dir = "/"
		}
	}
	if len(c.TrustedUserCAs) > 0 && c.Principal == "" {
		if uerr != nil {
			return nil, fmt.Errorf("sshlayer: server: no Principal and no OS user name: %w", uerr)
		}
	}
	s := &Server{
		cfg:          c,
		log:          c.Logger,
		listeners:    make(map[net.Listener]struct{}),
		conns:        make(map[net.Conn]struct{}),
		bySource:     make(map[string]int),
		drainGrace:   drainGrace,
		coalesceWait: coalesceWait,
	}
	var userName string
	if u != nil {
		userName = u.Username
	}
	s.env = baseEnv(userName, c.Dir, c.Shell)
	if c.Env != nil {
		s.env = slices.Clone(c.Env)
	}
	s.dash = isDash(c.Shell)
	s.auth = newAuthenticator(&c, userName)
	s.sshCfg = &ssh.ServerConfig{
		Config:            ssh.Config{Ciphers: serverCiphers(aesGCMHardware)},
		PublicKeyCallback: s.auth.authenticate,
		// x/crypto's default also takes ssh-rsa, RSA signed with SHA-1,
		// which OpenSSH's sshd refuses since 8.8 (PubkeyAcceptedAlgorithms):
		// a host reached through us must not be weaker than through sshd.
		// RSA keys still log in, signing with SHA-2 (rsa-sha2-256/512),
		// as every client since OpenSSH 7.2 does.
		PublicKeyAuthAlgorithms: ssh.SupportedAlgorithms().PublicKeyAuths,
		ServerVersion:           serverVersion,
		MaxAuthTries:            6,
		WindowCeiling:           windowCeiling,
		AuthLogCallback: func(md ssh.ConnMetadata, method string, err error) {
			if err != nil && method != "none" {
				s.log.Info("ssh auth failed", "remote", addrString(md.RemoteAddr()), "user", md.User(), "method", method, "err", err)
			}
		},
	}
	s.sshCfg.AddHostKey(c.HostKey)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// foreignWindow is where the windows of a client other than hostgate's
// stop growing: sshd's, 2 MiB.
const foreignWindow = 2 << 20

// windowCeiling keeps the channel windows of a client other than
// hostgate's at sshd's size. OpenSSH's ssh reads what the window lets it
// send into buffers of its own, so while the path behind the agent (`gateway
// proxy`, the gateway) is slower than ssh, ssh holds up to the window, not
// the kernel: at the 8 MiB hostgate's client gets, ssh reallocated and
// compacted those buffers for about twice its CPU time per MiB, and a
// forward through `gateway proxy` ran at half the speed it runs at 2 MiB
// (bench: "local forward, … through gateway proxy"). hostgate's client
// writes only what its caller hands it, so its window stays the default.
func windowCeiling(m ssh.ConnMetadata) uint32 {
	if isHostgate(m.ClientVersion()) {
		return 0
	}
	return foreignWindow
}

// isDash reports whether the shell at path is dash (through symlinks:
// /bin/sh is dash on Debian and Ubuntu).
func isDash(path string) bool {
	real, err := filepath.EvalSymlinks(path)
	return err == nil && filepath.Base(real) == "dash"
}

// baseEnv is the environment every child starts from. The agent's own
// environment is deliberately not inherited: it may hold the agent's
// tokens.
func baseEnv(userName, home, shellPath string) []string {
	path := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	env := []string{"PATH=" + path, "HOME=" + home, "SHELL=" + shellPath}
	if userName != "" {
		env = append(env, "USER="+userName, "LOGNAME="+userName)
	}
	for _, k := range []string{"LANG", "LC_ALL", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// Serve accepts connections on ln and serves each until Close, which
// closes ln. It returns ErrServerClosed after Close, or the listener's
// error.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.listeners[ln] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
		_ = ln.Close()
	}()
	for {
		c, err := accept.Next(s.ctx, ln, func(err error, wait time.Duration) {
			s.log.Warn("ssh accept failed for now; trying again", "err", err, "retry", wait)
		})
		if err != nil {
			if s.ctx.Err() != nil {
				return ErrServerClosed
			}
			return err
		}
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			_ = c.Close()
			return ErrServerClosed
		}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			if err := s.serveConn(s.ctx, c, sourceKey(c.RemoteAddr()), s.sshCfg); err != nil && !errors.Is(err, ErrServerClosed) {
				s.log.Debug("ssh connection ended", "remote", addrString(c.RemoteAddr()), "err", err)
			}
		}()
	}
}

// ServeConn runs one SSH connection over conn (a TCP connection, a yamux
// stream, stdio) until the client disconnects, ctx ends or the server
// closes. It closes conn and returns only after every channel, forward and
// child process of the connection is gone. A failed handshake or
// authentication is returned as an error; a connection that ran and ended
// returns nil.
func (s *Server) ServeConn(ctx context.Context, conn net.Conn) error {
	return s.serveConn(ctx, conn, "", s.sshCfg)
}

// serveConn is ServeConn with cfg (the server's, or ServeConnAdmitted's),
// counting the handshake against source too when source is not empty.
func (s *Server) serveConn(ctx context.Context, conn net.Conn, source string, cfg *ssh.ServerConfig) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		_ = conn.Close()
		return ErrServerClosed
	}
	if s.handshakes >= s.cfg.MaxHandshakes {
		s.mu.Unlock()
		_ = conn.Close()
		s.log.Warn("ssh connection refused: too many handshakes in progress", "remote", addrString(conn.RemoteAddr()), "max", s.cfg.MaxHandshakes)
		return errTooManyHandshakes
	}
	if source != "" && s.bySource[source] >= s.cfg.MaxHandshakesPerSource {
		s.mu.Unlock()
		_ = conn.Close()
		s.log.Warn("ssh connection refused: too many handshakes in progress from its source", "remote", addrString(conn.RemoteAddr()), "source", source, "max", s.cfg.MaxHandshakesPerSource)
		return errTooManyHandshakes
	}
	s.handshakes++
	if source != "" {
		s.bySource[source]++
	}
	s.conns[conn] = struct{}{}
	s.nextID++
	id := s.nextID
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	handshaking := true
	endHandshake := func() {
		if handshaking {
			handshaking = false
			s.mu.Lock()
			s.handshakes--
			if source != "" {
				if s.bySource[source]--; s.bySource[source] <= 0 {
					delete(s.bySource, source)
				}
			}
			s.mu.Unlock()
		}
	}
	defer endHandshake()
	defer func() {
		s.mu.Lock()
		delete(s.conns, conn)
		s.mu.Unlock()
		_ = conn.Close()
	}()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopSrv := context.AfterFunc(s.ctx, cancel)
	defer stopSrv()
	stopConn := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stopConn()

	// The handshake timer closes the stream itself: not every stream
	// honours deadlines, and a stalled peer must not hold a goroutine.
	hsTimer := time.AfterFunc(s.cfg.HandshakeTimeout, func() { _ = conn.Close() })
	// Over TCP (agent serve --listen, the direct listener) the transport
	// reads and writes by raw calls (internal/rawio): through net's, each
	// read after an idle spell woke sysmon from its deep sleep, and an
	// OpenSSH client's 32 KiB packets cost the agent 1.2 times the CPU
	// per MiB (bench/HISTORY.md, round 53).
	sc, chans, reqs, err := ssh.NewServerConn(rawio.NewTCPConn(conn), cfg)
	endHandshake()
	if !hsTimer.Stop() && err == nil {
		err = errors.New("handshake timed out")
		_ = sc.Close()
	}
	if err != nil {
		if s.ctx.Err() != nil {
			return ErrServerClosed
		}
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		if errors.Is(err, io.EOF) {
			// The client hung up before it tried to authenticate (x/crypto
			// makes an end during authentication a ServerAuthError): what
			// `gateway proxy` does once per ssh run, to check a direct
			// address shows the host's key, and what port scanners and TCP
			// health checks do. At Info, every ssh run logged a failure.
			s.log.Debug("ssh handshake ended by the client before authentication", "remote", addrString(conn.RemoteAddr()), "err", err)
		} else {
			s.log.Info("ssh handshake failed", "remote", addrString(conn.RemoteAddr()), "err", err)
		}
		return fmt.Errorf("sshlayer: handshake: %w", err)
	}
	c := newServerConn(ctx, s, sc, id)
	c.log.Info("ssh connection", "user", sc.User(), "key", c.fingerprint, "cert_id", c.certKeyID)
	c.run(chans, reqs)
	c.log.Info("ssh connection closed")
	return nil
}

// Close stops every listener and connection, kills every child process
// group, and waits until all are gone. It is safe to call more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closing = true
	s.cancel()
	for ln := range s.listeners {
		_ = ln.Close()
	}
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// addrString prints an address that some streams (pipes) may not have.
func addrString(a net.Addr) string {
	if a == nil {
		return "-"
	}
	return a.String()
}

// sourceKey is what MaxHandshakesPerSource counts by: the IPv4 address,
// or the /64 of an IPv6 one (one host usually holds a whole /64). Other
// addresses (unix sockets, pipes) have no key and are not counted.
func sourceKey(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return ""
	}
	if ip4 := ta.IP.To4(); ip4 != nil {
		return ip4.String()
	}
	if ip6 := ta.IP.To16(); ip6 != nil {
		return ip6.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return ""
}
