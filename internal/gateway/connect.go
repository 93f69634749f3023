package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hostgate/hostgate/internal/yamux"
	"golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/metrics"
)

// agentConnect is GET /v1/agents/connect: an agent's tunnel. Everything is
// checked before the upgrade (token, host, key pin), so a refused agent
// gets a JSON answer and a live tunnel for the same host stays untouched.
// After the upgrade the gateway runs the yamux client side and opens one
// stream per caller; the handler owns the tunnel until it ends.
func (s *Server) agentConnect(w http.ResponseWriter, r *http.Request) {
	if !s.track() {
		WriteError(w, http.StatusServiceUnavailable, "shutting_down", "gateway is shutting down")
		return
	}
	defer s.wg.Done()
	tok, ok := s.authenticate(w, r)
	if !ok {
		return
	}
	if tok.Role != store.RoleAgent || len(tok.Hosts) != 1 {
		s.forbid(w, "an agent token is required")
		return
	}
	hostID := tok.Hosts[0]
	if !RequireWebSocket(w, r) {
		return
	}
	if want := r.Header.Get(wire.HeaderHostID); want != "" && want != hostID {
		s.forbid(w, fmt.Sprintf("this token enrolls host %q, not %q", hostID, want))
		return
	}
	pub, _, _, rest, err := ssh.ParseAuthorizedKey([]byte(r.Header.Get(wire.HeaderHostKey)))
	if err != nil || strings.TrimSpace(string(rest)) != "" {
		WriteError(w, http.StatusBadRequest, "bad_request", wire.HeaderHostKey+": want the host public key in authorized_keys form")
		return
	}
	if _, isCert := pub.(*ssh.Certificate); isCert {
		WriteError(w, http.StatusBadRequest, "bad_request", wire.HeaderHostKey+": a plain public key, not a certificate")
		return
	}
	if msg := weakKey(pub); msg != "" {
		WriteError(w, http.StatusBadRequest, "bad_request", wire.HeaderHostKey+": "+msg)
		return
	}
	info, err := wire.DecodeInfo(r.Header.Get(wire.HeaderInfo))
	if err != nil {
		WriteError(w, http.StatusBadRequest, "bad_request", wire.HeaderInfo+": "+err.Error())
		return
	}
	var infoJSON []byte // none sent: the stored info stays (an older or minimal agent)
	if r.Header.Get(wire.HeaderInfo) != "" {
		infoJSON, _ = json.Marshal(info)
	}
	kind := info.Kind
	if kind == "" {
		kind = "machine"
	}
	hostKey := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
	log := s.logger.With("host", hostID, "remote", s.remote(r), "token", tok.Name)
	h, err := s.store.Enroll(r.Context(), store.Enrollment{HostID: hostID, Kind: kind, Info: infoJSON, HostKey: hostKey})
	if errors.Is(err, store.ErrKeyMismatch) {
		s.metrics.TunnelConnects.WithLabelValues(metrics.ConnectRefused).Inc()
		s.metrics.AuthFailures.WithLabelValues(metrics.ReasonKeyMismatch).Inc()
		pinned, _ := s.store.Host(r.Context(), hostID)
		log.Warn("agent refused: host key differs from the pinned key", "presented", ssh.FingerprintSHA256(pub), "pinned", s.record(pinned).HostKey)
		WriteError(w, http.StatusConflict, "host_key_mismatch", fmt.Sprintf(
			"host %s is pinned to host key %s but this agent presented %s; if the host was reinstalled, an admin must run `gateway host reset-key %s`",
			hostID, s.record(pinned).HostKey, ssh.FingerprintSHA256(pub), hostID))
		return
	}
	if err != nil {
		s.storeError(w, err)
		return
	}
	// Audited before the upgrade, so the entry exists once the agent is up.
	if err := s.store.RecordSession(r.Context(), store.Session{TokenName: tok.Name, HostID: hostID, Kind: "tunnel", RemoteAddr: s.remote(r)}); err != nil {
		log.Warn("audit", "err", err)
	}
	// Register before answering 101, so the host is routable as soon as the
	// agent sees the upgrade succeed; streams opened meanwhile wait.
	pt := newPendingTunnel()
	unregister, replaced, err := s.tunnels.Register(hostID, pt)
	if err != nil {
		WriteError(w, http.StatusServiceUnavailable, "shutting_down", "gateway is shutting down")
		return
	}
	// Unregister before closing, so whoever waits on the tunnel's Done
	// finds the host already gone from the registry.
	defer func() {
		unregister()
		_ = pt.Close()
	}()
	// Counted before the upgrade answers, so the count is in place once
	// the agent sees 101.
	result := metrics.ConnectNew
	switch {
	case replaced:
		result = metrics.ConnectReplaced
	case !h.CreatedAt.Equal(h.LastSeen):
		result = metrics.ConnectReconnect // enrolled before, tunnel had dropped
	}
	s.metrics.TunnelConnects.WithLabelValues(result).Inc()
	if replaced {
		if other, flapping := s.flaps.replaced(hostID, s.remote(r), time.Now()); flapping {
			log.Warn("two agents seem to serve this host: each connection replaces the other, cutting its sessions; stop one of them (same host id, token and host key)",
				"other", other)
		}
	}
	// Live (cut when the agent's token goes) before the upgrade answers
	// too: a relay may open as soon as the agent sees 101, and a recheck
	// then must find the tunnel it goes through.
	ctx, done := s.live.add(s.ctx, tok, "tunnel", hostID)
	defer done()
	w.Header().Set(wire.HeaderCAKey, s.ca.AuthorizedKey())
	w.Header().Set(wire.HeaderHostID, h.ID)
	conn, err := bytestream.Accept(w, r, &bytestream.AcceptOptions{ReadLimit: s.cfg.ReadLimit})
	if err != nil {
		log.Warn("agent upgrade", "err", err)
		return // Accept answered
	}
	sess, err := bytestream.MuxClient(conn, s.cfg.TunnelMux)
	if err != nil {
		_ = conn.Close()
		log.Error("agent mux", "err", err)
		return
	}
	if !pt.set(MuxTunnel(sess)) {
		return // replaced or closing meanwhile
	}
	log.Info("tunnel up", "result", result, "hostKey", ssh.FingerprintSHA256(pub))
	select {
	case <-sess.CloseChan():
	case <-pt.Done(): // replaced by a newer connection, or the registry closed
	case <-ctx.Done(): // the gateway closes, or the agent's token was revoked
	}
	replacedMeanwhile := false
	select {
	case <-pt.Done():
		replacedMeanwhile = s.ctx.Err() == nil
	default:
	}
	_ = sess.Close()
	err = sessErr(sess)
	if replacedMeanwhile {
		err = errReplaced
	}
	if errors.Is(context.Cause(ctx), ErrTokenRevoked) {
		err = ErrTokenRevoked
	}
	log.Info("tunnel down", "err", err)
}

// errReplaced ends a tunnel when a newer connection for its host came.
var errReplaced = errors.New("replaced by a newer connection for this host")

// flapWindow is how soon a second replacement of a host's tunnel says that
// two agents take turns, not that one reconnected over a stale connection.
const flapWindow = 2 * time.Minute

// flaps remembers each host's last tunnel replacement.
type flaps struct {
	mu   sync.Mutex
	last map[string]flap
}

type flap struct {
	at     time.Time
	remote string
}

// replaced records a replacement of hostID's tunnel by a connection from
// remote; flapping reports one within flapWindow before it, from other.
func (f *flaps) replaced(hostID, remote string, now time.Time) (other string, flapping bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.last == nil {
		f.last = map[string]flap{}
	}
	prev, ok := f.last[hostID]
	if len(f.last) >= 4096 {
		for id, p := range f.last {
			if now.Sub(p.at) > flapWindow {
				delete(f.last, id)
			}
		}
	}
	f.last[hostID] = flap{at: now, remote: remote}
	return prev.remote, ok && now.Sub(prev.at) < flapWindow
}

// sessErr is why an ended session ended (Accept returns the shutdown
// error once the session is closed).
func sessErr(sess interface {
	AcceptStream() (*yamux.Stream, error)
}) error {
	st, err := sess.AcceptStream()
	if st != nil {
		_ = st.Close()
	}
	return err
}
