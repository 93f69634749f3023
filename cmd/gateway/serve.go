package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hostgate/hostgate/internal/buildinfo"
	"github.com/hostgate/hostgate/internal/gateway"
	"github.com/hostgate/hostgate/internal/gateway/sshca"
	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/internal/webterm"
)

func init() { register("serve", "run the gateway", runServe) }

// serveConfig is `gateway serve`'s flags.
type serveConfig struct {
	// stateLocked says the caller holds the state dir's lock already
	// (gateway dev, which writes its tokens before serving).
	stateLocked bool

	Listen        string
	StateDir      string
	PublicURL     string
	PreviewDomain string
	Docker        string // auto | on | off
	AgentBinary   string
	SandboxImage  string // default image of "New sandbox" (executions.go)
	SandboxPool   int    // warm containers per sandbox shape; 0 turns the pool off
	// SandboxMax bounds the sandboxes (Docker executions) live at once,
	// dockerhost.Config.MaxLive, with 0 for no bound (the flag's reading);
	// sandboxMaxSet says the flag or its variable set it.
	SandboxMax    int
	sandboxMaxSet bool
	CertTTL       time.Duration
	LogFormat     string
	TokenRecheck  time.Duration
	RepoRoots     string // comma-separated directories git-worktree repositories must be under
	TrustedProxy  string // comma-separated CIDRs of reverse proxies in front
	TLSCert       string // PEM certificate chains, comma-separated: serve HTTPS itself (with TLSKey)
	TLSKey        string // their PEM private keys, in TLSCert's order
	AuditRequired bool   // refuse new sessions while the audit log cannot be written
	DirectOff     bool   // --direct-sessions=off: every session through the relay
	proxies       []netip.Prefix
	// Checkpoint retention (dockerhost.Retention); 0 keeps everything.
	CheckpointMaxAge   time.Duration
	CheckpointMaxBytes byteSize
	// RelayMemory is gateway.Config.RelayMemory, with 0 for no bound
	// (the flag's reading); parseServeFlags sets its default.
	RelayMemory byteSize
	// TerminalKeep is webterm.Config.Keep, with 0 for off (the flag's
	// reading).
	TerminalKeep time.Duration
	// unknownTokenFix is gateway.Config.UnknownTokenFix (gateway dev's).
	unknownTokenFix string
}

// serving is a running gateway as the hooks see it.
type serving struct {
	Config *serveConfig
	Server *gateway.Server
	Logger *slog.Logger

	forgotMu sync.Mutex
	forgot   []func(hostID string)
}

// OnHostForgotten has f told each host whose record this process deleted
// (an ended execution's), so that what a hook holds in memory for the
// host goes with the record.
func (s *serving) OnHostForgotten(f func(hostID string)) {
	s.forgotMu.Lock()
	defer s.forgotMu.Unlock()
	s.forgot = append(s.forgot, f)
}

// HostForgotten tells OnHostForgotten's functions that hostID's record is
// gone.
func (s *serving) HostForgotten(hostID string) {
	s.forgotMu.Lock()
	fs := slices.Clone(s.forgot)
	s.forgotMu.Unlock()
	for _, f := range fs {
		f(hostID)
	}
}

// serveHooks run after the gateway is built and before it serves: others
// attach their parts here (executions API and Docker when --docker allows,
// the web UI, previews), each in its own file. A hook returns a cleanup run
// after the server has closed (nil when none).
var serveHooks []func(ctx context.Context, s *serving) (cleanup func(), err error)

func runServe(ctx context.Context, sio stdio, args []string) error {
	c, err := parseServeFlags("serve", sio, args, serveConfig{Listen: "127.0.0.1:8080", StateDir: defaultStateDir()})
	if err != nil {
		return err
	}
	logger := newLogger(sio, c.LogFormat)
	defer ignoreHangups(ctx, logger)()
	return serve(ctx, logger, c, nil)
}

// ignoreHangups logs SIGHUP and otherwise ignores it until stop. Go's
// default, death without the drain, cut every session on a `kill -HUP`
// or a unit's ExecReload, the signals daemons get to reload; serve has
// nothing to reload (it reads its flags at start), and draining on it
// would turn a reload into a restart. Caddy does the same. SIGTERM and
// SIGINT drain. `gateway dev`, which runs in a terminal, stops on the
// terminal's hang-up instead (stopSignals).
func ignoreHangups(ctx context.Context, logger *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-hup:
				logger.Warn("SIGHUP ignored: gateway serve has nothing to reload (it reads its flags at start); restart it to apply changed flags, and stop it with SIGTERM or SIGINT, which drain it")
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		cancel()
		<-done
	}
}

// parseServeFlags defines the flags `serve` and `dev` share, with def's
// listen address, state dir and preview domain as defaults, then parses
// HOSTGATE_* and args and validates.
func parseServeFlags(name string, sio stdio, args []string, def serveConfig) (*serveConfig, error) {
	c := &serveConfig{RelayMemory: byteSize(gateway.DefaultRelayMemory), SandboxMax: defaultSandboxMax}
	fs := newFlags(name, sio)
	fs.StringVar(&c.Listen, "listen", def.Listen, "address to listen on")
	fs.StringVar(&c.StateDir, "state-dir", def.StateDir, "directory for the database, the CA key (and, for dev, the local agent's state)")
	publicDefault := "http://LISTEN"
	if name == "serve" {
		publicDefault += "; with --tls-cert, https:// and the certificate's first name that is not a wildcard, with the port unless 443"
	}
	fs.StringVar(&c.PublicURL, "public-url", "", "URL callers and agents reach the gateway at (default "+publicDefault+")")
	fs.StringVar(&c.PreviewDomain, "preview-domain", def.PreviewDomain, "domain for preview subdomains ({port}--{host}.DOMAIN)")
	fs.StringVar(&c.Docker, "docker", "auto", "Docker executions: auto, on or off")
	fs.StringVar(&c.AgentBinary, "agent-binary", "", "static Linux agent binary that makes each Docker execution a host (shared read-only with every container through one tools volume; CGO_ENABLED=0 go build ./cmd/agent)")
	fs.StringVar(&c.SandboxImage, "sandbox-image", "", "default image of new sandboxes (web UI, GET /v1/me sandboxDefaults), pinned by digest")
	fs.IntVar(&c.SandboxPool, "sandbox-pool", 0, "warm pre-created containers kept per sandbox shape (0: no pool)")
	fs.Var(setInt{&c.SandboxMax, &c.sandboxMaxSet}, "sandbox-max", "the most sandboxes (Docker executions) live at once, provisions and restores under way included; past it a provision or restore answers 503 busy until one ends. Warm containers (--sandbox-pool) are not counted: the pool bounds its own. 0: no bound, each sandbox's own limits the only ones")
	fs.DurationVar(&c.CertTTL, "cert-ttl", sshca.DefaultTTL, "lifetime of issued SSH user certificates")
	fs.StringVar(&c.LogFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&c.RepoRoots, "repository-roots", "", "comma-separated directories that git-worktree sandboxes' repositoryPath must be under (empty: any repository the gateway can read)")
	fs.DurationVar(&c.TokenRecheck, "token-recheck", gateway.DefaultTokenRecheck, "how often live sessions' tokens are looked up again: a revoked or expired token ends its sessions within this")
	fs.StringVar(&c.TrustedProxy, "trusted-proxy", "", "comma-separated CIDRs of the reverse proxies in front: their X-Forwarded-For names the client (rate limits, audit log)")
	if name == "serve" {
		fs.StringVar(&c.TLSCert, "tls-cert", "", "serve HTTPS with the PEM certificate chain in `FILE` (with --tls-key; certbot's fullchain.pem), read again when the file changes; comma-separated for more than one (a caller gets the first that names the host it asked for, else the first); without it the gateway speaks plain HTTP, for a TLS-terminating proxy in front")
		fs.StringVar(&c.TLSKey, "tls-key", "", "the PEM private key of --tls-cert, in `FILE` (certbot's privkey.pem); comma-separated, in --tls-cert's order")
	}
	fs.BoolVar(&c.AuditRequired, "audit-required", false, "while the audit log cannot be written (a full disk), refuse new sessions, execs and logins with 503 instead of letting them go on unrecorded; open sessions go on")
	fs.Var(onOff{&c.DirectOff}, "direct-sessions", "direct sessions, `on|off`: a caller that reaches an agent's own listener (agent connect --direct ADDR) runs its SSH session straight to it, admitted and ended by the gateway as a relayed one (its token, the audit log); off: every session goes through the gateway's relay")
	fs.Var(&c.RelayMemory, "relay-memory", "bytes that all relayed sessions together may hold unread at the gateway, what hosts sent faster than callers read: past it the hosts of the sessions holding the most wait, nothing is dropped (`SIZE` in bytes, or with K, M, G, T: powers of 1024; each open session may hold 256 KiB more; 0: no bound)")
	fs.DurationVar(&c.TerminalKeep, "terminal-keep", webterm.DefaultKeep, "how long a web terminal whose page went away (a dropped network, a laptop asleep, a reload) keeps its shell running for the page to resume it, with what it printed meanwhile (0: the shell ends with its page)")
	fs.DurationVar(&c.CheckpointMaxAge, "checkpoint-max-age", 0, "Docker executions' checkpoints older than this are deleted, oldest first, in the background: at start, after each checkpoint, and as each passes this age (0: kept for good)")
	fs.Var(&c.CheckpointMaxBytes, "checkpoint-max-bytes", "Docker executions' checkpoints are kept under this total `SIZE` by deleting the oldest, in the background at start and after each checkpoint; the newest is always kept (bytes, or with K, M, G, T: powers of 1024; 0: no limit)")
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() != 0 {
		return nil, usageErrorf("%s: unexpected arguments %q", name, fs.Args())
	}
	if c.Listen == "" && def.Listen != "" {
		// net.Listen takes "" for ":0": an unset variable in a unit or
		// compose file (HOSTGATE_LISTEN=${LISTEN}) put the gateway on
		// every address, at a port no one knew, instead of its default.
		return nil, fmt.Errorf("%s: --listen (HOSTGATE_LISTEN) is empty: want HOST:PORT, such as %s (the default, when neither is set) or :8080 for every address", name, def.Listen)
	}
	if c.StateDir == "" && def.StateDir != "" {
		return nil, emptyStateDir(name, def.StateDir)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// defaultSandboxMax is --sandbox-max's default, dockerhost.DefaultMaxLive
// (whose comment says why 32); this file builds where dockerhost does not.
const defaultSandboxMax = 32

// setInt is an int flag that notes it was set, from the command line or
// the environment, for a default that refuseDockerFlags must tell from a
// value given.
type setInt struct {
	n   *int
	set *bool
}

func (f setInt) String() string {
	if f.n == nil {
		return "0" // flag.PrintDefaults' zero value, so that it shows the default
	}
	return strconv.Itoa(*f.n)
}

func (f setInt) Set(v string) error {
	n, err := strconv.ParseInt(v, 0, strconv.IntSize)
	if err != nil {
		return errors.New("parse error") // flaghelp.WantFor adds what it wants, as for an IntVar
	}
	*f.n, *f.set = int(n), true
	return nil
}

func (f setInt) Get() any { return *f.n }

// onOff is a flag of on or off that sets *off; unset, it is on.
type onOff struct{ off *bool }

func (f onOff) String() string {
	switch {
	case f.off == nil:
		return "" // flag.PrintDefaults' zero value, so that it shows the default
	case *f.off:
		return "off"
	}
	return "on"
}

func (f onOff) Set(v string) error {
	switch v {
	case "on":
		*f.off = false
	case "off":
		*f.off = true
	default:
		return errors.New("want on or off")
	}
	return nil
}

// gatewayConfig is what the gateway itself is told.
func (c *serveConfig) gatewayConfig() *gateway.Config {
	relay := int64(c.RelayMemory)
	if relay == 0 {
		relay = -1 // gateway.Config's "no bound"; its 0 is the default
	}
	session, _ := cookieNames(c.https())
	return &gateway.Config{CertTTL: c.CertTTL, TrustedProxies: c.proxies, TokenRecheck: c.TokenRecheck, AuditRequired: c.AuditRequired, StateDir: c.StateDir, RelayMemory: relay,
		DirectOff:     c.DirectOff,
		SessionCookie: session, UnknownTokenFix: c.unknownTokenFix, TrustedOrigins: publicOrigins(c.PublicURL)}
}

func (c *serveConfig) validate() error {
	if _, port, err := net.SplitHostPort(c.Listen); c.Listen != "" && (err != nil || port == "") {
		// Before the engine and the store are opened: net.Listen's
		// "missing port in address" came after Docker's start-up lines.
		return fmt.Errorf("serve: --listen %q: want HOST:PORT, such as 127.0.0.1:8080 (or :8080 for every address)", c.Listen)
	}
	if c.TerminalKeep < 0 {
		return fmt.Errorf("serve: --terminal-keep %v: want 0 (off) or more", c.TerminalKeep)
	}
	if c.SandboxMax < 0 {
		return fmt.Errorf("serve: --sandbox-max %d: want 0 (no bound) or more", c.SandboxMax)
	}
	if c.SandboxPool < 0 || c.SandboxPool > 64 {
		return fmt.Errorf("serve: --sandbox-pool %d: want 0-64", c.SandboxPool)
	}
	switch c.Docker {
	case "auto", "on", "off":
	default:
		return fmt.Errorf("serve: --docker %q: want auto, on or off", c.Docker)
	}
	if c.CertTTL <= 0 || c.CertTTL > sshca.MaxTTL {
		return fmt.Errorf("serve: --cert-ttl %v: want between 0 and %v", c.CertTTL, sshca.MaxTTL)
	}
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("serve: --public-url %q: want http(s)://HOST[:PORT]", c.PublicURL)
		}
		// The scheme in lower case, as url.Parse reads it: https()
		// compares it as a prefix, and HTTPS://… got cookies without
		// Secure, sent over plain HTTP too.
		c.PublicURL = u.Scheme + c.PublicURL[len(u.Scheme):]
		if c.TLSCert != "" && u.Scheme != "https" {
			return fmt.Errorf("serve: --public-url %q with --tls-cert: the gateway speaks only HTTPS, so callers must too: want https://HOST[:PORT]", c.PublicURL)
		}
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("serve: --tls-cert and --tls-key go together: give both (the certificate chain and its private key), or neither for plain HTTP behind a TLS-terminating proxy")
	}
	if c.TLSCert != "" {
		if _, err := tlsPairs(c.TLSCert, c.TLSKey); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
	}
	// As the preview proxy reads it (forward.PreviewConfig): the
	// gateway's own checks compared it as given, and a domain with
	// capitals or a trailing dot sent a preview's login to /login on
	// the preview's subdomain, the previewed app's path.
	if d := strings.ToLower(strings.TrimSuffix(c.PreviewDomain, ".")); d != "" || c.PreviewDomain == "" {
		c.PreviewDomain = d
	}
	if d := c.PreviewDomain; strings.Contains(d, ":") || strings.Contains(d, "/") || strings.HasPrefix(d, ".") {
		return fmt.Errorf("serve: --preview-domain %q: want a bare domain name such as preview.example.com, without scheme, port or path", d)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return fmt.Errorf("serve: --log-format %q: want text or json", c.LogFormat)
	}
	for _, r := range c.repositoryRoots() {
		if !filepath.IsAbs(r) {
			return fmt.Errorf("serve: --repository-roots: %q is not an absolute path", r)
		}
	}
	if !executionsBuilt {
		if err := refuseExecutionFlags(c, runtime.GOOS); err != nil {
			return err
		}
	}
	if err := refuseDockerFlagsOff(c); err != nil {
		return err
	}
	if c.CheckpointMaxAge < 0 {
		return fmt.Errorf("serve: --checkpoint-max-age %v: want 0 (keep) or more", c.CheckpointMaxAge)
	}
	if c.TokenRecheck < 100*time.Millisecond || c.TokenRecheck > time.Hour {
		return fmt.Errorf("serve: --token-recheck %v: want between 100ms and 1h", c.TokenRecheck)
	}
	p, err := gateway.ParseTrustedProxies(c.TrustedProxy)
	if err != nil {
		return fmt.Errorf("serve: --trusted-proxy: %w (want CIDRs or addresses, comma-separated)", err)
	}
	c.proxies = p
	return nil
}

// https reports whether callers reach the gateway over HTTPS: its own
// (--tls-cert) or a proxy's in front (--public-url https://…).
func (c *serveConfig) https() bool {
	return c.TLSCert != "" || strings.HasPrefix(c.PublicURL, "https://")
}

// repositoryRoots is --repository-roots as a list.
func (c *serveConfig) repositoryRoots() []string {
	var out []string
	for r := range strings.SplitSeq(c.RepoRoots, ",") {
		if r = strings.TrimSpace(r); r != "" {
			out = append(out, r)
		}
	}
	return out
}

func newLogger(sio stdio, format string) *slog.Logger {
	if format == "json" {
		return slog.New(slog.NewJSONHandler(sio.err, nil))
	}
	return slog.New(slog.NewTextHandler(sio.err, nil))
}

// openAdminState is openState for the commands that administer a
// gateway's state (tokens, host keys): it says so on warn when dir held
// no state yet, since a running gateway with another --state-dir will not
// see what the command writes (a forgotten --state-dir made a token the
// gateway refused, with no hint why). Only a command that makes state
// (create: token create, before a gateway's first start) makes it there;
// the others refuse, as nothing is there to list, revoke or reset, and a
// new state dir (with a new CA key) at a mistyped path, or at the state
// dir's own midway through a restore, is what they would leave.
func openAdminState(ctx context.Context, dir string, create bool, warn io.Writer) (*store.SQLite, *sshca.CA, error) {
	if err := unfinishedBackup(dir); err != nil {
		return nil, nil, err // before the warning that it holds no state yet
	}
	if _, err := os.Stat(filepath.Join(dir, dbFile)); errors.Is(err, fs.ErrNotExist) {
		if stateDirServed(dir) {
			// The gateway goes on with the file it opened, deleted: a new
			// database here would take what this command writes (a token
			// it refuses) and be all the state it finds at its restart.
			return nil, nil, fmt.Errorf("a gateway is serving from %s but its database %s is gone (deleted while it ran?): the gateway would not see what this command writes. Stop the gateway, put %s back from a backup (or let it start on new state), then run this again",
				dir, filepath.Join(dir, dbFile), dbFile)
		}
		if !create {
			return nil, nil, stateExists(dir)
		}
		fmt.Fprintf(warn, "warning: no gateway state in %s yet; creating it. A gateway serving with another --state-dir (or HOSTGATE_STATE_DIR) will not know what this command writes.\n", dir)
	}
	newCA := caKeyMissing(dir)
	st, ca, err := openState(ctx, dir, func(f store.TightenedFile) {
		fmt.Fprintf(warn, "warning: %s was open to group or others (%#o); made it %#o: it holds token hashes, pinned host keys and the audit log\n", f.Path, f.Was, f.Now)
	})
	if err == nil && newCA {
		if n := pinnedAgents(ctx, st); n > 0 {
			fmt.Fprintf(warn, "warning: %s had no SSH CA key, so a new CA was made in %s; %s\n", dir, filepath.Join(dir, caKeyFile), newCAFix(n))
		}
	}
	return st, ca, err
}

// openReadState opens dir's database for a command that only reads it
// (token list, audit): as openAdminState without create, but the schema
// is not upgraded and nothing is written (no CA made either). Upgrading is
// the gateway's as it starts: a new binary's token list, run before the
// gateway's restart, upgraded the schema under the older gateway serving,
// which then refused to start again (a rollback).
func openReadState(ctx context.Context, dir string, warn io.Writer) (*store.SQLite, error) {
	if err := unfinishedBackup(dir); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, dbFile)); errors.Is(err, fs.ErrNotExist) {
		if stateDirServed(dir) {
			return nil, fmt.Errorf("a gateway is serving from %s but its database %s is gone (deleted while it ran?). Stop the gateway and put %s back from a backup (or let it start on new state)",
				dir, filepath.Join(dir, dbFile), dbFile)
		}
		return nil, stateExists(dir)
	}
	if err := emptyDatabase(dir); err != nil {
		return nil, err
	}
	if err := checkStateAccess(dir); err != nil {
		return nil, err
	}
	st, err := store.OpenRead(ctx, filepath.Join(dir, dbFile))
	if err != nil {
		return nil, err
	}
	for _, f := range st.Tightened() {
		fmt.Fprintf(warn, "warning: %s was open to group or others (%#o); made it %#o: it holds token hashes, pinned host keys and the audit log\n", f.Path, f.Was, f.Now)
	}
	return st, nil
}

// emptyDatabase fails, naming the file and the fix, when dir's database
// is an empty file beside a CA key: SQLite takes an empty file for a new
// database, so a state dir whose database was cut to nothing (a restore's
// cp -a onto a full disk) was opened as new state in silence, every token,
// pinned host key and audit entry gone. A database this gateway made is
// never empty once a CA key is beside it: the CA is made after the store
// opened it, which writes its first page as it turns on WAL.
func emptyDatabase(dir string) error {
	db := filepath.Join(dir, dbFile)
	fi, err := os.Stat(db)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != 0 || caKeyMissing(dir) {
		return nil
	}
	if wal, err := os.Stat(db + "-wal"); err == nil && wal.Size() > 0 {
		return nil // what there is is in the log: SQLite's to read
	}
	return fmt.Errorf("%s is empty, though %s holds this gateway's CA key: its tokens, hosts and audit log are lost (a copy of the state dir cut short, by a full disk say). Stop the gateway and put the state dir back from a whole backup (gateway backup's, or the state dir the restore moved aside); to start over on new state with this CA instead, delete %s",
		db, dir, db)
}

// caKeyMissing reports whether dir holds no CA key yet (openState makes one).
func caKeyMissing(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, caKeyFile))
	return errors.Is(err, fs.ErrNotExist)
}

// pinnedAgents counts st's hosts whose agents pinned the gateway's CA when
// they enrolled: machines with a pinned key (a sandbox's agent is handed
// the CA at each start).
func pinnedAgents(ctx context.Context, st store.Store) int {
	hosts, err := st.Hosts(ctx)
	if err != nil {
		return 0
	}
	n := 0
	for _, h := range hosts {
		if h.Kind != store.KindDocker && h.HostKey != "" {
			n++
		}
	}
	return n
}

// newCAFix says what a CA made for a state dir with n enrolled agents does
// to them, and what to do: a state dir restored without its ca_key (or with
// it deleted) got a new CA in silence, and every agent refused the gateway.
func newCAFix(n int) string {
	return fmt.Sprintf("the agents of its %d enrolled hosts pinned the CA before and refuse this one (their log: gateway CA differs from the pinned one): stop the gateway and put %s back from a backup of this state dir, or, to change the CA on purpose, delete gateway_ca.pub in each agent's state dir", n, caKeyFile)
}

// openState opens the database and CA in dir (created 0700); tightened
// hears of each database file that was open to group or others (an older
// gateway's, created 0644), which the store has made its owner's alone.
func openState(ctx context.Context, dir string, tightened func(store.TightenedFile)) (*store.SQLite, *sshca.CA, error) {
	if err := unfinishedBackup(dir); err != nil {
		return nil, nil, err
	}
	if err := emptyDatabase(dir); err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("state dir: %w", err)
	}
	if err := checkStateAccess(dir); err != nil {
		return nil, nil, err
	}
	st, err := store.Open(ctx, filepath.Join(dir, dbFile))
	if err != nil {
		return nil, nil, err
	}
	for _, f := range st.Tightened() {
		tightened(f)
	}
	ca, err := sshca.LoadOrCreate(filepath.Join(dir, caKeyFile))
	if err != nil {
		_ = st.Close()
		return nil, nil, err
	}
	return st, ca, nil
}

// logTightened logs a database file openState made its owner's alone.
func logTightened(logger *slog.Logger) func(store.TightenedFile) {
	return func(f store.TightenedFile) {
		logger.Warn("state database: a file was open to group or others; made it the gateway user's alone (it holds token hashes, pinned host keys and the audit log)",
			"file", f.Path, "was", fmt.Sprintf("%#o", f.Was), "now", fmt.Sprintf("%#o", f.Now))
	}
}

// serve runs the gateway until ctx ends (SIGTERM), then shuts down
// gracefully: refuse new work, close tunnels and relays, wait. ready, when
// set, gets the bound address once the gateway accepts connections.
func serve(ctx context.Context, logger *slog.Logger, c *serveConfig, ready func(addr net.Addr)) error {
	if !c.stateLocked {
		unlock, err := lockStateDir(c.StateDir)
		if err != nil {
			return err
		}
		defer unlock()
	}
	newCA := caKeyMissing(c.StateDir)
	st, ca, err := openState(ctx, c.StateDir, logTightened(logger))
	if err != nil {
		return err
	}
	defer st.Close()
	if newCA {
		if n := pinnedAgents(ctx, st); n > 0 {
			logger.Error("SSH CA: the state dir had no SSH CA key, so a new CA was made; "+newCAFix(n), "file", filepath.Join(c.StateDir, caKeyFile), "hosts", n)
		}
	}
	var tlsc tlsCerts
	if c.TLSCert != "" {
		if tlsc, err = loadTLSCerts(c.TLSCert, c.TLSKey, logger); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		if _, port, _ := net.SplitHostPort(c.Listen); c.PublicURL == "" && port != "0" {
			// Before the hooks: they make links and origin checks of it.
			if c.PublicURL, err = tlsc.publicURL(c.Listen); err != nil {
				return fmt.Errorf("serve: %w", err)
			}
		}
	}
	if opened, err := os.Stat(filepath.Join(c.StateDir, dbFile)); err == nil {
		defer watchStateDB(ctx, logger, filepath.Join(c.StateDir, dbFile), opened, stateWatchInterval)()
	}
	srv, err := gateway.New(ctx, logger, st, ca, c.gatewayConfig())
	if err != nil {
		return err
	}
	var cleanups []func()
	runCleanups := func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
		cleanups = nil
	}
	defer runCleanups()
	defer srv.Close()
	tlsc.register(srv.Metrics())
	s := &serving{Config: c, Server: srv, Logger: logger}
	for _, hook := range serveHooks {
		cleanup, err := hook(ctx, s)
		if err != nil {
			return err
		}
		if cleanup != nil {
			cleanups = append(cleanups, cleanup)
		}
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", c.Listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", c.Listen, err)
	}
	if tlsc != nil {
		ln = tls.NewListener(ln, tlsc.config())
	}
	public := c.PublicURL
	if public == "" && tlsc != nil {
		// --listen's port 0: the port is known now.
		public, err = tlsc.publicURL(ln.Addr().String())
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("serve: %w", err)
		}
		c.PublicURL = public
	}
	if public == "" {
		public = "http://" + ln.Addr().String()
		// Hooks read it at request time (links from preview origins back
		// to the gateway); set before Serve, so no request sees it unset.
		c.PublicURL = public
	}
	logger.Info("gateway serving", "addr", ln.Addr().String(), "publicURL", public, "stateDir", c.StateDir,
		"caKey", ca.AuthorizedKey(), "certTTL", c.CertTTL, "tls", tlsc != nil, "version", buildinfo.Version())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	if ready != nil {
		ready(ln.Addr())
	}
	select {
	case err = <-errc:
		_ = srv.Close()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	_ = srv.Close()
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	// The hooks' cleanups (Docker executions' tunnels, the tools volume's
	// holder) take about a second with sandboxes in use: "stopped" comes
	// after them, so that it means the process is about to exit.
	t0 := time.Now()
	runCleanups()
	logger.Info("stopped", "cleanup", time.Since(t0).Round(time.Millisecond))
	return nil
}

// stateWatchInterval is how often serve checks that its database's path
// still names the file it opened (a variable for tests).
var stateWatchInterval = 30 * time.Second

// watchStateDB says once, as an error, when path stops naming the file
// opened: deleted or replaced while the gateway runs (a cleanup script, a
// "reset"), the gateway goes on with the file it opened, and what it
// writes from then on is lost when it stops, with nothing to show it.
// stop ends the watch and waits for it.
func watchStateDB(ctx context.Context, logger *slog.Logger, path string, opened os.FileInfo, interval time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if now, err := os.Stat(path); err == nil && os.SameFile(now, opened) {
				continue
			}
			logger.Error("the state database was deleted or replaced while the gateway ran: the gateway goes on with the file it opened, and what it writes from now on (tokens, host pins, the audit log) is lost when it stops. Stop the gateway, put the database back from a backup, and start it again",
				"path", path)
			return
		}
	}()
	return func() { cancel(); <-done }
}
