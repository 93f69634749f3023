package gateway

import (
	"context"
	"errors"
	"net/http"

	"github.com/hostgate/hostgate/internal/store"
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

// SetHostEnded gives the relays the reason a host ended, when it did: f
// answers, for a host whose tunnel ended by itself, why the host is gone
// for good (an execution terminated or out of runtime: its end reason),
// or "" when it is not. The SSH sessions relayed to it then close saying
// so, not that its agent disconnected, which reads as a host that comes
// back. Call it before Serve.
func (s *Server) SetHostEnded(f func(ctx context.Context, id string) string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hostEnded = f
}

// StoreUnavailable reports whether err, from Authenticate, says the state
// store could not answer: the credentials may be good, so the caller
// should answer 503, not ask to log in.
func StoreUnavailable(err error) bool {
	var ae *authError
	return errors.As(err, &ae) && ae.status == http.StatusServiceUnavailable
}
