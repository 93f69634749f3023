package forward

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/redirect"
)

// DialFunc opens a connection to localhost:port on the host hostID, through
// the host's tunnel. It should wrap ErrUnknownHost when no such host exists
// and ErrHostUnavailable when the host is not connected, so the proxy can
// tell those apart from a closed port.
type DialFunc func(ctx context.Context, hostID string, port int) (net.Conn, error)

// ErrHostUnavailable marks a dial that failed because the host is offline
// (503), as opposed to a port nobody listens on (502).
var ErrHostUnavailable = errors.New("forward: host unavailable")

// ErrUnknownHost marks a dial that failed because no host has that id
// (404).
var ErrUnknownHost = errors.New("forward: no such host")

// HostGoneError is a DialFunc's error that says why the host cannot be
// reached, beyond the ErrUnknownHost or ErrHostUnavailable Err wraps: the
// preview's answer names it, where it said "not connected" alone.
type HostGoneError struct {
	Err error
	// Ended says the host is gone for good: a sandbox whose execution
	// ended. The answer is then 410 gone, as the gateway's API answers
	// the execution and its host: reloading will not bring it back.
	Ended bool
	// Reason and EndedAt, with Ended, say why and when the execution
	// ended, as the executions API's gone answer does ("runtime",
	// "terminated", …): a program tells an ended sandbox from a path
	// its dev server lacks by the code, and reads these.
	Reason  string
	EndedAt time.Time
	// Why is for a person, lower case, without a final period: "its
	// execution ended (reason runtime)", "its agent was refused 5s ago:
	// …".
	Why string
}

func (e *HostGoneError) Error() string {
	if e.Why == "" {
		return e.Err.Error()
	}
	return e.Err.Error() + ": " + e.Why
}

func (e *HostGoneError) Unwrap() error { return e.Err }

// ForbiddenError is PreviewConfig.Authorize's error for credentials that
// are good but do not cover the host (a client token made for other
// hosts, an agent's token): the preview answers 403 forbidden with Msg and
// Hint, unless a public share lets the request in. Without it such a
// caller got 401 "Log in to see this preview", which says the credentials
// are missing or bad, and a client logging in again with the same token
// got the same.
type ForbiddenError struct {
	Msg  string // what is refused, for a person: "Host h1 is not among …."
	Hint string // what to do about it
}

func (e *ForbiddenError) Error() string { return "forward: forbidden: " + e.Msg }

// ErrUnavailable marks a PreviewConfig.Redeem that could not decide
// (the store it checks against cannot answer): 503, not 401.
var ErrUnavailable = errors.New("forward: authorization unavailable")

// AmbiguousHostError is what PreviewConfig.ResolveHost returns when a
// subdomain's host label, which browsers lower-case, names several hosts
// whose ids differ only in case: the path form, which keeps the case,
// reaches each.
type AmbiguousHostError struct {
	Label string   // the host label, lower case
	IDs   []string // the hosts it could be
}

func (e *AmbiguousHostError) Error() string {
	return fmt.Sprintf("forward: host name %q matches hosts %s, whose ids differ only in case", e.Label, strings.Join(e.IDs, ", "))
}

// PreviewConfig holds the preview proxy's knobs; nil or zero fields mean
// defaults.
//
// The cookie contract with the gateway:
//   - The gateway's session cookie (SessionCookie) is host-only: set without
//     a Domain attribute, on the gateway's own host name, HttpOnly,
//     SameSite=Lax or Strict. Subdomain previews therefore never receive it.
//     The proxy also strips it from every proxied request and drops any
//     Set-Cookie of that name from upstream responses, so a dev server
//     neither sees nor plants it.
//   - The path form lives on the gateway's origin, so its pages could call
//     the gateway API with the browser's cookie. The proxy therefore sends
//     path-form responses with "Content-Security-Policy: sandbox …" without
//     allow-same-origin: the page runs in an opaque origin and cannot read
//     gateway responses or cookies. Prefer the subdomain form.
//   - A subdomain preview learns who the browser is from its own cookie
//     (PreviewCookie), host-only on that preview origin. The gateway's login
//     flow ends by sending the browser to
//     {scheme}://{port}--{host}.{domain}/.hostgate/auth?ticket=T&next=/path; the
//     proxy calls Redeem(ticket, host, port) and, when it succeeds, sets the
//     preview cookie to the value Redeem returned and redirects to next.
//     Authorize then checks that cookie. Tickets should be single-use,
//     short-lived and bound to the host and port. The preview cookie is
//     stripped before forwarding, like the session cookie.
type PreviewConfig struct {
	// Domain is the preview domain ("preview.localhost": *.localhost
	// resolves to loopback in browsers with no DNS). Empty disables the
	// subdomain form.
	Domain string
	// PathPrefix is the path form's prefix. Default "/preview/".
	PathPrefix string
	// Authorize decides whether r may reach port on hostID. When it says no,
	// browsers are redirected to loginURL (when not empty) and others get
	// 401. A non-nil err says it could not decide (the store behind the
	// credentials is down, or cannot yet tell a live token from a revoked
	// one): unless a public share lets the request in, it is answered 503
	// store_unavailable, not sent to log in with credentials that may be
	// good. A *ForbiddenError instead says the credentials are good and do
	// not cover hostID: 403 forbidden, after the shares, in place of the
	// login redirect or the 401. Nil refuses everything but public shares:
	// previews are private by default.
	Authorize func(r *http.Request, hostID string, port int) (ok bool, loginURL string, err error)
	// Shares, when set, makes shared ports public until their expiry. A
	// Lookup error answers 503 store_unavailable: whether the port is
	// public is not known, and a 401 would say it is private.
	Shares Shares
	// ResolveHost maps a subdomain's host label to a host id. Browsers
	// lower-case host names, so "3000--MyHost.{domain}" arrives as
	// "myhost": ResolveHost should return the one enrolled id equal to
	// label under ASCII case folding, an error wrapping ErrUnknownHost
	// when there is none, and an *AmbiguousHostError when there are
	// several. Nil takes the label as the id (host ids in lower case).
	ResolveHost func(ctx context.Context, label string) (string, error)
	// Redeem exchanges a login ticket for the preview cookie's value and
	// expiry (see the contract above). Nil disables /.hostgate/auth. An
	// error wrapping ErrUnavailable answers 503 store_unavailable (the
	// ticket may be good: the browser should try again), any other 401.
	Redeem func(ctx context.Context, ticket, hostID string, port int) (value string, expires time.Time, err error)
	// SessionCookie is the gateway's session cookie name. Default
	// "hostgate_session".
	SessionCookie string
	// PreviewCookie is the subdomain previews' own cookie name. Default
	// "hostgate_preview".
	PreviewCookie string
	// SecureCookie marks the preview cookie Secure. Set it when browsers
	// reach previews over https through a TLS-terminating proxy, where the
	// requests the proxy forwards carry no TLS; a request that came over
	// TLS gets a Secure cookie anyway.
	SecureCookie bool
	// ForwardAuthorization passes the Authorization header to the dev
	// server. Off by default: it usually carries a gateway token, which a
	// host must never see.
	ForwardAuthorization bool
	// UnsandboxedPathForm turns off the CSP sandbox on path-form responses.
	// Only for gateways whose API does not accept the browser's cookie.
	UnsandboxedPathForm bool
	// MaxIdleConnsPerTarget bounds pooled idle connections per host and
	// port. Default 8.
	MaxIdleConnsPerTarget int
	// MaxIdleConns bounds pooled idle connections over all targets, each
	// a channel on its host's SSH connection and two goroutines here.
	// Default 1024.
	MaxIdleConns int
	// NavigationTimeout bounds how long a browser's page load (a GET or
	// HEAD navigation: Sec-Fetch-Mode navigate, or text/html asked for
	// without fetch metadata) waits for the dev server's response
	// headers; past it the browser gets a 504 page naming the host and
	// port instead of a tab that spins for as long as the dev server
	// hangs. Only page loads: fetch calls, event streams and WebSockets
	// may wait as long as the dev server takes, and a response whose
	// headers came streams on unbounded. Zero means
	// DefaultNavigationTimeout, a negative value no bound.
	NavigationTimeout time.Duration
	// HostLost, when set, is asked after a round trip that broke off
	// without an answer whether the host went with it (its agent stopped
	// or lost its network), and returns then an error wrapping
	// ErrHostUnavailable (a *HostGoneError to say why), nil while the
	// host is there. The page then says the host went, not that the dev
	// server answered something other than HTTP, which both look like
	// here: the connection ended.
	HostLost func(ctx context.Context, hostID string) error
	// ClientIP, when set, is the viewer's IP address, which the dev
	// server gets in X-Forwarded-For: behind a reverse proxy the request's
	// peer is the proxy, and a dev server that trusts loopback or private
	// proxies (Rails) took every viewer for that address. Nil: the peer.
	ClientIP func(r *http.Request) string
	// HomeURL, when set, is where the preview's pages link back to (the
	// gateway's host list), for r: on a preview origin the gateway is
	// another site, and a person stuck on a page had no way back but the
	// address bar.
	HomeURL func(r *http.Request) string
	// Logger gets one line per failed upstream dial, at debug for those
	// the viewer's page explains (no such host, offline, nothing
	// listening), which a waiting page repeats. Default: discard.
	Logger *slog.Logger
}

// DefaultNavigationTimeout is PreviewConfig.NavigationTimeout's default.
// Long enough for a dev server's first build of a page (webpack, Next.js
// and Vite cold starts take seconds to tens of seconds), and under the 60
// s that nginx's default proxy_read_timeout and load balancers' idle
// timeouts (AWS ALB's) allow a response in front of the gateway, so a
// browser behind them gets this page, which names the dev server, and not
// their bare 504.
const DefaultNavigationTimeout = 45 * time.Second

// upstreamIdleTimeout is how long an idle connection to a dev server is
// kept for the next request. Under the 5 s after which Node's HTTP server
// (Vite, Next.js, Express) and uvicorn close an idle keep-alive
// connection: a request sent on one as the dev server closes it is lost,
// and net/http sends again only those without a body (a GET), so a form's
// POST got a 502. The second to spare covers the round trip through the
// tunnel (the dev server's clock starts as it sends the answer, this one
// as the answer arrives). Past it a request opens a new channel on the
// host's SSH connection, one round trip to the host.
const upstreamIdleTimeout = 4 * time.Second

// Preview is the preview proxy. It is an http.Handler the gateway mounts for
// the preview domain's hosts and for the path prefix.
type Preview struct {
	cfg       PreviewConfig
	dial      DialFunc
	transport *http.Transport
	proxy     *httputil.ReverseProxy
	log       *slog.Logger

	sharedMu sync.Mutex
	shared   map[string]int // requests in flight through a share, per host (guarded by sharedMu)
}

// maxSharedPerHost bounds the requests a host's public shares carry at
// once. Every preview of a host goes through one SSH connection, whose
// channels the agent caps (64): without a bound, anyone holding a share
// open (WebSockets, long polls) could take them all and leave every
// preview of that host, on every port, to everyone, answering 502.
const maxSharedPerHost = 32

// authPath is the reserved path on subdomain previews that turns a login
// ticket into the preview cookie.
const authPath = "/.hostgate/auth"

// sandboxCSP runs path-form pages in an opaque origin (no allow-same-origin).
const sandboxCSP = "sandbox allow-scripts allow-forms allow-popups allow-popups-to-escape-sandbox allow-modals allow-downloads"

// NewPreview returns the preview proxy; dial reaches a port on a host.
func NewPreview(dial DialFunc, cfg *PreviewConfig) (*Preview, error) {
	if dial == nil {
		return nil, errors.New("forward: preview needs a dial function")
	}
	var c PreviewConfig
	if cfg != nil {
		c = *cfg
	}
	if c.PathPrefix == "" {
		c.PathPrefix = "/preview/"
	}
	if !strings.HasPrefix(c.PathPrefix, "/") || !strings.HasSuffix(c.PathPrefix, "/") {
		return nil, fmt.Errorf("forward: preview path prefix %q must start and end with /", c.PathPrefix)
	}
	c.Domain = strings.ToLower(strings.TrimSuffix(c.Domain, "."))
	if strings.Contains(c.Domain, ":") || strings.HasPrefix(c.Domain, ".") {
		return nil, fmt.Errorf("forward: preview domain %q: want a host name without port", c.Domain)
	}
	if c.SessionCookie == "" {
		c.SessionCookie = "hostgate_session"
	}
	if c.PreviewCookie == "" {
		c.PreviewCookie = "hostgate_preview"
	}
	if c.MaxIdleConnsPerTarget <= 0 {
		c.MaxIdleConnsPerTarget = 8
	}
	if c.NavigationTimeout == 0 {
		c.NavigationTimeout = DefaultNavigationTimeout
	}
	if c.MaxIdleConns <= 0 {
		// Per target alone, a host answering on every port and a caller
		// asking each of them kept 8 idle channels per port for
		// upstreamIdleTimeout.
		c.MaxIdleConns = 1024
	}
	p := &Preview{cfg: c, dial: dial, log: c.Logger}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	p.transport = &http.Transport{
		// Proxy stays nil: HTTP_PROXY from the gateway's environment must
		// never apply to tunnel dials.
		DialContext:            p.dialTarget,
		MaxIdleConnsPerHost:    c.MaxIdleConnsPerTarget,
		MaxIdleConns:           c.MaxIdleConns,
		IdleConnTimeout:        upstreamIdleTimeout,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 1 << 20,
		// Pass encodings through untouched.
		DisableCompression: true,
	}
	p.proxy = &httputil.ReverseProxy{
		Rewrite:   p.rewrite,
		Transport: p.transport,
		// Each write reaches the client at once (boundWriter flushes it),
		// but a response's headers wait for its first body bytes: -1 here
		// also flushed them alone, from a timer goroutine started for every
		// response (two writes and a goroutine per small page). Server-sent
		// events and bodies of unknown length still get -1 from
		// ReverseProxy, so their headers leave before the first event.
		FlushInterval:  0,
		BufferPool:     copyBuffers{},
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.upstreamError,
		ErrorLog:       slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
	}
	return p, nil
}

// copyBuffers lends ReverseProxy the buffers it copies response bodies
// through. Without a pool it makes a zeroed 32 KiB one for every response:
// on a dev server's page of small modules, most of what a preview request
// allocated, and so most of the gateway's garbage collection.
type copyBuffers struct{}

// copyBufferSize is ReverseProxy's own.
const copyBufferSize = 32 << 10

var copyBufferPool = sync.Pool{New: func() any { return new([copyBufferSize]byte) }}

func (copyBuffers) Get() []byte { return copyBufferPool.Get().(*[copyBufferSize]byte)[:] }

func (copyBuffers) Put(b []byte) {
	if len(b) == copyBufferSize {
		copyBufferPool.Put((*[copyBufferSize]byte)(b))
	}
}

// Close drops pooled upstream connections. Requests in flight go on.
func (p *Preview) Close() { p.transport.CloseIdleConnections() }

// Match reports whether r is a preview request: its host is a preview
// subdomain, or its path is under the path prefix.
func (p *Preview) Match(r *http.Request) bool {
	if _, _, ok := parseSubdomain(r.Host, p.cfg.Domain); ok || looksLikeSubdomain(r.Host, p.cfg.Domain) {
		return true
	}
	return strings.HasPrefix(r.URL.Path, p.cfg.PathPrefix)
}

// ctxKey carries the target from ServeHTTP to rewrite and the dialer.
type ctxKey struct{}

// ServeHTTP routes r by its host (subdomain form) or path (path form),
// checks shares and Authorize, and proxies it to the host's port.
func (p *Preview) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var t target
	if id, port, ok := parseSubdomain(r.Host, p.cfg.Domain); ok {
		t = target{hostID: id, port: port, rawPath: r.URL.EscapedPath()}
		if t.rawPath == "" {
			t.rawPath = "/"
		}
		if !p.resolve(w, r, &t) {
			return
		}
		if r.URL.Path == authPath {
			p.redeem(w, r, t)
			return
		}
		if p.siblingPreflight(w, r, t) {
			return
		}
	} else {
		var err error
		t, err = parsePreviewPath(r.URL.EscapedPath(), p.cfg.PathPrefix)
		switch {
		case errors.Is(err, errNeedSlash):
			// Relative links on the page resolve against the prefix only
			// with the slash.
			u := *r.URL
			u.Path, u.RawPath = "", ""
			http.Redirect(w, r, t.prefix+"/"+queryOf(&u), http.StatusPermanentRedirect)
			return
		case err != nil:
			hint := "Previews live at " + p.cfg.PathPrefix + "{host}/{port}/."
			if p.cfg.Domain != "" {
				hint = "Previews live at " + p.subdomainPattern(r) + "/ or " + p.cfg.PathPrefix + "{host}/{port}/."
			}
			p.writeError(w, r, http.StatusNotFound, "not_found", "No preview here.", hint)
			return
		}
	}

	ok, viaShare := p.allowed(w, r, t)
	if !ok {
		return
	}
	if viaShare {
		// Only the share lets this viewer in: the pages link no way to
		// the gateway, whose login they have nothing to pass with.
		r = r.WithContext(context.WithValue(r.Context(), viaShareKey{}, true))
		if !p.takeShared(t.hostID) {
			p.writeError(w, r, http.StatusServiceUnavailable, "busy", "This shared preview is busy.", "Too many requests are open through public shares of this host; try again shortly.")
			return
		}
		defer p.releaseShared(t.hostID)
	}
	// An upload to the dev server takes as long as the dev server reads
	// it: a read deadline the server set on the request's arrival ends
	// here. (The gateway's idle bound on bodies re-arms itself as bytes
	// come, so an upload there ends only if it stalls.)
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	ctx := context.WithValue(context.WithValue(r.Context(), ctxKey{}, t), inboundKey{}, r)
	if p.cfg.NavigationTimeout > 0 && isPageLoad(r) {
		// The bound ends at the response's headers (modifyResponse stops
		// it): a page that streams, or a download, goes on for as long as
		// it takes.
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		timer := time.AfterFunc(p.cfg.NavigationTimeout, func() { cancel(errNoHeaders) })
		defer timer.Stop()
		ctx = context.WithValue(ctx, headerTimerKey{}, timer)
	}
	p.proxy.ServeHTTP(newBoundWriter(w), r.WithContext(ctx))
}

// viaShareKey marks a request only a public share let in.
type viaShareKey struct{}

// inboundKey carries the viewer's request to the error handler, which
// ReverseProxy hands the request to the dev server (Host
// localhost:{port}).
type inboundKey struct{}

// inbound is the viewer's request r stands for: r itself, or the one
// ServeHTTP proxied as r.
func inbound(r *http.Request) *http.Request {
	if in, ok := r.Context().Value(inboundKey{}).(*http.Request); ok {
		return in
	}
	return r
}

// headerTimerKey carries a page load's NavigationTimeout timer from
// ServeHTTP to modifyResponse.
type headerTimerKey struct{}

// errNoHeaders is the cause of a page load's context when the dev server
// sent no response headers within NavigationTimeout.
var errNoHeaders = errors.New("forward: the dev server sent no response headers in time")

// isPageLoad reports whether r is a browser loading a page (a document or
// a frame's), which a person watches spin: a GET or HEAD navigation by
// its fetch metadata, or, from a client without it (older browsers), one
// that asks for HTML. Not a fetch or XHR (htmx asks for text/html too, and
// long polls wait on purpose), an event stream, a WebSocket, or a form's
// POST, whose effect on the dev server a cut would leave unknown.
func isPageLoad(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead || r.Header.Get("Upgrade") != "" {
		return false
	}
	if mode := r.Header.Get("Sec-Fetch-Mode"); mode != "" {
		return mode == "navigate"
	}
	return wantsHTML(r)
}

// resolve turns t's host label into the host's id (ResolveHost), or
// answers the request itself. A label that names no host goes on as it is:
// authorization comes first, so that an unknown host and a private one
// look the same to a caller who may reach neither, and the dial answers
// the 404.
func (p *Preview) resolve(w http.ResponseWriter, r *http.Request, t *target) bool {
	if p.cfg.ResolveHost == nil {
		return true
	}
	id, err := p.cfg.ResolveHost(r.Context(), t.hostID)
	var amb *AmbiguousHostError
	switch {
	case err == nil:
		t.hostID = id
		return true
	case errors.Is(err, ErrUnknownHost):
		return true
	case errors.As(err, &amb):
		// The ids only for a caller who may reach one of them.
		hint := "Open it in the path form, which keeps the case: " + p.cfg.PathPrefix + "{host}/" + strconv.Itoa(t.port) + "/."
		if p.cfg.Authorize != nil {
			for _, id := range amb.IDs {
				if ok, _, _ := p.cfg.Authorize(r, id, t.port); ok {
					paths := make([]string, len(amb.IDs))
					for i, id := range amb.IDs {
						paths[i] = p.cfg.PathPrefix + id + "/" + strconv.Itoa(t.port) + "/"
					}
					hint = "Browsers lower-case host names, so this one cannot tell hosts " + strings.Join(amb.IDs, " and ") +
						" apart. Open the one you mean in the path form: " + strings.Join(paths, " or ") + "."
					break
				}
			}
		}
		p.writeError(w, r, http.StatusConflict, "ambiguous_host", "This preview's host name matches more than one host.", hint)
		return false
	default:
		p.log.Warn("preview host lookup", "label", t.hostID, "err", err)
		p.writeError(w, r, http.StatusServiceUnavailable, "unavailable", "Could not look this preview's host up.", "Try again shortly.")
		return false
	}
}

// siblingPreflight answers a CORS preflight sent from the preview of
// another port of the same host (a dev frontend calling its backend: a
// JSON POST, a request with an Authorization header of the app's own).
// Browsers send preflights without cookies, so the preview's cookie cannot
// authorize one and it was refused 401, which failed every such call
// however logged in the viewer was. The preflight does not reach the dev
// server; the request it clears carries the cookie, is authorized as any
// other, and the dev server's answer still needs its own CORS headers for
// the page to read it. A page of one host gains nothing on another: the
// Origin must name this host.
func (p *Preview) siblingPreflight(w http.ResponseWriter, r *http.Request, t target) bool {
	method := r.Header.Get("Access-Control-Request-Method")
	if r.Method != http.MethodOptions || method == "" {
		return false
	}
	origin, ok := p.siblingOrigin(r, t)
	if !ok {
		return false
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Allow-Credentials", "true")
	h.Set("Access-Control-Allow-Methods", method)
	if hdrs := r.Header.Get("Access-Control-Request-Headers"); hdrs != "" {
		h.Set("Access-Control-Allow-Headers", hdrs)
	}
	h.Set("Access-Control-Max-Age", "600")
	h.Set("Vary", "Origin, Access-Control-Request-Method, Access-Control-Request-Headers")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
	return true
}

// siblingOrigin returns r's Origin when it is the subdomain preview of
// another port of t's host, and t is a subdomain-form request too.
func (p *Preview) siblingOrigin(r *http.Request, t target) (string, bool) {
	origin := r.Header.Get("Origin")
	if t.prefix != "" || origin == "" {
		return "", false
	}
	u, err := url.Parse(origin)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" {
		return "", false
	}
	id, port, ok := parseSubdomain(u.Host, p.cfg.Domain)
	if !ok || id != strings.ToLower(t.hostID) || port == t.port {
		return "", false
	}
	return origin, true
}

func (p *Preview) takeShared(hostID string) bool {
	p.sharedMu.Lock()
	defer p.sharedMu.Unlock()
	if p.shared[hostID] >= maxSharedPerHost {
		return false
	}
	if p.shared == nil {
		p.shared = map[string]int{}
	}
	p.shared[hostID]++
	return true
}

func (p *Preview) releaseShared(hostID string) {
	p.sharedMu.Lock()
	defer p.sharedMu.Unlock()
	if p.shared[hostID]--; p.shared[hostID] <= 0 {
		delete(p.shared, hostID)
	}
}

func queryOf(u *url.URL) string {
	if u.RawQuery == "" {
		return ""
	}
	return "?" + u.RawQuery
}

// allowed answers the request itself when r may not reach t; viaShare
// says only a public share let it in. Authorization comes first, so the
// host's own users never count against the shares' bound.
func (p *Preview) allowed(w http.ResponseWriter, r *http.Request, t target) (ok, viaShare bool) {
	var (
		login     string
		undecided error
		forbidden *ForbiddenError
	)
	if p.cfg.Authorize != nil {
		var ok bool
		ok, login, undecided = p.cfg.Authorize(r, t.hostID, t.port)
		if ok {
			return true, false
		}
		if errors.As(undecided, &forbidden) {
			undecided = nil
		}
	}
	if p.cfg.Shares != nil {
		_, ok, err := p.cfg.Shares.Lookup(r.Context(), t.hostID, t.port)
		if err != nil {
			p.log.Warn("preview share lookup", "host", t.hostID, "port", t.port, "err", err)
			p.writeUnavailable(w, r)
			return false, false
		}
		if ok {
			return true, true
		}
	}
	if undecided != nil {
		p.log.Warn("preview authorization unavailable", "host", t.hostID, "port", t.port, "err", undecided)
		p.writeUnavailable(w, r)
		return false, false
	}
	if forbidden != nil {
		p.writeError(w, r, http.StatusForbidden, "forbidden", forbidden.Msg, forbidden.Hint)
		return false, false
	}
	if login != "" && wantsHTML(r) && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		http.Redirect(w, r, login, http.StatusFound)
		return false, false
	}
	hint := fmt.Sprintf("Port %d of host %s is private.", t.port, t.hostID)
	if origin, ok := p.siblingOrigin(r, t); ok {
		// A page on another port of this host calls this one before the
		// viewer logged in here: let it read why, and say how.
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Credentials", "true")
		h.Add("Vary", "Origin")
		scheme, _, _ := strings.Cut(origin, "://") // the sibling's: the same deployment's
		hint += " A page on another port calls it with the viewer's login for this port's preview: open " + scheme + "://" + r.Host + "/ once to log in there."
	}
	p.writeError(w, r, http.StatusUnauthorized, "unauthorized", "Log in to see this preview.", hint)
	return false, false
}

// writeUnavailable answers a request whose authorization cannot be
// decided because the gateway's store cannot answer.
func (p *Preview) writeUnavailable(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Retry-After", "5")
	p.writeError(w, r, http.StatusServiceUnavailable, "store_unavailable", "The gateway cannot check access to this preview right now.", "Try again shortly.")
}

// wantsHTML tells a browser navigation from an API client: browsers ask for
// text/html; fetch, curl and WebSocket upgrades do not.
func wantsHTML(r *http.Request) bool {
	a := r.Header.Get("Accept")
	return strings.Contains(a, "text/html") && !strings.Contains(a, "application/json") &&
		r.Header.Get("Upgrade") == ""
}

// redeem turns a login ticket into the preview cookie on this preview origin.
func (p *Preview) redeem(w http.ResponseWriter, r *http.Request, t target) {
	if p.cfg.Redeem == nil || r.Method != http.MethodGet {
		p.writeError(w, r, http.StatusNotFound, "not_found", "No preview login here.", "This address ends the gateway's login to a preview; open the preview from the gateway.")
		return
	}
	q := r.URL.Query()
	ticket, next := q.Get("ticket"), q.Get("next")
	if len(ticket) > 4096 || ticket == "" {
		p.writeError(w, r, http.StatusBadRequest, "bad_request", "Missing or oversized ticket.", "The gateway's login sends the browser here with a ticket for this preview; open the preview again from the gateway to get a new one.")
		return
	}
	// Only a local path: an open redirect would turn the preview origin into
	// a phishing relay.
	next = redirect.LocalPath(next)
	value, expires, err := p.cfg.Redeem(r.Context(), ticket, t.hostID, t.port)
	if errors.Is(err, ErrUnavailable) {
		p.log.Warn("preview ticket not checked", "host", t.hostID, "port", t.port, "err", err)
		p.writeUnavailable(w, r)
		return
	}
	if err != nil {
		p.log.Info("preview ticket refused", "host", t.hostID, "port", t.port, "err", err)
		p.writeError(w, r, http.StatusUnauthorized, "unauthorized", "This login link is invalid or expired.", "Open the preview again from the gateway.")
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: p.cfg.PreviewCookie, Value: value, Path: "/", Expires: expires,
		HttpOnly: true, Secure: p.cfg.SecureCookie || r.TLS != nil, SameSite: http.SameSiteLaxMode,
	})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// rewrite builds the upstream request. ReverseProxy has already dropped
// hop-by-hop and inbound X-Forwarded-* headers (Upgrade survives for
// WebSocket).
func (p *Preview) rewrite(pr *httputil.ProxyRequest) {
	t := pr.In.Context().Value(ctxKey{}).(target)
	out := pr.Out
	// The URL host is the transport's pool key and what dialTarget parses;
	// host ids never hold ':'.
	out.URL.Scheme = "http"
	out.URL.Host = net.JoinHostPort(t.hostID, strconv.Itoa(t.port))
	out.URL.RawPath = t.rawPath
	if path, err := url.PathUnescape(t.rawPath); err == nil {
		out.URL.Path = path
	} else {
		out.URL.Path, out.URL.RawPath = t.rawPath, ""
	}
	out.URL.RawQuery = pr.In.URL.RawQuery
	// Dev servers (Vite, webpack-dev-server, Next) refuse unknown Host
	// headers to stop DNS rebinding, and all accept localhost: send
	// "localhost:{port}". The original host is in X-Forwarded-Host.
	out.Host = "localhost:" + strconv.Itoa(t.port)
	// ReverseProxy drops a viewer's Forwarded and X-Forwarded-For, -Host
	// and -Proto; these say the same things to dev servers that trust
	// their loopback peer as a proxy (Rails' Client-IP, Rack's -Ssl and
	// -Scheme, X-Real-IP), and passed as the viewer wrote them.
	for _, h := range spoofableProxyHeaders {
		out.Header.Del(h)
	}
	pr.SetXForwarded()
	if p.cfg.ClientIP != nil {
		if ip := p.cfg.ClientIP(pr.In); ip != "" {
			out.Header.Set("X-Forwarded-For", ip)
		}
	}
	// A page the preview served is same-origin with its dev server, so its
	// own requests say so: WebSocket servers (gorilla, coder/websocket,
	// Vite) compare Origin with Host and would refuse the preview origin.
	// Origins of other sites pass unchanged and stay refused.
	if o := out.Header.Get("Origin"); o != "" {
		if u, err := url.Parse(o); err == nil && originOfHost(u, pr.In.Host) {
			out.Header.Set("Origin", "http://"+out.Host)
			// The forwarded host and scheme say the same origin: Next.js
			// (Server Actions) and Rails compare Origin with them where
			// they are set, and with the preview's name there aborted
			// every action and refused every form. A redirect built from
			// them names localhost, which modifyResponse makes a path.
			out.Header.Set("X-Forwarded-Host", out.Host)
			out.Header.Set("X-Forwarded-Proto", "http")
		}
	}
	if t.prefix != "" {
		out.Header.Set("X-Forwarded-Prefix", t.prefix)
	}
	stripCookies(out.Header, p.cookieNames()...)
	if !p.cfg.ForwardAuthorization {
		out.Header.Del("Authorization")
	}
}

// spoofableProxyHeaders are the headers proxies set to say who the client
// is and how it came, besides those ReverseProxy drops, which a viewer's
// request must not carry to the dev server: the proxy sets
// X-Forwarded-Prefix itself, and none of the rest.
var spoofableProxyHeaders = []string{
	"X-Real-Ip", "Client-Ip", "True-Client-Ip", "X-Client-Ip",
	"X-Forwarded-Port", "X-Forwarded-Prefix", "X-Forwarded-Ssl", "X-Forwarded-Scheme", "X-Forwarded-Server", "Front-End-Https", "X-Url-Scheme",
}

// originOfHost reports whether origin u is on host, the request's Host. A
// proxy that passes Host without its port (nginx's `proxy_set_header Host
// $host`) leaves only the name to compare: the page's Origin keeps the
// port browsers reached the proxy on.
func originOfHost(u *url.URL, host string) bool {
	if strings.EqualFold(u.Host, host) {
		return true
	}
	if _, _, err := net.SplitHostPort(host); err == nil {
		return false // Host names a port, and another one
	}
	return u.Hostname() != "" && strings.EqualFold(u.Hostname(), strings.Trim(host, "[]"))
}

// cookieNames are the gateway's cookies, which a dev server neither reads
// nor sets: the configured names and the default ones. A gateway that
// took __Host- names when it moved to https still gets the plain ones a
// browser kept from before, with a session secret good until it expires.
func (p *Preview) cookieNames() []string {
	return []string{p.cfg.SessionCookie, p.cfg.PreviewCookie, "hostgate_session", "hostgate_preview"}
}

func (p *Preview) modifyResponse(resp *http.Response) error {
	t, _ := resp.Request.Context().Value(ctxKey{}).(target)
	if timer, ok := resp.Request.Context().Value(headerTimerKey{}).(*time.Timer); ok && !timer.Stop() {
		// The headers came as the bound passed: the request is cancelled
		// already, so its body would break off. Answer as for no headers.
		return errNoHeaders
	}
	if resp.StatusCode < 100 {
		// net/http's client takes any three digits; its server panics
		// writing these, and the viewer got no answer.
		return fmt.Errorf("forward: the dev server answered status %03d, which is no HTTP status (100-999)", resp.StatusCode)
	}
	if resp.StatusCode == http.StatusRequestHeaderFieldsTooLarge && isPageLoad(resp.Request) && bodyless(resp) {
		return errHeadersTooLarge
	}
	stripSetCookies(resp.Header, p.cookieNames()...)
	// A dev server must not clear the gateway's state: the path form is the
	// gateway's own origin, and browsers apply "cookies" to the whole
	// site, which holds the session and every preview's cookie in both
	// forms. It would log the viewer out of the gateway.
	resp.Header.Del("Clear-Site-Data")
	if streams(resp) && resp.Header.Get("X-Accel-Buffering") == "" {
		// nginx buffers a proxied response by default, and a live reload's
		// event stream reached the browser all at once, when it ended. It
		// keeps this header from the client and stops buffering. A dev
		// server that sent its own asked for what it wants.
		resp.Header.Set("X-Accel-Buffering", "no")
	}
	if loc := resp.Header.Get("Location"); loc != "" {
		if rel, ok := upstreamRelative(loc, t.port); ok {
			resp.Header.Set("Location", rel)
		} else if rel, ok := plainToPreview(loc, resp.Request.Header.Get("X-Forwarded-Host")); ok && p.servesHTTPS(resp.Request) {
			resp.Header.Set("Location", rel)
		}
	}
	if t.prefix != "" {
		// Absolute-path redirects from the dev server stay inside the
		// preview. One already inside it came from a server that honours
		// X-Forwarded-Prefix, which the prefix again sent off to a page
		// the app does not have.
		if loc := resp.Header.Get("Location"); strings.HasPrefix(loc, "/") && !strings.HasPrefix(loc, "//") && !underPrefix(loc, t.prefix) {
			resp.Header.Set("Location", t.prefix+loc)
		}
		scopeCookies(resp.Header, t.prefix)
		if !p.cfg.UnsandboxedPathForm {
			resp.Header.Add("Content-Security-Policy", sandboxCSP)
		}
	} else {
		hostOnlyCookies(resp.Header)
	}
	return nil
}

// errHeadersTooLarge is modifyResponse's error for a page load the dev
// server refused with a 431 of no words: Node's HTTP server (Vite,
// Next.js) answers so past its 16 KiB of headers, a quarter of what the
// gateway takes, and the browser showed its own "HTTP ERROR 431" alone.
var errHeadersTooLarge = errors.New("forward: the dev server refused the request's headers as too large")

// bodyless reports whether resp, read no further, has no body: of length
// 0, or of unknown length and ending at once (Node closes the connection
// after its 431). A byte it reads is put back.
func bodyless(resp *http.Response) bool {
	if resp.ContentLength >= 0 {
		return resp.ContentLength == 0
	}
	var b [1]byte
	n, err := io.ReadFull(resp.Body, b[:])
	if n == 0 && err != nil {
		return true
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(b[:n]), resp.Body), resp.Body}
	return false
}

// headerSizes is the size of out's headers as the dev server got them, and
// of its cookies among them, in bytes.
func headerSizes(out *http.Request) (all, cookies int) {
	for k, vs := range out.Header {
		for _, v := range vs {
			n := len(k) + len(": ") + len(v) + len("\r\n")
			all += n
			if k == "Cookie" {
				cookies += n
			}
		}
	}
	return all, cookies
}

// underPrefix reports whether loc, an absolute path, is prefix or a path
// under it (with its query or fragment).
func underPrefix(loc, prefix string) bool {
	rest, ok := strings.CutPrefix(loc, prefix)
	return ok && (rest == "" || rest[0] == '/' || rest[0] == '?' || rest[0] == '#')
}

// streams says resp's body may come a piece at a time, to be read as it
// comes: the responses ReverseProxy itself writes on at once, an event
// stream or a body of unknown length (chunked: a streamed log, NDJSON
// progress, a long poll). One of known length is a whole file, which a
// proxy may buffer: it then frees the tunnel stream without waiting on a
// slow client.
func streams(resp *http.Response) bool {
	if resp.StatusCode < 200 || resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified || resp.Request.Method == http.MethodHead {
		return false // no body
	}
	// The media type alone, as mime.ParseMediaType would take it, without
	// the map of parameters it makes for every response.
	ct, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";")
	if strings.EqualFold(strings.TrimSpace(ct), "text/event-stream") {
		return true
	}
	return resp.ContentLength < 0
}

// upstreamRelative turns a redirect to the dev server's own address (the
// Host the proxy sent it, "localhost:{port}", or its loopback address)
// into a path on the preview, as nginx's proxy_redirect default does.
// Servers that build absolute redirects from the Host header (Spring
// Security's login redirect, older Tomcats) otherwise sent the browser to
// localhost on the viewer's own machine.
func upstreamRelative(loc string, port int) (string, bool) {
	u, err := url.Parse(loc)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.User != nil {
		return "", false
	}
	switch strings.ToLower(u.Hostname()) {
	case "localhost", "127.0.0.1", "::1":
	default:
		return "", false
	}
	p := u.Port()
	if p == "" {
		p = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if p != strconv.Itoa(port) {
		return "", false
	}
	return pathOf(u), true
}

// plainToPreview turns a redirect to http://{host}, host the name browsers
// reach the preview by (X-Forwarded-Host), into a path on the preview.
// Servers that build absolute redirects from X-Forwarded-Host and the
// scheme of the connection they got (Rails' redirect_to "/path") name
// http:// for a preview browsers reach over https, which a TLS-only front
// does not serve, and where the preview's Secure cookie is not sent.
func plainToPreview(loc, host string) (string, bool) {
	u, err := url.Parse(loc)
	if err != nil || u.Scheme != "http" || u.User != nil || host == "" || !strings.EqualFold(u.Host, host) {
		return "", false
	}
	return pathOf(u), true
}

// servesHTTPS reports whether browsers reach the preview of out, the
// request to the dev server, over https.
func (p *Preview) servesHTTPS(out *http.Request) bool {
	return p.cfg.SecureCookie || out.Header.Get("X-Forwarded-Proto") == "https"
}

// pathOf is u's path, query and fragment, a path on the preview.
func pathOf(u *url.URL) string {
	rel := &url.URL{Path: u.Path, RawPath: u.RawPath, RawQuery: u.RawQuery, ForceQuery: u.ForceQuery, Fragment: u.Fragment, RawFragment: u.RawFragment}
	// One leading slash: "//name" would be another host's address.
	return "/" + strings.TrimLeft(rel.String(), "/")
}

// dialTarget is the transport's DialContext: addr is "{host}:{port}" from
// rewrite.
func (p *Preview) dialTarget(ctx context.Context, _, addr string) (net.Conn, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(ps)
	if err != nil {
		return nil, err
	}
	return p.dial(ctx, host, port)
}

// upstreamError answers a failed proxy round trip: 503 for an offline host,
// 502 with a clear page for a port nobody listens on.
func (p *Preview) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	t, _ := r.Context().Value(ctxKey{}).(target)
	if errors.Is(err, errNoHeaders) || errors.Is(context.Cause(r.Context()), errNoHeaders) {
		p.log.Warn("preview upstream sent no response headers in time", "host", t.hostID, "port", t.port, "timeout", p.cfg.NavigationTimeout)
		p.writeError(w, r, http.StatusGatewayTimeout, "upstream_timeout",
			fmt.Sprintf("Port %d of host %s has not answered this page in %v.", t.port, t.hostID, p.cfg.NavigationTimeout),
			forOwner(r, fmt.Sprintf("Something on localhost:%d of host %s took the request but sent no response: the dev server may be stopped (Ctrl-Z, a paused debugger), stuck in a handler, or still building this page. Check its terminal on the host, then reload.", t.port, t.hostID),
				"The dev server behind this shared link took the request but has not answered: it may still be building this page. Reload in a while; if it never answers, whoever shared the link can look at the dev server."))
		return
	}
	if errors.Is(err, errHeadersTooLarge) {
		// r is the request to the dev server here (ReverseProxy hands the
		// error handler the one it sent): its headers are those refused.
		all, cookies := headerSizes(r)
		hint := forOwner(r, fmt.Sprintf("Of them, the cookies this browser keeps for this preview take %d KiB. Clear this site's cookies in the browser, or start the dev server with a higher limit: Node's (Vite, Next.js) takes 16 KiB unless started with NODE_OPTIONS=--max-http-header-size=65536.", kib(cookies)),
			fmt.Sprintf("Of them, the cookies this browser keeps for this preview take %d KiB: clear this site's cookies in the browser, then reload.", kib(cookies)))
		p.writeError(w, r, http.StatusRequestHeaderFieldsTooLarge, "request_headers_too_large",
			fmt.Sprintf("The dev server on port %d of host %s refused this page's request: its headers, %d KiB, are more than it takes.", t.port, t.hostID, kib(all)), hint)
		return
	}
	if r.Context().Err() != nil {
		// The client left, or its request was ended for it: the server is
		// stopping, or the body broke off. Not worth a log line, but the
		// answer must not be the implicit 200 that reports success.
		p.writeError(w, r, http.StatusServiceUnavailable, "cancelled",
			"The request ended before the dev server answered.",
			fmt.Sprintf("Port %d of host %s was still working on it; try again.", t.port, t.hostID))
		return
	}
	// What the viewer's page explains (no such host, its agent offline,
	// its sandbox gone, nothing on the port) it also asks again every
	// 10 s while shown (waitScript): a warning per answer filled the log
	// with what only the viewer can fix.
	level := slog.LevelWarn
	if hostGone := (*HostGoneError)(nil); errors.Is(err, ErrUnknownHost) || errors.Is(err, ErrHostUnavailable) || errors.As(err, &hostGone) || nothingListens(err) {
		level = slog.LevelDebug
	}
	p.log.Log(r.Context(), level, "preview upstream failed", "host", t.hostID, "port", t.port, "err", err)
	midRequest := false
	if p.cfg.HostLost != nil && !errors.Is(err, ErrHostUnavailable) && !errors.Is(err, ErrUnknownHost) && !errors.Is(err, errNoHeaders) && !nothingListens(err) {
		if lost := p.cfg.HostLost(r.Context(), t.hostID); lost != nil {
			p.log.Info("preview host lost during a request", "host", t.hostID, "port", t.port, "err", lost)
			err, midRequest = lost, true
		}
	}
	var gone *HostGoneError
	if !errors.As(err, &gone) {
		gone = &HostGoneError{}
	}
	if gone.Ended && gone.Why != "" {
		var fields map[string]string
		if gone.Reason != "" {
			fields = map[string]string{"reason": gone.Reason}
			if !gone.EndedAt.IsZero() {
				fields["endedAt"] = gone.EndedAt.UTC().Format(time.RFC3339Nano)
			}
		}
		p.writeErrorFields(w, r, http.StatusGone, "gone",
			fmt.Sprintf("Host %s is gone: %s.", t.hostID, gone.Why),
			forOwner(r, "It does not come back: provision a new sandbox, start the dev server there and open its preview.",
				"It does not come back: ask whoever shared this link for a new one."), fields)
		return
	}
	if errors.Is(err, ErrUnknownHost) {
		p.writeError(w, r, http.StatusNotFound, "not_found",
			fmt.Sprintf("There is no host %s.", t.hostID),
			"Check the host id in the address; the gateway's host list has every host.")
		return
	}
	if errors.Is(err, ErrHostUnavailable) {
		msg, hint := fmt.Sprintf("Host %s is not connected.", t.hostID), forOwner(r, "Start or reconnect the host's agent, then reload.",
			"Whoever shared this link can reconnect it.")
		if midRequest {
			msg = fmt.Sprintf("Host %s went away while port %d was answering.", t.hostID, t.port)
			hint = forOwner(r, "Its agent stopped, restarted or lost its network: start or reconnect it, then reload.",
				"Whoever shared this link can reconnect it; then reload.")
		}
		if gone.Why != "" {
			// Its agent is refused (another host key): restarting it is
			// not the fix, and the reason says who can make it.
			hint = strings.ToUpper(gone.Why[:1]) + gone.Why[1:] + ". Reload once that is fixed."
		}
		p.writeError(w, r, http.StatusServiceUnavailable, "host_offline", msg, hint)
		return
	}
	if !nothingListens(err) {
		// The port answered, with something the proxy cannot pass on:
		// "nothing answered" sent people looking for a server that runs.
		p.writeError(w, r, http.StatusBadGateway, "upstream_bad_response",
			fmt.Sprintf("Port %d of host %s answered, but not with an HTTP response the preview can pass on.", t.port, t.hostID),
			forOwner(r, fmt.Sprintf("Is it an HTTP server (not HTTPS or another protocol), with headers under 1 MiB? The proxy saw: %s", upstreamReason(err)),
				fmt.Sprintf("What runs behind this shared link is not a web page the preview can show; whoever shared it can check that it is the dev server (plain HTTP, not HTTPS). The proxy saw: %s", upstreamReason(err))))
		return
	}
	p.writeError(w, r, http.StatusBadGateway, "upstream_unavailable",
		fmt.Sprintf("Nothing answered on port %d of host %s.", t.port, t.hostID),
		forOwner(r, fmt.Sprintf("Start your dev server on the host, listening on localhost:%d (127.0.0.1, ::1 or all addresses), then reload.", t.port),
			"The dev server behind this shared link is not running now; whoever shared it can start it."))
}

// kib is n bytes in KiB, rounded up.
func kib(n int) int { return (n + 1023) / 1024 }

// subdomainPattern is the subdomain form's origin as r's caller reaches
// it, with placeholders: behind a TLS proxy it said http://, and it left
// out the port the gateway's own address carries, which previews share.
func (p *Preview) subdomainPattern(r *http.Request) string {
	scheme := "http"
	if p.cfg.SecureCookie || r.TLS != nil {
		scheme = "https"
	}
	host := "{port}--{host}." + p.cfg.Domain
	if _, port, err := net.SplitHostPort(r.Host); err == nil {
		host += ":" + port
	}
	return scheme + "://" + host
}

// forOwner is hint for the host's own users, or shared for a viewer only a
// public share let in, who can do none of what the host's users can: the
// pages told them to start a dev server on a host they have no way to.
func forOwner(r *http.Request, hint, shared string) string {
	if r.Context().Value(viaShareKey{}) != nil {
		return shared
	}
	return hint
}

// nothingListens reports whether err is a connection to the port that
// failed (refused, no route), as opposed to an answer that was not HTTP.
func nothingListens(err error) bool {
	var op *net.OpError
	return errors.Is(err, hostgate.ErrConnectFailed) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.As(err, &op) && op.Op == "dial"
}

// upstreamReason is err's last words, short enough for a page.
func upstreamReason(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 && len(s)-i > 8 {
		s = s[i+2:]
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// writeIdleTimeout is how long one write of a proxied response may wait
// for the client to take bytes (a variable for tests).
var writeIdleTimeout = time.Minute

// boundWriter bounds each write and flush of a proxied response by
// writeIdleTimeout. The gateway's server sets no WriteTimeout (it would
// cut long downloads and hijacked WebSockets); without a bound, a client
// that stops reading held its request, the channel to the host and the
// buffers between for as long as it kept the socket open. The deadline is
// armed only while a write waits, so server-sent events and long polls,
// idle between writes, are not cut, and cleared after it, so a WebSocket
// upgrade later on the connection starts without one.
type boundWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
}

func newBoundWriter(w http.ResponseWriter) *boundWriter {
	return &boundWriter{ResponseWriter: w, rc: http.NewResponseController(w)}
}

// Write writes p and flushes it, so a proxied body streams as the dev
// server sends it (a long poll's answer, a slow page) under one deadline.
func (w *boundWriter) Write(p []byte) (int, error) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(writeIdleTimeout))
	defer w.rc.SetWriteDeadline(time.Time{})
	n, err := w.ResponseWriter.Write(p)
	if err == nil {
		err = w.rc.Flush()
	}
	return n, err
}

// WriteHeader passes on the dev server's 1xx responses (103 Early Hints),
// which ReverseProxy writes as they come, past modifyResponse, without
// Set-Cookie and Clear-Site-Data: a 103 carried the gateway's session
// cookie, a cookie for the whole preview domain and the order to clear
// the site's data to the viewer, as the final response may not.
func (w *boundWriter) WriteHeader(code int) {
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		h := w.Header()
		h.Del("Set-Cookie")
		h.Del("Clear-Site-Data")
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *boundWriter) FlushError() error {
	_ = w.rc.SetWriteDeadline(time.Now().Add(writeIdleTimeout))
	defer w.rc.SetWriteDeadline(time.Time{})
	return w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection (Hijack for
// WebSocket upgrades, deadlines).
func (w *boundWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
