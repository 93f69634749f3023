// Package gateway is the gateway's server core: the HTTP API (/v1 hosts,
// certificates, the agents' tunnel endpoint and the SSH relay), health and
// metrics endpoints, authentication with per-source rate limiting, the
// registry of live tunnels, and the admission of direct sessions, which a
// caller runs straight to an agent's own listener while the gateway, asked
// over the agent's tunnel, admits and ends them (direct.go). SSH is end to
// end between caller and agent: the relay copies bytes and never decrypts
// them.
//
// Others add routes (web UI, executions, previews, the browser pty) on
// Server.Mux and reach hosts through Server.Tunnels.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/buildinfo"
	"github.com/hostgate/hostgate/internal/gateway/sshca"
	"github.com/hostgate/hostgate/internal/muxallow"
	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/metrics"
)

// Config holds the gateway's knobs; nil or zero fields mean defaults.
type Config struct {
	// CertTTL is the lifetime of issued user certificates; 0 means
	// sshca.DefaultTTL.
	CertTTL time.Duration
	// MaxStreamsPerTunnel bounds relayed streams open at once per host;
	// 0 means 256.
	MaxStreamsPerTunnel int
	// SessionCookie is the browser session cookie's name; default
	// SessionCookie, SecureSessionCookie behind https.
	SessionCookie string
	// UnknownTokenFix is what the 401 of a token the store does not hold
	// tells its holder to do; empty: ask the gateway's admin for one.
	// gateway dev's person is the admin, and each of its starts ends the
	// admin token the one before printed, so it says so instead.
	UnknownTokenFix string
	// TrustedOrigins are origins (scheme://host[:port]) whose requests
	// the session cookie's cross-origin check takes for the gateway's
	// own besides the request's Host: --public-url's, which behind a
	// proxy that passes Host without its port (nginx's `proxy_set_header
	// Host $host`) is not the Host, where a browser without fetch
	// metadata is judged by its Origin alone.
	TrustedOrigins []string
	// ReadLimit bounds one WebSocket message from agents and callers; 0
	// means 256 KiB (bytestream peers send at most 64 KiB).
	ReadLimit int64
	// TunnelMux tunes the yamux session over each agent tunnel; nil means
	// DefaultTunnelMux.
	TunnelMux *bytestream.MuxConfig
	// RelayMemory bounds the bytes that the streams of all agent tunnels
	// together hold unread: what hosts sent and callers have not read
	// yet. A stream's window beyond yamux's initial 256 KiB is granted
	// out of it, so a slow caller's session holds up to the tunnel's 4 MiB
	// window only while the budget lasts; past it, the hosts of the
	// sessions holding the most wait. 0 means DefaultRelayMemory;
	// negative means no bound. TunnelMux.RecvBudget, if set, wins.
	RelayMemory int64
	// AuditRequired makes the audit log fail closed: while its writes
	// fail, requests that would start a session, an exec or a login are
	// refused with 503 (auditgate.go), where by default they go on
	// unrecorded. Open sessions go on either way.
	AuditRequired bool
	// StateDir is the directory of the state database: /readyz reports
	// "degraded" and hostgate_state_free_bytes the free space of its
	// filesystem (diskspace.go), absent while it cannot be measured.
	// Empty: not watched.
	StateDir string
	// AuthFailureLimit is how many failed authentications a source (an
	// IPv4 address, an IPv6 address's /64) may make per AuthFailureWindow
	// before it gets 429; 0 means 20.
	AuthFailureLimit int
	// AuthFailureWindow: 0 means one minute.
	AuthFailureWindow time.Duration
	// Route, when set, is how callers reach hosts (Open, Connected)
	// instead of this gateway's own registry: the seam for a
	// multi-replica relay that finds the replica holding a host's tunnel.
	// It is built from the local registry, where this replica's agents
	// register.
	Route func(local *Registry) Tunnels
	// TrustedProxies are the addresses of reverse proxies in front of the
	// gateway: for requests from them the client is read from
	// X-Forwarded-For (rate limits, audit log, logs). Empty trusts none.
	TrustedProxies []netip.Prefix
	// TokenRecheck is how often the tokens of live relayed sessions and
	// agent tunnels are looked up again, so that a revoked or expired
	// token ends what it opened; 0 means DefaultTokenRecheck.
	TokenRecheck time.Duration
	// DirectOff refuses direct sessions (gateway serve --direct-sessions=off): the
	// gateway ignores an agent's wire.HeaderDirect, so it neither answers
	// wire.DirectOn nor publishes the agent's addresses nor takes its
	// control stream, and every session goes through the relay.
	DirectOff bool
	// MaxDirectPerTunnel bounds the direct sessions the gateway admits
	// through one agent's tunnel at once; 0 means 256, the relay's own
	// bound per tunnel (MaxStreamsPerTunnel's default).
	MaxDirectPerTunnel int
	// Registry receives the gateway's metrics and is served at /metrics;
	// nil means a new registry (with Go and process collectors).
	Registry *prometheus.Registry
}

// DefaultRelayMemory is Config.RelayMemory's default: 64 relayed
// sessions carrying bulk data at once at the tunnel's full 4 MiB window
// (idle and interactive ones reserve none of it), with every other one at
// 256 KiB, before a host's writes wait for its callers to read.
const DefaultRelayMemory = 256 << 20

// DefaultTunnelMux is the yamux configuration of agent tunnels when
// Config.TunnelMux is nil. An agent opens one stream at most, the control
// stream of its direct sessions (direct.go), so all but one are refused. The 4 MiB stream window is how many bytes the gateway holds at
// most for a relayed session whose caller reads slower than its host sends
// (in a buffer of up to twice that, given back within 5 s of the caller
// catching up: see shrinkEvery), so at most MaxStreamsPerTunnel times that
// per host, and all hosts' sessions together what RelayMemory grants.
// With 1 MiB the agent waited for window updates, and downloads through
// the gateway ran 5-8% slower.
//
// A stream the gateway closes is closed both ways (CloseEndsReads): an
// agent that never closed its side kept each closed stream's window of
// bytes buffered for 5 minutes, with its stream slot already given back,
// so one host's agent and a caller opening and closing sessions grew the
// gateway without bound.
func DefaultTunnelMux() *bytestream.MuxConfig {
	return &bytestream.MuxConfig{StreamWindow: 4 << 20, MaxStreams: 1, AcceptBacklog: 1, CloseEndsReads: true}
}

func (c *Config) withDefaults() Config {
	var d Config
	if c != nil {
		d = *c
	}
	if d.SessionCookie == "" {
		d.SessionCookie = SessionCookie
	}
	if d.CertTTL == 0 {
		d.CertTTL = sshca.DefaultTTL
	}
	if d.MaxStreamsPerTunnel <= 0 {
		d.MaxStreamsPerTunnel = 256
	}
	if d.MaxDirectPerTunnel <= 0 {
		d.MaxDirectPerTunnel = 256
	}
	if d.ReadLimit <= 0 {
		d.ReadLimit = 256 << 10
	}
	if d.TunnelMux == nil {
		d.TunnelMux = DefaultTunnelMux()
	}
	if d.RelayMemory == 0 {
		d.RelayMemory = DefaultRelayMemory
	}
	if d.RelayMemory > 0 && d.TunnelMux.RecvBudget == nil {
		mux := *d.TunnelMux
		mux.RecvBudget = bytestream.NewRecvBudget(d.RelayMemory)
		d.TunnelMux = &mux
	}
	if d.AuthFailureLimit <= 0 {
		d.AuthFailureLimit = 20
	}
	if d.AuthFailureWindow <= 0 {
		d.AuthFailureWindow = time.Minute
	}
	if d.TokenRecheck <= 0 {
		d.TokenRecheck = DefaultTokenRecheck
	}
	if d.Registry == nil {
		d.Registry = prometheus.NewRegistry()
		// The build, so that an upgrade shows in the scrape and a fleet's
		// gateways can be told apart by it, as gateway version and the
		// startup log tell it.
		build := prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "hostgate", Name: "build_info",
			Help:        "Always 1; its version label is the gateway's build: commit, commit time and Go version (gateway version).",
			ConstLabels: prometheus.Labels{"version": buildinfo.Version()},
		})
		build.Set(1)
		d.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), build)
	}
	return d
}

// Server is the gateway. Create it with New, serve Handler (or call
// Serve), and Close it.
type Server struct {
	logger   *slog.Logger
	store    store.Store
	ca       *sshca.CA
	cfg      Config
	metrics  *metrics.Gateway
	tunnels  *Registry
	route    Tunnels // s.tunnels unless Config.Route
	mux      *http.ServeMux
	limiter  *limiter
	csrf     *http.CrossOriginProtection
	auth     authCache // tokens that authenticated lately
	tokenSet tokenSet  // the store's tokens by id, for LiveToken

	lookupFailures *outageLog // token lookups the store failed, for the log
	storeReads     *outageLog // the API's host reads the store failed (storeError), for the log
	storeWrites    *outageLog // agents' enrollments the store failed, for the log

	unreadableMu  sync.Mutex
	unreadableIDs map[string]bool // token rows last found unreadable, logged once a change

	// ctx ends when Close starts; relays and tunnels watch it.
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu            sync.Mutex
	front         func(http.Handler) http.Handler
	meFields      func(*http.Request, store.Token) map[string]any          // SetMeFields; guarded by mu
	hostEnded     func(ctx context.Context, id string) (string, time.Time) // SetHostEnded; guarded by mu
	sessionEnded  func(http.ResponseWriter, *http.Request)                 // SetSessionEnded; guarded by mu
	closing       bool
	wg            sync.WaitGroup // every tunnel and relay (hijacked conns outlive net/http's tracking)
	live          liveSet        // relays and tunnels by token, for revocation
	flaps         flaps          // hosts whose tunnels replace each other
	agentRefusals refusals       // spells of agents turned away, for the log
	proving       sync.Map       // host id → struct{}: its agent is proving a key to pin
	servers       []*http.Server

	testHookRegistered func(hostID string) // tests: called just after an agent's tunnel is registered

	ready    readiness // /readyz's checks and last answer
	auditLog auditLog  // failures to write the audit log
}

// New returns a gateway over st, signing certificates with ca. ctx carries
// values only; the server lives until Close.
func New(ctx context.Context, logger *slog.Logger, st store.Store, ca *sshca.CA, cfg *Config) (*Server, error) {
	if st == nil || ca == nil {
		return nil, errors.New("gateway: store and CA are required")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := cfg.withDefaults()
	if c.CertTTL < 0 || c.CertTTL > sshca.MaxTTL {
		return nil, fmt.Errorf("gateway: cert ttl %v out of range (0, %v]", c.CertTTL, sshca.MaxTTL)
	}
	s := &Server{
		logger:   logger,
		store:    st,
		ca:       ca,
		cfg:      c,
		metrics:  metrics.NewGateway(c.Registry),
		mux:      http.NewServeMux(),
		limiter:  newLimiter(c.AuthFailureLimit, c.AuthFailureWindow, time.Now),
		csrf:     http.NewCrossOriginProtection(),
		auth:     authCache{ttl: min(authCacheTTL, c.TokenRecheck)},
		tokenSet: tokenSet{ttl: min(authCacheTTL, c.TokenRecheck)},

		lookupFailures: lookupFailures(lookupFailureReminder),
		storeReads:     storeFailures("reads of hosts", "the API's host routes and agents' connects"),
		storeWrites:    storeFailures("writes of agents' enrollments", "agents' connects"),
	}
	for _, o := range c.TrustedOrigins {
		if err := s.csrf.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("gateway: trusted origin: %w: want scheme://host[:port]", err)
		}
	}
	s.live.s = s
	s.ready.ttl = readyTTL
	if c.StateDir != "" {
		s.ready.disk = newDiskWatch(c.StateDir)
		s.ready.disk.register(c.Registry)
	}
	if b := c.TunnelMux.RecvBudget; b != nil {
		c.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "hostgate", Name: "relay_held_bytes",
			Help: "Bytes that hosts sent through their tunnels and callers have not read yet, held by the gateway (bounded by its relay memory).",
		}, func() float64 { return float64(b.Held()) }))
	}
	s.tunnels = NewRegistry(c.MaxStreamsPerTunnel, func(n int) { s.metrics.TunnelsConnected.Set(float64(n)) })
	c.Registry.MustRegister(agentTunnels{s.tunnels})
	s.route = s.tunnels
	if c.Route != nil {
		s.route = c.Route(s.tunnels)
	}
	s.ctx, s.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	s.routes()
	return s, nil
}

// maxScrapesInFlight bounds the /metrics scrapes served at once: each
// walks every tunnel under the registry's lock, so scrapes without bound
// (anyone who reaches the listener can send them) would hold it from the
// agents that connect and the relays that look their host up. One
// Prometheus, or two for redundancy, scrapes one at a time; one past the
// bound is 503 at once.
const maxScrapesInFlight = 4

func (s *Server) routes() {
	m := s.mux
	m.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	m.HandleFunc("GET /readyz", s.readyz)
	m.Handle("GET /metrics", promhttp.HandlerFor(s.cfg.Registry, promhttp.HandlerOpts{MaxRequestsInFlight: maxScrapesInFlight}))
	m.HandleFunc("GET /v1/me", s.me)
	m.HandleFunc("GET /v1/hosts", s.listHosts)
	m.HandleFunc("GET /v1/hosts/{id}", s.getHost)
	m.HandleFunc("POST /v1/hosts/{id}/certificates", s.certificate)
	m.HandleFunc("GET /v1/hosts/{id}/ssh", s.relaySSH)
	m.HandleFunc("GET /v1/agents/connect", s.agentConnect)
	// Anything else under /v1 answers JSON, not net/http's text 404 or
	// 405. This catch-all matches every method, so the mux never answers
	// 405 itself: a path with routes for other methods gets it here.
	m.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		if allow := muxallow.Methods(m, r, "/v1/", http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			WriteError(w, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not allowed here; use "+strings.Join(allow, " or "))
			return
		}
		WriteError(w, http.StatusNotFound, "not_found", "no such endpoint")
	})
}

// Handler serves the gateway's HTTP API, behind the front handler when one
// is set.
func (s *Server) Handler() http.Handler {
	s.mu.Lock()
	defer s.mu.Unlock()
	var h http.Handler = s.mux
	if s.front != nil {
		h = s.front(h)
	}
	if s.cfg.AuditRequired {
		h = s.auditRequired(h)
	}
	return boundWrites(boundBodies(h))
}

// SetFront puts a handler in front of the router, for routing the router
// cannot express (preview subdomains match on a wildcard host). Call it
// before Serve.
func (s *Server) SetFront(front func(next http.Handler) http.Handler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.front = front
}

// Mux is the router; others register their routes on it (Go 1.22
// patterns) before serving.
func (s *Server) Mux() *http.ServeMux { return s.mux }

// TunnelMux is the yamux configuration of agent tunnels, with the relay
// memory budget (Config.RelayMemory) they share: sandboxes' agents, which
// the executions API connects, use it too, so their sessions count
// against the same budget. It counts their misuse in
// hostgate_agent_misuse_total as the gateway's own tunnels' (whoever
// connects them logs it): a sandbox's agent taken over by its code went
// uncounted, the metric saying only of machine agents.
func (s *Server) TunnelMux() *bytestream.MuxConfig {
	mc := *s.cfg.TunnelMux
	mc.OnMisuse = s.countMisuse
	return &mc
}

// countMisuse counts one frame of an agent's misuse.
func (s *Server) countMisuse(m bytestream.MuxMisuse) {
	switch m {
	case bytestream.MisuseStreamRefused:
		s.metrics.AgentMisuse.WithLabelValues(metrics.MisuseStreamRefused).Inc()
	case bytestream.MisuseEmptyWindowUpdate:
		s.metrics.AgentMisuse.WithLabelValues(metrics.MisuseEmptyWindowUpdate).Inc()
	}
}

// Tunnels is the registry of live tunnels: Docker executions Register their
// tunnels here, and the browser pty and previews Open streams through it.
func (s *Server) Tunnels() *Registry { return s.tunnels }

// Store is the gateway's state store.
func (s *Server) Store() store.Store { return s.store }

// CA is the gateway's user certificate authority.
func (s *Server) CA() *sshca.CA { return s.ca }

// Metrics is the gateway's Prometheus registry, for other collectors.
func (s *Server) Metrics() *prometheus.Registry { return s.cfg.Registry }

// Context ends when the gateway starts closing; long-lived work started
// by added routes should stop with it.
func (s *Server) Context() context.Context { return s.ctx }

// Serve accepts HTTP connections on ln until Close, with header and idle
// timeouts set. It returns http.ErrServerClosed after Close.
func (s *Server) Serve(ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          log.New(serverErrors{s.logger.Handler()}, "", 0),
		BaseContext:       func(net.Listener) context.Context { return s.ctx },
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		_ = ln.Close()
		return http.ErrServerClosed
	}
	s.servers = append(s.servers, hs)
	s.mu.Unlock()
	return hs.Serve(ln)
}

// serverErrors is the HTTP server's error log: its lines at Warn, but a
// failed TLS handshake at Debug, as Caddy logs them, and a handler's
// panic at Error. A gateway serving TLS itself on the internet meets
// scanners every minute, and a caller that does not trust the certificate
// says so on its own side; a panic, which net/http recovers and cuts its
// caller's connection for, is a bug of the gateway that an alert on
// errors must see.
type serverErrors struct{ h slog.Handler }

func (w serverErrors) Write(p []byte) (int, error) {
	msg := strings.TrimSuffix(string(p), "\n")
	level := slog.LevelWarn
	switch {
	case strings.HasPrefix(msg, "http: TLS handshake error"):
		level = slog.LevelDebug
	case strings.HasPrefix(msg, "http: panic serving"):
		level = slog.LevelError
	}
	ctx := context.Background()
	if w.h.Enabled(ctx, level) {
		_ = w.h.Handle(ctx, slog.NewRecord(time.Now(), level, msg, 0))
	}
	return len(p), nil
}

// track registers one long-lived piece of work (a tunnel or a relay); it
// returns false once Close has started.
func (s *Server) track() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.wg.Add(1)
	return true
}

// Close stops serving: it refuses new work, stops the HTTP servers started
// by Serve, closes every tunnel (which ends every relay) and waits for all
// of them. The store is the caller's to close.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closing = true
	servers := s.servers
	s.mu.Unlock()
	s.cancel(ErrShuttingDown) // the cause requests in flight see
	s.tunnels.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, hs := range servers {
		if err := hs.Shutdown(ctx); err != nil {
			_ = hs.Close()
		}
	}
	s.wg.Wait()
	return nil
}
