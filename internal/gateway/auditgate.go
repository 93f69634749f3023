package gateway

import (
	"errors"
	"net/http"
	"strings"

	"github.com/hostgate/hostgate/internal/store"
)

// auditRequired is in front of the router when Config.AuditRequired: while
// the audit log cannot be written, a request that would start something
// the log records (a relayed session, a web terminal, a certificate, an
// execution, a share, a login) is refused with 503 audit_unavailable,
// where the gateway would otherwise let it go on unrecorded. What is
// already open goes on, and so do reads (lists, /readyz, /metrics), a
// logout and agents' tunnels: a host that reconnects is not a caller's
// session, and keeping it lets sessions start again the moment the log
// can be written.
func (s *Server) auditRequired(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !startsSomething(r) {
			next.ServeHTTP(w, r)
			return
		}
		if err := s.auditUnavailable(); err != nil {
			WriteError(w, http.StatusServiceUnavailable, "audit_unavailable", auditRefusal(err))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// auditUnavailable is why the audit log cannot be written now, or nil:
// what --audit-required refuses new sessions for, at the HTTP door and at
// a direct session's admission alike.
func (s *Server) auditUnavailable() error {
	if s.auditLog.failure() == nil {
		return nil
	}
	// Nothing is written while sessions are refused: probe's store check
	// (at most once per readyTTL) is what ends the outage.
	_, _ = s.probe()
	return s.auditLog.failure()
}

// startsSomething says whether r may start what the audit log records:
// a WebSocket (but an agent's tunnel) or a request that changes state
// (but a logout, which only ends things).
func startsSomething(r *http.Request) bool {
	if isWebSocket(r) {
		return r.URL.Path != "/v1/agents/connect"
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return !strings.HasSuffix(r.URL.Path, "/logout")
}

// auditRefusal is the 503's message. It is sent before authentication,
// so it says what is wrong with the audit log's file but not its path,
// which the gateway's log has.
func auditRefusal(err error) string {
	why := "the state database, which holds it, refuses writes"
	var we *store.WriteError
	if errors.As(err, &we) {
		switch we.Kind {
		case "full":
			why = "the disk of the state database, which holds it, is full"
		case "read-only":
			why = "the state database, which holds it, or its filesystem is read-only"
		default:
			why = "the disk of the state database, which holds it, fails writes"
		}
	}
	return "the audit log cannot be written: " + why + ". The gateway runs with --audit-required, so it starts no new session, exec or login until it can (sessions already open go on); its log names the file"
}
