package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode"

	"github.com/hostgate/hostgate/internal/yamux"
	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/gateway/sshca"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/proxyproto"
	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/internal/textcut"
	"github.com/hostgate/hostgate/metrics"
	"github.com/hostgate/hostgate/sshlayer"
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
	// The tunnel's life runs on after the handler (tunnelLife): the
	// handler's goroutine, grown by the TLS handshake and the upgrade, and
	// the conn's 8 KiB of net/http buffers it keeps reachable were held
	// for as long as the agent stayed connected.
	handedOff := false
	defer func() {
		if !handedOff {
			s.wg.Done()
		}
	}()
	tok, ok := s.authenticate(w, r)
	if !ok {
		s.metrics.AgentRefusals.WithLabelValues(metrics.RefusedToken).Inc()
		return
	}
	if tok.Role != store.RoleAgent || len(tok.Hosts) != 1 {
		s.metrics.AgentRefusals.WithLabelValues(metrics.RefusedForbidden).Inc()
		s.forbid(w, fmt.Sprintf("an agent token is required, and this is %s token: an admin makes one with `gateway token create --role agent --host ID`", article(string(tok.Role))))
		return
	}
	hostID := tok.Hosts[0]
	if !RequireWebSocket(w, r) {
		return
	}
	if want := r.Header.Get(wire.HeaderHostID); want != "" && want != hostID {
		s.metrics.AgentRefusals.WithLabelValues(metrics.RefusedForbidden).Inc()
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
	if info.Kind == store.KindDocker {
		// The kind is what the gateway trusts to tell its own sandboxes
		// from machines: a start forgets every "docker" host that is no
		// live execution (its pinned key with it, so the token's holder
		// pins another), and an execution may take over such an id.
		s.metrics.AgentRefusals.WithLabelValues(metrics.RefusedForbidden).Inc()
		s.logSpell(s.logger.With("host", hostID, "remote", s.remote(r), "token", tok.Name), hostID, spellKindDocker,
			"agent refused: it claims kind \"docker\", which only the gateway's own sandboxes have (a modified agent, or its token used by something else than `agent connect`)")
		WriteError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("%s: kind %q is the gateway's own Docker sandboxes' and no agent's: send another kind (`agent connect` sends \"machine\")", wire.HeaderInfo, store.KindDocker))
		return
	}
	// The addresses of the agent's direct listener; a gateway with
	// direct sessions off ignores them, as an older one does.
	var direct []string
	if vs, sent := r.Header[wire.HeaderDirect]; sent && !s.cfg.DirectOff {
		direct, err = wire.ParseDirectAddrs(strings.Join(vs, ","))
		if err != nil {
			WriteError(w, http.StatusBadRequest, "bad_request", wire.HeaderDirect+": "+strings.TrimPrefix(err.Error(), "wire: ")+
				": want the host:port addresses the agent's direct listener accepts SSH on (agent connect --direct ADDR), comma-separated, at most "+fmt.Sprint(wire.MaxDirectAddrs)+"; or no header for no direct sessions")
			return
		}
	}
	var infoJSON []byte // none sent: the stored info stays (an older or minimal agent)
	if r.Header.Get(wire.HeaderInfo) != "" {
		infoJSON, _ = json.Marshal(info)
	}
	noAgentFwd := r.Header.Get(wire.HeaderAgentForwarding) == wire.AgentForwardingOff
	// An agent that reads a caller preamble gets one on every stream; an
	// older one none.
	callers := r.Header.Get(wire.HeaderCallerPreamble) == wire.CallerPreambleProxyV1
	kind := info.Kind
	if kind == "" {
		kind = "machine"
	}
	hostKey := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
	log := s.logger.With("host", hostID, "remote", s.remote(r), "token", tok.Name)
	enrollment := store.Enrollment{HostID: hostID, Kind: kind, Info: infoJSON, HostKey: hostKey, Token: tok.ID}
	// The header only names a key. A key the host has pinned was proven
	// when it was pinned (and every caller checks it end to end); a key
	// to pin now is pinned only once the agent has shown it holds it, or
	// anyone with the agent token could pin a key they do not hold: by a
	// signature in the request (wire.HeaderKeySignature), or else by
	// signing an SSH key exchange with it (proveHostKey, after the
	// upgrade), which an agent without the signature (an older one, a
	// clock off by more than the skew) is asked for.
	pinned, err := s.store.Host(r.Context(), hostID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.storeError(w, err, s.storeReads)
		return
	}
	s.storeReads.answered(s.logger)
	prove := pinned.HostKey != hostKey
	signed := false // the request's signature shows the agent holds the key
	if sig := r.Header.Get(wire.HeaderKeySignature); sig != "" && (!prove || pinned.HostKey == "") {
		if err := wire.VerifyKeySignature(pub, sig, Bearer(r), r.Header.Get(wire.HeaderHostID), time.Now()); err != nil {
			if prove {
				s.logSpell(log, hostID, spellKeySignature, "agent's key signature not accepted; asking for an SSH key exchange instead", "presented", ssh.FingerprintSHA256(pub), "err", err)
			}
		} else {
			signed = true
			prove = false // proven: Enroll pins it below
		}
	}
	if !prove && !signed {
		// The pinned key, unproven: anyone with the agent token can name
		// it (callers, who check it end to end, are safe), so what the
		// request says of the host is not stored: the stored kind and
		// info stay, until an agent that signs (every agent since
		// 76bb8a8) connects.
		enrollment.Info = nil
	}
	// An unsigned connection (anyone with the agent token can name the
	// pinned key) does not replace a tunnel whose agent signed, nor does
	// a signed standby agent wait for an unsigned one: the holder of the
	// token alone took the host from its agent, which then stood by for
	// as long as the token's holder answered pings.
	var live Tunnel
	if s.tunnels.Connected(hostID) {
		live = s.tunnels.tunnel(hostID)
	}
	livePT, _ := live.(*pendingTunnel)
	liveSigned := live != nil && (livePT == nil || livePT.signed.Load()) // a sandbox's own tunnel is the gateway's
	if !prove && !signed && liveSigned {
		s.metrics.TunnelConnects.WithLabelValues(metrics.ConnectRefused).Inc()
		s.logSpell(log, hostID, spellUnsignedReplace, "agent connection not served: it names the pinned host key without showing it holds it (no valid "+wire.HeaderKeySignature+"), and an agent that showed it serves the host",
			"presented", ssh.FingerprintSHA256(pub))
		WriteError(w, http.StatusConflict, wire.CodeHostServed, wire.HostMessage(hostID,
			"an agent that signed with the host key serves this host; this connection did not sign (an agent older than December 2026, or a clock more than 5 minutes off the gateway's), so it does not take the tunnel over and stands by"))
		return
	}
	if !prove && r.Header.Get(wire.HeaderStandby) == wire.StandbyOn && live != nil && (liveSigned || !signed) {
		// The key is the pinned one (a mismatch is said first), and
		// another agent of this host serves it: this one stands by.
		// Answered before Enroll, which a poll now and then need not
		// write.
		s.metrics.TunnelConnects.WithLabelValues(metrics.ConnectStandby).Inc()
		log.Debug("standby agent: the host's tunnel is another agent's")
		WriteError(w, http.StatusConflict, wire.CodeHostServed, wire.HostMessage(hostID,
			"another agent serves this host with this agent's token and host key; this one stands by and takes over when that one's tunnel ends"))
		return
	}
	var h store.Host
	switch {
	case prove && pinned.HostKey != "":
		err = store.ErrKeyMismatch
	case prove:
		err = nil
	default:
		h, err = s.store.Enroll(r.Context(), enrollment)
	}
	if errors.Is(err, store.ErrKeyMismatch) {
		s.metrics.TunnelConnects.WithLabelValues(metrics.ConnectRefused).Inc()
		s.metrics.AuthFailures.WithLabelValues(metrics.ReasonKeyMismatch).Inc()
		pinned, _ := s.store.Host(r.Context(), hostID)
		s.refuseAgent(log, hostID, metrics.RefusedKeyMismatch, "agent refused: host key differs from the pinned key", "presented", ssh.FingerprintSHA256(pub), "pinned", s.record(pinned).HostKey)
		WriteError(w, http.StatusConflict, "host_key_mismatch", fmt.Sprintf(
			"host %s is pinned to host key %s but this agent presented %s; if the host was reinstalled, an admin must run `gateway host reset-key %s`",
			hostID, s.record(pinned).HostKey, ssh.FingerprintSHA256(pub), hostID))
		return
	}
	if errors.Is(err, store.ErrTokenGone) {
		s.tokenGone(tok)
		s.metrics.AgentRefusals.WithLabelValues(metrics.RefusedToken).Inc()
		s.refuse(w, &authError{status: http.StatusUnauthorized, code: "unauthorized", reason: metrics.ReasonUnknown,
			msg: "agent token revoked or expired while the agent connected: ask the gateway's admin for a new one (gateway token create --role agent --host " + hostID + ")"})
		return
	}
	if err != nil {
		s.storeError(w, err, s.storeWrites)
		return
	}
	if !prove {
		s.storeWrites.answered(s.logger)
	}
	// Audited before the upgrade, so the entry exists once the agent is up.
	s.recordAudit(r.Context(), store.Session{TokenName: tok.Name, HostID: hostID, Kind: "tunnel", RemoteAddr: s.remote(r)})
	pt := newPendingTunnel()
	pt.remote = s.clientIP(r)
	pt.noAgentFwd = noAgentFwd
	pt.signed.Store(signed)
	pt.agent = agentVersion(userAgent(r))
	pt.direct = direct
	var (
		result   string
		ctx      context.Context
		cleanups []func() // in reverse order when the tunnel ends (or the handler, before it is up)
	)
	// register makes the tunnel routable and live (cut when the agent's
	// token goes): for a pinned key before the upgrade answers, so the
	// host is routable as soon as the agent sees 101 (streams opened
	// meanwhile wait) and a recheck finds the tunnel a relay goes
	// through; for a key to pin, once it is proven and pinned, so an
	// unproven connection never replaces the host's live tunnel.
	register := func() bool {
		unregister, replaced, err := s.tunnels.Register(hostID, pt)
		if err != nil {
			return false
		}
		s.agentRefusals.served(hostID)
		if s.testHookRegistered != nil {
			s.testHookRegistered(hostID)
		}
		// Unregister before closing, so whoever waits on the tunnel's
		// Done finds the host already gone from the registry.
		cleanups = append(cleanups, func() { unregister(); _ = pt.Close() })
		var done func()
		ctx, done = s.live.add(s.ctx, tok, "tunnel", hostID)
		cleanups = append(cleanups, done)
		result = metrics.ConnectNew
		switch {
		case replaced:
			result = metrics.ConnectReplaced
		case !h.CreatedAt.Equal(h.LastSeen):
			result = metrics.ConnectReconnect // enrolled before, tunnel had dropped
		}
		s.metrics.TunnelConnects.WithLabelValues(result).Inc()
		if replaced {
			if other, flapping := s.flaps.replaced(hostID, s.remote(r), time.Now()); flapping {
				log.Warn("two agents seem to serve this host: each connection replaces the other, cutting its sessions; stop one of them (same host id, token and host key); not logged again until they stop taking turns for 2 minutes",
					"other", other)
			}
		}
		return true
	}
	runCleanups := func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	defer func() {
		if !handedOff {
			runCleanups()
		}
	}()
	endProof := func() {}
	if prove {
		// One proof per host at a time: an unproven tunnel is held until
		// its proof ends (up to keyProofTimeout) and is in no registry,
		// so nothing else bounds how many one agent token keeps waiting.
		if _, held := s.proving.LoadOrStore(hostID, struct{}{}); held {
			WriteError(w, http.StatusServiceUnavailable, "busy", "another agent is proving its host key for host "+hostID+"; retry shortly")
			return
		}
		endProof = sync.OnceFunc(func() { s.proving.Delete(hostID) })
		defer endProof()
	}
	if !prove && !register() {
		WriteError(w, http.StatusServiceUnavailable, "shutting_down", "gateway is shutting down")
		return
	}
	w.Header().Set(wire.HeaderCAKey, s.ca.AuthorizedKey())
	w.Header().Set(wire.HeaderHostID, hostID)
	if prove {
		w.Header().Set(wire.HeaderKeyProof, wire.KeyProofSSH)
	}
	if callers {
		w.Header().Set(wire.HeaderCallerPreamble, wire.CallerPreambleProxyV1)
	}
	if direct != nil {
		w.Header().Set(wire.HeaderDirect, wire.DirectOn)
	}
	conn, err := bytestream.Accept(w, r, &bytestream.AcceptOptions{ReadLimit: s.cfg.ReadLimit})
	if err != nil {
		log.Warn("agent upgrade", "err", err)
		return // Accept answered
	}
	sess, err := bytestream.MuxClient(conn, s.tunnelMux(log))
	if err != nil {
		_ = conn.Close()
		log.Error("agent mux", "err", err)
		return
	}
	// The agent logs the close frame's reason: replaced by a newer
	// connection for its host (two agents with one identity take turns,
	// each otherwise seeing only "tunnel closed by the gateway"), its
	// token revoked, the gateway stopping.
	var closeOnce sync.Once
	var closedHere atomic.Pointer[error] // the cause of a close frame of ours: the peer's echo is not its own reason
	closeWithReason := func(cause error) {
		closeOnce.Do(func() {
			closedHere.Store(&cause)
			code, reason := agentCloseReason(hostID, cause)
			_ = bytestream.CloseWithReason(conn, code, reason)
		})
	}
	pt.onClose(closeWithReason)
	var proof io.Closer // the proof's stream, open until the host is routable
	if prove {
		proof, err = proveHostKey(s.ctx, sess, callers, pub, s.ca, hostID, keyProofTimeout)
		if err != nil && s.ctx.Err() != nil {
			endProof()
			_ = sess.Close()
			s.keyProofCut(log, pub, err)
			return
		}
		if err != nil {
			s.metrics.TunnelConnects.WithLabelValues(metrics.ConnectRefused).Inc()
			s.refuseAgent(log, hostID, metrics.RefusedKeyUnproven, "agent refused: it did not prove it holds the host key it presented, which stays unpinned", "presented", ssh.FingerprintSHA256(pub), "err", err)
			// The slot before the tunnel: an agent that sees its tunnel
			// end and dials again must not find it still held.
			endProof()
			_ = sess.Close()
			return
		}
		h, err = s.store.Enroll(s.ctx, enrollment)
		if err != nil {
			endProof()
			// The tunnel first: the agent takes the proof's end for
			// its tunnel up unless the tunnel is gone by then.
			_ = sess.Close()
			_ = proof.Close()
			if errors.Is(err, context.Canceled) && s.ctx.Err() != nil {
				s.keyProofCut(log, pub, err)
				return
			}
			if errors.Is(err, store.ErrKeyMismatch) {
				s.metrics.TunnelConnects.WithLabelValues(metrics.ConnectRefused).Inc()
				s.metrics.AuthFailures.WithLabelValues(metrics.ReasonKeyMismatch).Inc()
			}
			if errors.Is(err, store.ErrTokenGone) {
				s.tokenGone(tok)
			}
			s.refuseAgent(log, hostID, metrics.RefusedKeyNotPinned, "agent refused: the host key could not be pinned", "presented", ssh.FingerprintSHA256(pub), "err", err)
			return
		}
		if !register() {
			endProof()
			// The tunnel first: the agent takes the proof's end for
			// its tunnel up unless the tunnel is gone by then.
			_ = sess.Close()
			_ = proof.Close()
			return
		}
		log.Info("host key pinned: the agent proved it holds it", "hostKey", ssh.FingerprintSHA256(pub))
	}
	endProof() // proven and registered (or no proof): the slot is free
	tunnel := MuxTunnel(sess)
	if callers {
		tunnel = CallerTunnel(sess)
	}
	set := pt.set(tunnel)
	if proof != nil {
		// The agent reports its tunnel up when the proof's stream ends:
		// by now the host is routable.
		_ = proof.Close()
	}
	if !set {
		return // replaced or closing meanwhile
	}
	// keyShown: this connection showed it holds the host key (a
	// signature, or the SSH proof of a key to pin). One that only named
	// the pinned key may be anyone with the agent token, whose tunnel
	// callers' host key checks refuse: the line said the same for both.
	log.Info("tunnel up", "result", result, "hostKey", ssh.FingerprintSHA256(pub), "keyShown", signed || prove, "userAgent", userAgent(r))
	handedOff = true
	s.tunnelLife(ctx, sess, pt, conn, hostID, direct, &closedHere, closeWithReason, log, func() {
		runCleanups()
		s.wg.Done()
	})
}

// tunnelLife serves agent host hostID's tunnel sess, over conn, from the
// time it is up, and when it ends, tears it down, logs how and calls done:
// the part of agentConnect that lasts as long as the agent stays
// connected. No goroutine waits for the end, which would hold a stack per
// idle agent: the session's end and ctx's run tunnelEnd. Replaced by a
// newer connection, or the registry closing, closes pt, and so the
// session.
func (s *Server) tunnelLife(ctx context.Context, sess *yamux.Session, pt *pendingTunnel, conn net.Conn, hostID string, direct []string, closedHere *atomic.Pointer[error], closeWithReason func(error), log *slog.Logger, done func()) {
	// Its direct sessions' control stream, taken from here on: an agent
	// opens it once its tunnel is up.
	directDone := make(chan struct{})
	if direct != nil {
		go func() { defer close(directDone); s.serveDirect(sess, hostID, log) }()
	} else {
		close(directDone)
	}
	end := sync.OnceFunc(func() {
		s.tunnelEnd(ctx, sess, pt, conn, hostID, directDone, closedHere, closeWithReason, log)
		done()
	})
	sess.AfterClose(end)
	context.AfterFunc(ctx, end) // the gateway closes, or the agent's token was revoked
}

// tunnelEnd ends host hostID's tunnel sess, once it has ended or ctx has,
// and logs how.
func (s *Server) tunnelEnd(ctx context.Context, sess *yamux.Session, pt *pendingTunnel, conn net.Conn, hostID string, directDone <-chan struct{}, closedHere *atomic.Pointer[error], closeWithReason func(error), log *slog.Logger) {
	replacedMeanwhile := false
	select {
	case <-pt.Done():
		replacedMeanwhile = s.ctx.Err() == nil
	default:
	}
	switch {
	case errors.Is(context.Cause(ctx), ErrTokenRevoked):
		// The callers on the tunnel are told too (TunnelCause), not
		// only the agent.
		closeWithCause(pt, ErrTokenRevoked)
	case s.ctx.Err() != nil:
		closeWithReason(ErrShuttingDown)
	}
	_ = sess.Close()
	<-directDone // its direct sessions ended with the session
	err := sessErr(sess)
	if replacedMeanwhile {
		err = errReplaced
	}
	if errors.Is(context.Cause(ctx), ErrTokenRevoked) {
		err = ErrTokenRevoked
	}
	var ours error
	if c := closedHere.Load(); c != nil {
		ours = *c
	}
	peer := bytestream.PeerClose(conn)
	if peer != nil && ours == nil {
		if peer.Code == bytestream.StatusPolicyViolation {
			// The agent refuses this gateway (its CA is not the one the
			// agent pinned): its callers hear why, as of the gateway's
			// own refusals.
			s.agentRefusals.refusedByAgent(hostID, peer.Reason, time.Now())
		}
		if !errors.As(err, new(*bytestream.CloseError)) {
			err = peer // the agent's words, where the session read only io.EOF
		}
	}
	cause, reason := tunnelEnd(hostID, err, ours, peer)
	s.metrics.TunnelDisconnects.WithLabelValues(cause).Inc()
	log.Info("tunnel down", "reason", reason, "err", err)
}

// tunnelEnd says in words how an agent's tunnel ended, for the gateway's
// "tunnel down" line, which logged only the error (coder/websocket's
// text, "failed to get reader: failed to read frame header: EOF" for a
// killed agent; the agent's echo of our own close frame, as "closed by
// the peer", when this gateway closed it): err is what the session
// ended with, ours the cause of a close frame this gateway sent, peer
// the agent's close frame, if one came. cause is the same in one word, for
// hostgate_tunnel_disconnects_total.
func tunnelEnd(hostID string, err, ours error, peer *bytestream.CloseError) (cause, reason string) {
	if ours != nil {
		_, reason = agentCloseReason(hostID, ours)
		cause = metrics.DisconnectClosedByGateway
		switch {
		case errors.Is(ours, ErrShuttingDown):
			cause = metrics.DisconnectGatewayStopping
		case errors.Is(ours, ErrTokenRevoked):
			cause = metrics.DisconnectTokenRevoked
		case errors.Is(ours, errReplaced):
			cause = metrics.DisconnectReplaced
		}
		return cause, "closed by this gateway: " + wire.TrimHost(hostID, reason)
	}
	if peer == nil {
		_ = errors.As(err, &peer)
	}
	switch {
	case peer != nil && peer.Code == bytestream.StatusGoingAway:
		// An agent stopping (SIGTERM, SIGINT) says so.
		return metrics.DisconnectAgentStopped, "the agent stopped"
	case peer != nil && peer.Reason != "":
		return metrics.DisconnectAgentClosed, "the agent closed the tunnel: " + peer.Reason
	case peer != nil:
		// An agent older than the going-away frame stops with this one.
		return metrics.DisconnectAgentClosed, "the agent closed the tunnel"
	case errors.Is(err, bytestream.ErrKeepAliveTimeout) || errors.Is(err, bytestream.ErrWriteTimeout):
		return metrics.DisconnectUnresponsive, "closed by this gateway: the agent stopped answering (agent frozen or overloaded, a proxy in between, the network)"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE):
		return metrics.DisconnectConnectionLost, "the agent's connection ended without a close (agent killed, a proxy in between, the network)"
	}
	return metrics.DisconnectFailed, "the tunnel failed"
}

// tunnelMux is the yamux configuration of one agent's tunnel: the
// gateway's, telling of the agent's misuse. An agent opening streams (it
// never should) or flooding window updates that grant nothing was bounded
// (refused streams, closed tunnel) but unheard of: each kind is logged
// once per tunnel and every frame counted.
func (s *Server) tunnelMux(log *slog.Logger) *bytestream.MuxConfig {
	mc := *s.cfg.TunnelMux
	limit := mc.MaxStreams
	if limit == 0 {
		limit = bytestream.DefaultMaxStreams
	}
	var refusedOnce, emptyOnce sync.Once
	mc.OnMisuse = func(m bytestream.MuxMisuse) {
		s.countMisuse(m)
		switch m {
		case bytestream.MisuseStreamRefused:
			refusedOnce.Do(func() {
				log.Warn("agent opened more streams than its tunnel allows (an agent opens one at most, its direct sessions' control stream: a modified or broken agent); they are refused (logged once per tunnel; hostgate_agent_misuse_total counts each)", "limit", limit)
			})
		case bytestream.MisuseEmptyWindowUpdate:
			emptyOnce.Do(func() {
				log.Warn("agent sends window updates that grant nothing (a modified or broken agent); its tunnel is closed if they go on (logged once per tunnel; hostgate_agent_misuse_total counts each)")
			})
		}
	}
	return &mc
}

// errReplaced ends a tunnel when a newer connection for its host came.
var errReplaced = errors.New("replaced by a newer connection for this host")

// agentCloseReason is the close frame that tells an agent why the gateway
// ended its tunnel.
func agentCloseReason(hostID string, cause error) (code int, reason string) {
	switch {
	case errors.Is(cause, ErrShuttingDown):
		return bytestream.StatusServiceRestart, wire.HostMessage(hostID, "the gateway is shutting down")
	case errors.Is(cause, ErrTokenRevoked):
		return bytestream.StatusPolicyViolation, wire.HostMessage(hostID, "the agent's token was revoked or expired")
	case errors.Is(cause, errReplaced):
		return wire.CloseReplaced, wire.HostMessage(hostID, "") + cause.Error()
	}
	return bytestream.StatusPolicyViolation, wire.HostMessage(hostID, "") + cause.Error()
}

// flapWindow is how soon a second replacement of a host's tunnel says that
// two agents take turns, not that one reconnected over a stale connection;
// a spell of them is logged again only after a quiet flapWindow.
const flapWindow = 2 * time.Minute

// flaps remembers each host's last tunnel replacement.
type flaps struct {
	mu   sync.Mutex
	last map[string]flap
}

type flap struct {
	at     time.Time
	remote string
	warned bool // flapping reported since the last quiet flapWindow
}

// replaced records a replacement of hostID's tunnel by a connection from
// remote; flapping reports one within flapWindow before it, from other,
// once a spell: two agents taking turns for hours replace the tunnel
// every 15-30 s each, and were logged as often.
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
	flapping = ok && now.Sub(prev.at) < flapWindow
	f.last[hostID] = flap{at: now, remote: remote, warned: flapping}
	return prev.remote, flapping && !prev.warned
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

// keyProofCut logs an agent's key proof, or its key's pinning, that the
// gateway's shutdown cut short: no refusal of the agent, which is neither
// counted nor logged as one (key_unproven said the agent could not prove
// its key), and whose callers hear nothing of it. The agent dials again,
// and proves its key to the gateway that then serves.
func (s *Server) keyProofCut(log *slog.Logger, pub ssh.PublicKey, err error) {
	log.Info("agent's key proof cut short: the gateway is shutting down; the host key stays unpinned until the agent connects again", "presented", ssh.FingerprintSHA256(pub), "err", err)
}

// keyProofTimeout bounds proveHostKey: an SSH handshake over a tunnel that
// just came up takes a few round trips and two signatures.
var keyProofTimeout = 30 * time.Second // a var for tests

// proveHostKey runs an SSH handshake with the agent's server over a new
// stream of its tunnel and succeeds only when the agent signed the key
// exchange with the private half of pub: the client checks that signature
// before its host key callback sees the key. The gateway logs in with a
// certificate of its own CA for the host, so the agent sees a connection
// that ran (not a failed handshake), and gets the connection back, open:
// the agent reports its tunnel up when it ends, so the caller closes it
// once the host is routable. On an error (or at the timeout) the caller
// closes the tunnel.
func proveHostKey(ctx context.Context, sess *yamux.Session, callers bool, pub ssh.PublicKey, ca *sshca.CA, hostID string, timeout time.Duration) (io.Closer, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The whole tunnel: a stream closed first would end the agent's
	// side of the proof before it sees the tunnel go.
	stop := context.AfterFunc(ctx, func() { _ = sess.Close() })
	defer stop()
	key, err := sshlayer.GenerateSessionKey()
	if err != nil {
		return nil, err
	}
	cert, err := ca.Sign(key.Signer.PublicKey(), hostID, "hostgate-key-proof", timeout, false)
	if err != nil {
		return nil, err
	}
	certSigner, err := ssh.NewCertSigner(cert, key.Signer)
	if err != nil {
		return nil, err
	}
	var st net.Conn
	if callers {
		// The gateway's own connection: no caller to name.
		st, err = OpenCallerStream(ctx, sess, proxyproto.Header{})
	} else {
		st, err = sess.OpenStreamContext(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("open a stream to the agent: %w", err)
	}
	want := pub.Marshal()
	c, chans, reqs, err := ssh.NewClientConn(st, hostID, &ssh.ClientConfig{
		User: "hostgate-key-proof",
		Auth: []ssh.AuthMethod{ssh.PublicKeys(certSigner)},
		HostKeyCallback: func(_ string, _ net.Addr, key ssh.PublicKey) error {
			if !bytes.Equal(key.Marshal(), want) {
				return fmt.Errorf("its SSH server signed with host key %s", ssh.FingerprintSHA256(key))
			}
			return nil
		},
		// Only pub's algorithms, so that a server holding several keys
		// signs with this one.
		HostKeyAlgorithms: hostKeyAlgorithms(pub),
		// The proof needs the exchange's signature, not post-quantum
		// secrecy for a connection that carries nothing: curve25519
		// alone allocates and computes a fraction of x/crypto's default
		// ML-KEM hybrid, which a burst of first enrollments (10,000
		// agents) pays per host.
		Config: ssh.Config{KeyExchanges: []string{ssh.KeyExchangeCurve25519}},
		// The certificate is the agent's to take: signed at once, three
		// round trips fewer in every tunnel's enrollment.
		SignFirst: true,
	})
	if ctx.Err() != nil {
		if c != nil {
			_ = c.Close()
		}
		return nil, fmt.Errorf("no SSH handshake within %v: %w", timeout, err)
	}
	if err != nil {
		return nil, err
	}
	go ssh.DiscardRequests(reqs)
	go func() {
		for ch := range chans {
			_ = ch.Reject(ssh.Prohibited, "the gateway's key proof takes no channels")
		}
	}()
	return c, nil
}

// hostKeyAlgorithms lists the signature algorithms a host key of pub's
// type signs a key exchange with.
func hostKeyAlgorithms(pub ssh.PublicKey) []string {
	if pub.Type() == ssh.KeyAlgoRSA {
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256}
	}
	return []string{pub.Type()}
}

// userAgent is r's User-Agent, which a hostgate agent sets to its build
// (agent.UserAgent), so that the tunnel up line shows which hosts run
// which agent in a rolling upgrade; cut to a line's worth, as it is the
// caller's to choose.
func userAgent(r *http.Request) string {
	// Valid UTF-8 and printable: the agent chooses it, and it becomes a
	// label of hostgate_agent_tunnels, and a label that is not UTF-8 fails
	// the whole /metrics scrape (a header may carry any byte from 0x80
	// up).
	ua := strings.Map(func(c rune) rune {
		if !unicode.IsPrint(c) {
			return '?'
		}
		return c
	}, strings.ToValidUTF8(r.UserAgent(), "?"))
	return textcut.Cut(ua, 200)
}

// agentVersion is the build a hostgate agent names in its User-Agent
// ("hostgate-agent (BUILD)", agent.UserAgent), or the User-Agent itself
// from anything else: an agent older than December 2026 sent Go's
// default, "Go-http-client/1.1".
func agentVersion(ua string) string {
	if v, ok := strings.CutPrefix(ua, "hostgate-agent ("); ok {
		if v, ok := strings.CutSuffix(v, ")"); ok {
			return v
		}
	}
	return ua
}
