package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/metrics"
)

// SessionCookie is the browser session cookie set by /login; it holds the
// secret of a session token minted from the token the person typed
// (StartSession), never that token.
const SessionCookie = "hostgate_session"

// SecureSessionCookie is the session cookie's name on a gateway reached
// over https (Config.SessionCookie). Browsers refuse a __Host- cookie set
// with a Domain attribute, or without Secure and Path=/: a preview page
// under the gateway's parent domain cannot plant one beside the viewer's,
// which locked the viewer out (two different session cookies are refused,
// against session fixation). Plain-http gateways keep SessionCookie:
// browsers refuse __Host- cookies without Secure.
const SecureSessionCookie = "__Host-hostgate_session"

// authError is a refused authentication: what to answer and which reason
// to count.
type authError struct {
	status int
	code   string
	msg    string
	reason string
	// retryAfter is, for a 429, how long the source stays blocked.
	retryAfter time.Duration
	// twoCookies: refused for carrying two different session cookies.
	twoCookies bool
}

func (e *authError) Error() string { return e.msg }

// RetryAfter is, for a 429, how long the source stays blocked: the web
// UI's login page tells the person.
func (e *authError) RetryAfter() time.Duration { return e.retryAfter }

// Authenticate returns the token a request carries: `Authorization: Bearer
// TOKEN`, else the session cookie. Every route authenticates through it, so
// failures are counted and rate-limited per source IP in one place.
func (s *Server) Authenticate(r *http.Request) (store.Token, error) {
	ip := s.clientIP(r)
	if left := s.limiter.blockedFor(ip); left > 0 {
		s.metrics.AuthFailures.WithLabelValues(metrics.ReasonRateLimited).Inc()
		// The address is the caller's own (or its /64), so naming it
		// tells nothing new, and it tells the holder of a valid token
		// that another client there is at fault, not its token.
		return store.Token{}, &authError{status: http.StatusTooManyRequests, code: "rate_limited", retryAfter: left, msg: fmt.Sprintf(
			"too many failed authentications from %s (%d within %v): every request from it is refused, valid tokens too, until that window ends (Retry-After); find the script or agent there with a revoked or mistyped token",
			source(ip), s.limiter.max, s.limiter.window), reason: metrics.ReasonRateLimited}
	}
	secret := Bearer(r)
	if secret == "" {
		if cs := r.CookiesNamed(s.cfg.SessionCookie); len(cs) > 0 {
			// A cookie rides along on requests other sites (and preview
			// pages, which are same-site subdomains) make: refuse
			// cross-origin unsafe methods (CSRF). Bearer tokens are
			// never sent implicitly, so they need no check.
			if err := s.csrf.Check(r); err != nil {
				s.metrics.AuthFailures.WithLabelValues(metrics.ReasonForbidden).Inc()
				return store.Token{}, &authError{status: http.StatusForbidden, code: "forbidden", msg: "cross-origin request refused: a page of another origin (another site, or a preview) sent " + r.Method + " with the session cookie; use the gateway's own pages, or send the token as Authorization: Bearer TOKEN instead of the cookie", reason: metrics.ReasonForbidden}
			}
			// Two different session cookies: a page under a parent domain
			// (a preview) set one for this host, for a longer path so the
			// browser sends it first, and the admin's requests would run
			// as whoever that token belongs to.
			for _, c := range cs[1:] {
				if c.Value != cs[0].Value {
					s.metrics.AuthFailures.WithLabelValues(metrics.ReasonForbidden).Inc()
					return store.Token{}, &authError{status: http.StatusUnauthorized, code: "unauthorized", msg: "two different session cookies: a page under a parent domain (such as a preview) set one; clear this site's cookies and log in again", reason: metrics.ReasonForbidden, twoCookies: true}
				}
			}
			secret = cs[0].Value
		}
	}
	fail := func(reason, msg string) (store.Token, error) {
		if s.limiter.fail(ip) {
			// Once per source and window: a script with a stale token
			// locks out everyone behind its address, valid tokens too,
			// and the refusals themselves are not logged.
			s.logger.Warn("auth: too many failed authentications from one address; its requests are refused with 429 rate_limited until the window ends, valid tokens too (a script or agent with a revoked or mistyped token?)",
				"client", ip, "source", source(ip).String(), "failures", s.limiter.max, "window", s.limiter.window.String(), "last", msg)
		}
		s.metrics.AuthFailures.WithLabelValues(reason).Inc()
		return store.Token{}, &authError{status: http.StatusUnauthorized, code: "unauthorized", msg: msg, reason: reason}
	}
	if secret == "" {
		// Not a guess, so not counted against the source: a browser asks
		// without credentials all the time (a preview origin never has
		// the session cookie, a page before /login), and counting those
		// locked out everyone behind the same address after 20 loads.
		s.metrics.AuthFailures.WithLabelValues(metrics.ReasonMissing).Inc()
		return store.Token{}, &authError{status: http.StatusUnauthorized, code: "unauthorized", msg: "missing credentials: send Authorization: Bearer TOKEN", reason: metrics.ReasonMissing}
	}
	key, now := authKey(secret), time.Now()
	if tok, ok := s.auth.get(key, now); ok {
		return tok, nil
	}
	tok, err := s.store.LookupToken(r.Context(), secret)
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrExpired) {
		s.lookupFailures.answered(s.logger)
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		// Callers pass this on as it is (gateway proxy, gateway cert,
		// agents, Go programs), so it says how to get one that works.
		fix := s.cfg.UnknownTokenFix
		if fix == "" {
			fix = "ask its admin for one (gateway token create)"
		}
		return fail(metrics.ReasonUnknown, "invalid token: this gateway has no such token (mistyped, revoked, or made with another --state-dir); "+fix)
	case errors.Is(err, store.ErrExpired):
		return fail(metrics.ReasonExpired, "token expired: ask the gateway's admin for a new one (gateway token create)")
	case err != nil && errors.Is(context.Cause(r.Context()), ErrShuttingDown):
		// The shutdown cut the lookup (a request's ctx is the gateway's):
		// the store is fine, the gateway is going.
		return store.Token{}, &authError{status: http.StatusServiceUnavailable, code: "shutting_down", msg: "gateway is shutting down"}
	case err != nil && r.Context().Err() != nil:
		// The caller hung up (or its deadline passed) mid-lookup: its
		// doing, not the store's.
		s.logger.Debug("token lookup cut by its caller", "err", err)
		return store.Token{}, &authError{status: http.StatusServiceUnavailable, code: "store_unavailable", msg: "state store unavailable"}
	case err != nil:
		s.lookupFailures.failed(s.logger, err, now)
		return store.Token{}, &authError{status: http.StatusServiceUnavailable, code: "store_unavailable", msg: "state store unavailable"}
	}
	s.lookupFailures.answered(s.logger)
	s.auth.put(key, tok, now)
	return tok, nil
}

// authenticate runs Authenticate and answers the failure; ok is false when
// it did.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) (store.Token, bool) {
	tok, err := s.Authenticate(r)
	if err == nil {
		return tok, true
	}
	s.refuseRequest(w, r, err)
	return tok, false
}

// refuseRequest answers err, Authenticate's of r, clearing r's session
// cookie when that is what the gateway no longer honours: after a
// gateway restart every open tab asks again (its terminal socket, the
// hosts list, /v1/me), and a cookie left in place counted one failed
// authentication at each ask, until the login that followed was refused
// as rate-limited. Before any upgrade: a WebSocket route answers its
// refusal as this HTTP response. A bearer token is the client's to drop.
func (s *Server) refuseRequest(w http.ResponseWriter, r *http.Request, err error) {
	if CredentialsRefused(err) && Bearer(r) == "" {
		s.mu.Lock()
		ended := s.sessionEnded
		s.mu.Unlock()
		if ended != nil {
			ended(w, r)
		}
	}
	s.refuse(w, err)
}

// refuse answers err, Authenticate's.
func (s *Server) refuse(w http.ResponseWriter, err error) {
	var ae *authError
	if errors.As(err, &ae) {
		if ae.status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="hostgate"`)
		}
		if ae.retryAfter > 0 {
			// Whole seconds, rounded up: a client that waits as told
			// finds the window over, not a second short of it.
			w.Header().Set("Retry-After", strconv.Itoa(int(max(ae.retryAfter+time.Second-1, time.Second)/time.Second)))
		}
		WriteError(w, ae.status, ae.code, ae.msg)
		return
	}
	WriteError(w, http.StatusUnauthorized, "unauthorized", "invalid credentials")
}

// forbid counts and answers a valid token used outside its role.
func (s *Server) forbid(w http.ResponseWriter, msg string) {
	s.metrics.AuthFailures.WithLabelValues(metrics.ReasonForbidden).Inc()
	WriteError(w, http.StatusForbidden, "forbidden", msg)
}

// Bearer is r's bearer token, "" when it sends none (no Authorization, or
// another scheme, such as the Basic credentials a browser adds by itself).
func Bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) < 7 || !strings.EqualFold(h[:7], "bearer ") {
		return ""
	}
	return strings.TrimSpace(h[7:])
}

// limiter counts authentication failures per source in fixed windows. A
// source is an IPv4 address, or an IPv6 address's /64: one subscriber
// gets a whole /64, so counting its addresses apart let one machine make
// 20 guesses from each of them, and fill the table (below) alone.
//
// The table is bounded. When it is full, a failure from a new source takes
// the slot of one that is not blocked (its count is lost, which only a
// source failing less than the limit pays); only when every slot it
// looks at is blocked do new sources share one overflow bucket. Before,
// they always did once the table was full: 65,536 single failures from one
// /64 within a window blocked every address without a slot, valid tokens
// too. Now that needs 20 failures from each of 65,536 /64s.
type limiter struct {
	max    int
	window time.Duration
	now    func() time.Time

	mu        sync.Mutex
	buckets   map[sourceKey]*bucket
	overflow  bucket
	lastPrune time.Time
}

type bucket struct {
	start time.Time
	n     int
}

const (
	limiterSlots = 1 << 16
	// evictLook is how many slots a failure from a new source looks at
	// for one to take, when the table is full: map order is random, so
	// unless nearly every slot is blocked the first few do.
	evictLook = 64
)

func newLimiter(max int, window time.Duration, now func() time.Time) *limiter {
	return &limiter{max: max, window: window, now: now, buckets: map[sourceKey]*bucket{}}
}

// sourceKey is what the limiter counts by: an IPv4 address as a /32, an
// IPv6 address's /64, and anything that does not parse as given. A prefix,
// not its text, so that the check every request makes allocates nothing.
type sourceKey struct {
	p   netip.Prefix
	raw string
}

func (k sourceKey) String() string {
	if !k.p.IsValid() {
		return k.raw
	}
	if k.p.Addr().Is4() {
		return k.p.Addr().String()
	}
	return k.p.String()
}

// source is the key ip is counted under (mapped IPv4 addresses unmapped).
func source(ip string) sourceKey {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return sourceKey{raw: ip}
	}
	a = a.Unmap().WithZone("")
	bits := 64
	if a.Is4() {
		bits = 32
	}
	p, _ := a.Prefix(bits) // never fails for these lengths
	return sourceKey{p: p}
}

// get returns src's bucket, creating it when create is set; nil when src
// has none and create is not set. Called with mu held.
func (l *limiter) get(src sourceKey, create bool) *bucket {
	now := l.now()
	b := l.buckets[src]
	if b == nil {
		if len(l.buckets) >= limiterSlots && now.Sub(l.lastPrune) >= l.window {
			l.lastPrune = now
			for k, v := range l.buckets {
				if now.Sub(v.start) >= l.window {
					delete(l.buckets, k)
				}
			}
		}
		if create && len(l.buckets) >= limiterSlots {
			l.evict(now)
		}
		switch {
		case len(l.buckets) >= limiterSlots:
			b = &l.overflow
		case create:
			b = &bucket{start: now}
			l.buckets[src] = b
		default:
			return nil
		}
	}
	if now.Sub(b.start) >= l.window {
		b.start, b.n = now, 0
	}
	return b
}

// evict frees the first slot of evictLook that holds no block. Called
// with mu held.
func (l *limiter) evict(now time.Time) {
	i := 0
	for k, v := range l.buckets {
		if v.n < l.max || now.Sub(v.start) >= l.window {
			delete(l.buckets, k)
			return
		}
		if i++; i == evictLook {
			return
		}
	}
}

// blockedFor is how long ip's source stays blocked: what is left of the
// window it reached the limit in, or 0 when it is not blocked.
func (l *limiter) blockedFor(ip string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.get(source(ip), false)
	if b == nil || b.n < l.max {
		return 0
	}
	return max(b.start.Add(l.window).Sub(l.now()), 1)
}

// fail counts a failure from ip and reports whether it is the one that
// blocks ip's source for the rest of its window.
func (l *limiter) fail(ip string) (blocks bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.get(source(ip), true)
	b.n++
	return b.n == l.max
}

// lookupFailureReminder is how often an outage of token lookups that goes
// on is logged at ERROR again.
const lookupFailureReminder = time.Minute

// outageLog logs the failures of something every request may try (the
// state store's token lookups, its reads for the API, the state dir's
// free space at each /readyz probe). A line per failure let anyone on the
// network (or a load balancer's polling) flood the log through an outage:
// it is logged at level when it begins, when the error changes and once
// every interval while it lasts, the rest at DEBUG, and its end once.
type outageLog struct {
	every time.Duration // how often an outage that goes on is logged again
	level slog.Level    // of the outage's lines
	begin string        // the outage's message, with its error and count
	end   string        // the message when it ends

	mu   sync.Mutex
	n    int       // failures in this outage; 0 when none
	last string    // the error last logged at level
	at   time.Time // when it was
}

// lookupFailures logs the state store's failures to look tokens up: every
// request with a well-formed token asks the store (a failure is never
// cached).
func lookupFailures(every time.Duration) *outageLog {
	return &outageLog{every: every, level: slog.LevelError,
		begin: "token lookup: the state store fails reads; requests whose token is not in the gateway's cache are answered 503 store_unavailable until it answers (logged again when its error changes, else every " + every.String() + ")",
		end:   "token lookup: the state store answers again"}
}

// failed notes a failure with err at now; attrs add to its line.
func (l *outageLog) failed(log *slog.Logger, err error, now time.Time, attrs ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	msg := err.Error()
	if l.n > 1 && msg == l.last && now.Sub(l.at) < l.every {
		log.Debug(l.begin, append(attrs, "err", err)...)
		return
	}
	l.last, l.at = msg, now
	log.Log(context.Background(), l.level, l.begin, append(attrs, "err", err, "failed", l.n)...)
}

// answered notes a success, which ends an outage.
func (l *outageLog) answered(log *slog.Logger, attrs ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == 0 {
		return
	}
	log.Info(l.end, append(attrs, "failed", l.n)...)
	l.n, l.last = 0, ""
}
