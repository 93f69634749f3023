package gateway

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/metrics"
)

// Caller authenticates r as a caller of the host named by the {id} path
// value (admin, or a client token naming it) and answers the error itself
// when it returns false. Routes added on Mux use it so every host route
// authorizes the same way.
func (s *Server) Caller(w http.ResponseWriter, r *http.Request) (store.Token, string, bool) {
	return s.caller(w, r)
}

// AuthenticateRequest authenticates r (bearer token or session cookie) and
// answers the error itself when it returns false.
func (s *Server) AuthenticateRequest(w http.ResponseWriter, r *http.Request) (store.Token, bool) {
	return s.authenticate(w, r)
}

// Forbid answers 403 forbidden with msg to a valid token used outside its
// role, counting it in hostgate_auth_failures_total as the gateway's own
// routes count theirs: routes added on Mux refuse the same way.
func (s *Server) Forbid(w http.ResponseWriter, msg string) {
	s.forbid(w, msg)
}

// Audit records that tok reached hostID by kind ("pty", "preview", …).
func (s *Server) Audit(r *http.Request, tok store.Token, hostID, kind string) {
	s.audit(r, tok, hostID, kind)
}

// SetMeFields adds fields to GET /v1/me's answer for the token, e.g.
// whether Docker executions are on and their defaults. f may return nil;
// it cannot override name, role and hosts. Call it before Serve.
func (s *Server) SetMeFields(f func(r *http.Request, tok store.Token) map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.meFields = f
}

// SetHostEnded gives the gateway how a host ended, when it did: f
// answers, for a host id, its end reason ("terminated", "runtime", …: an
// execution that ended for good) and when, or "" when it did not end. The
// SSH sessions relayed to it then close saying so, not that its agent
// disconnected, which reads as a host that comes back, and its routes
// answer 410 gone with the reason and endedAt, as the executions API
// answers the execution. Call it before Serve.
func (s *Server) SetHostEnded(f func(ctx context.Context, id string) (reason string, endedAt time.Time)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hostEnded = f
}

// SetSessionEnded gives the gateway how to clear a browser's session
// cookies (the web UI's, with the attributes it set them with): every
// route that authenticates through the gateway (GET /v1/me, /v1/hosts, a
// terminal's socket before its upgrade, AuthenticateRequest's callers)
// calls f before its 401 to a session cookie the gateway no longer
// honours (CredentialsRefused), so that the browser stops sending it.
// Call it before Serve.
func (s *Server) SetSessionEnded(f func(w http.ResponseWriter, r *http.Request)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessionEnded = f
}

// HostGone answers, for host id whose execution ended for good
// (SetHostEnded), 410 gone with its reason and endedAt, and reports
// whether it did: routes added on Mux answer an ended sandbox's host as
// the gateway's own do.
func (s *Server) HostGone(w http.ResponseWriter, id string) bool {
	return s.hostGone(w, id)
}

// HostAbsent answers 410 gone for host id when it ended for good, 404 when
// it is not enrolled, and reports whether it answered.
func (s *Server) HostAbsent(ctx context.Context, w http.ResponseWriter, id string) bool {
	return s.hostAbsent(ctx, w, id)
}

// StoreUnavailable reports whether err, from Authenticate, says the state
// store could not answer: the credentials may be good, so the caller
// should answer 503, not ask to log in.
func StoreUnavailable(err error) bool {
	var ae *authError
	return errors.As(err, &ae) && ae.status == http.StatusServiceUnavailable
}

// RateLimited reports whether err, from Authenticate, is the refusal of
// a source that failed too often lately, whatever it sent; it has a
// method RetryAfter() time.Duration, how long that lasts.
func RateLimited(err error) bool {
	var ae *authError
	return errors.As(err, &ae) && ae.status == http.StatusTooManyRequests
}

// CredentialsRefused reports whether err, from Authenticate, says the
// request's token or session is one the gateway does not honour: no such
// token (revoked, logged out, mistyped, or of another state) or expired.
// Not for missing credentials, nor for an answer that cannot be had now
// (the store, a rate limit), where they may be good.
func CredentialsRefused(err error) bool {
	var ae *authError
	return errors.As(err, &ae) && ae.status == http.StatusUnauthorized &&
		(ae.reason == metrics.ReasonUnknown || ae.reason == metrics.ReasonExpired)
}

// TwoSessionCookies reports whether err, from Authenticate, refused a
// request for carrying two different session cookies (a page under a
// parent domain planted one): logging in again does not help, since the
// planted cookie stays; the browser's cookies for the site must be
// cleared.
func TwoSessionCookies(err error) bool {
	var ae *authError
	return errors.As(err, &ae) && ae.twoCookies
}
