package gateway

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/hostgate/hostgate/internal/gateway/wire"
)

// answerDirect answers a caller that would rather dial host id's agent
// itself (wire.DirectPrefer, `gateway proxy`) with the addresses of the
// agent's direct listener and the host's pinned key, instead of a relay,
// and reports whether it did. The caller passed the relay's own door
// (caller: its token, the host it reaches, the rate limits); nothing is
// audited and no relay starts, since no session happened: a direct one
// is audited when the agent asks to admit it, and a caller whose direct
// path fails comes back for the relay. A host without addresses (its
// agent has none, it is offline, direct sessions are off) is relayed at
// once, as are those whose key the store cannot say now.
func (s *Server) answerDirect(w http.ResponseWriter, r *http.Request, id string) bool {
	pt, ok := s.tunnels.tunnel(id).(*pendingTunnel)
	if !ok || len(pt.direct) == 0 || !s.route.Connected(id) {
		return false
	}
	h, err := s.store.Host(r.Context(), id)
	if err != nil || strings.TrimSpace(h.HostKey) == "" {
		return false
	}
	body, err := json.Marshal(wire.DirectAnswer{Direct: pt.direct, HostPublicKey: strings.TrimSpace(h.HostKey)})
	if err != nil || len(body) > wire.MaxDirectAnswerLen {
		return false
	}
	s.logger.Debug("direct addresses answered; the caller dials the agent itself", "host", id, "remote", s.remote(r))
	WriteJSONHeader(w, http.StatusOK)
	_, _ = w.Write(body)
	return true
}
