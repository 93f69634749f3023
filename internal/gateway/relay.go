package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/bicopy"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/internal/textcut"
	"github.com/hostgate/hostgate/metrics"
)

// relaySSH is GET /v1/hosts/{id}/ssh: the caller's WebSocket becomes a
// new stream to the host's agent (or, for a caller that prefers the
// host's direct listener and a host that has one, its addresses:
// answerDirect; for a caller that only asks, wire.DirectAsk, 204 where
// there are none). The stream is opened before the upgrade
// so an offline host is a JSON 503, not a WebSocket that closes at once.
// Bytes are copied both ways (yamux windows give backpressure per stream,
// so a slow caller stalls only its own stream) and never decrypted; both
// ends close when either ends or the gateway closes.
func (s *Server) relaySSH(w http.ResponseWriter, r *http.Request) {
	// Before anything else: Accept checks the Origin only once the stream
	// is open, so a page of any site (a preview's, same-site) had a
	// logged-in admin's browser open, and at once close, a stream to every
	// host the session reaches, each an SSH connection its agent began.
	if !originAllowed(w, r) {
		return
	}
	tok, id, ok := s.caller(w, r)
	if !ok || !RequireWebSocket(w, r) {
		return
	}
	switch r.Header.Get(wire.HeaderDirect) {
	case wire.DirectPrefer:
		if s.answerDirect(w, r, id) {
			return
		}
	case wire.DirectAsk:
		if s.answerDirect(w, r, id) {
			return
		}
		// 204 sends the caller to the relay (gateway proxy --fdpass starts
		// a process for it): a host the relay would answer 404 or 410 is
		// answered so now. A connected one exists; an offline one is left
		// to the relay, whose route may bring it up.
		if !s.route.Connected(id) && s.hostAbsent(r.Context(), w, id) {
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if !s.track() {
		WriteError(w, http.StatusServiceUnavailable, "shutting_down", "gateway is shutting down")
		return
	}
	defer s.wg.Done()
	stream, err := s.route.Open(s.WithCaller(r.Context(), r), id)
	if err != nil {
		s.openError(w, r, id, err)
		return
	}
	if r.Header.Get(wire.HeaderPinnedKey) != "" {
		// Asked for only: a store read on every relay is not free.
		if h, err := s.store.Host(r.Context(), id); err == nil && h.HostKey != "" {
			w.Header().Set(wire.HeaderPinnedKey, h.HostKey)
		}
	}
	ws, err := bytestream.Accept(w, r, &bytestream.AcceptOptions{ReadLimit: s.cfg.ReadLimit})
	if err != nil {
		_ = stream.Close()
		return // Accept answered
	}
	s.audit(r, tok, id, "ssh")
	s.metrics.StreamsOpen.Inc()
	defer s.metrics.StreamsOpen.Dec()
	log := s.logger.With("host", id, "remote", s.remote(r), "token", tok.Name)
	if why := r.Header.Get(wire.HeaderDirectFailed); why != "" {
		// The caller's word, bounded: which callers cannot reach the
		// addresses the host's agent advertises, and why.
		s.metrics.DirectFallbacks.Inc()
		log.Info("relay start", "directFailed", textcut.Cut(why, wire.MaxDirectFailedLen))
	} else {
		log.Info("relay start")
	}
	ctx, done := s.live.add(s.ctx, tok, "ssh", id)
	defer done()
	tunnelDone, tunnelCause := tunnelOf(stream)
	caller := &relayCaller{
		countConn: countConn{Conn: ws,
			in:  s.metrics.BytesRelayed.WithLabelValues(metrics.ToHost),
			out: s.metrics.BytesRelayed.WithLabelValues(metrics.FromHost)},
		why: func() (int, string) { return relayEndReason(ctx, tunnelDone, tunnelCause, s.endedHost, id) },
	}
	if sh, ok := stream.(shrinker); ok {
		defer shrinkEvery(sh, shrinkInterval)()
	}
	st, err := bicopy.Copy(ctx, caller, stream)
	if err != nil && ctx.Err() != nil {
		err = context.Cause(ctx)
	}
	log.Info("relay end", "toHost", st.AToB, "fromHost", st.BToA, "err", err, "closeReason", caller.reason)
}

// originAllowed answers 403, as the API's JSON error, a WebSocket request
// from a page of another origin than the gateway's (Accept's rule, with no
// other origins allowed), and reports whether r may go on. A program sends
// no Origin.
func originAllowed(w http.ResponseWriter, r *http.Request) bool {
	err := bytestream.CheckOrigin(r, nil)
	if err == nil {
		return true
	}
	WriteError(w, http.StatusForbidden, "forbidden", "cross-origin WebSocket refused: "+err.Error()+
		"; only the gateway's own pages, or a program (which sends no Origin), may open it")
	return false
}

// relayCaller is the caller's end of a relay. Its Close tells the caller
// why when the gateway, not the caller or the host's SSH server, ended the
// relay: the WebSocket closes with a status and a reason naming the host
// (a *bytestream.CloseError on the caller's side), which `gateway proxy`
// prints for ssh, where a plain close left only "Connection closed".
type relayCaller struct {
	countConn
	why    func() (code int, reason string)
	once   sync.Once // bicopy.Copy may close from both directions at once
	reason string    // what Close told the caller; set by Close, read after bicopy.Copy
}

// relayWriteTimeout bounds each write to a relay's caller. A caller whose
// path stalled with its socket open (a NAT that lost its state, a frozen
// process) reads nothing, and the relay's write to it waited for ever once
// the sockets' buffers were full; so did the host's stream, which nobody
// read any more, and with it the host's own end of the session (its SSH
// keepalive gives up about 2 minutes in) never reached the gateway. A
// live caller reads its socket whatever its program does (SSH channel
// windows bound what waits for the program), and a write is at most a
// relay copy's 256 KiB, so 2 minutes, what the agent's keepalive takes
// (tunnels bound theirs at 30 s per 64 KiB), ends only one that is gone.
var relayWriteTimeout = 2 * time.Minute // a var for tests

func (c *relayCaller) Write(p []byte) (int, error) {
	_ = c.Conn.SetWriteDeadline(time.Now().Add(relayWriteTimeout))
	n, err := c.countConn.Write(p)
	_ = c.Conn.SetWriteDeadline(time.Time{})
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		err = fmt.Errorf("the caller read nothing for %v: %w", relayWriteTimeout, err)
	}
	return n, err
}

func (c *relayCaller) Close() error {
	var err error
	c.once.Do(func() {
		code, reason := c.why()
		if code == 0 {
			err = c.Conn.Close()
			return
		}
		c.reason = reason
		err = bytestream.CloseWithReason(c.Conn, code, reason)
	})
	return err
}

// hostEnd is how host id, an execution, ended for good (SetHostEnded):
// its end reason and when; reason is "" when it did not.
func (s *Server) hostEnd(id string) (reason string, at time.Time) {
	s.mu.Lock()
	f := s.hostEnded
	s.mu.Unlock()
	if f == nil {
		return "", time.Time{}
	}
	ctx, cancel := context.WithTimeout(s.ctx, hostEndedTimeout)
	defer cancel()
	return f(ctx, id)
}

// endedHost is why host id ended for good, in words ("reason runtime"),
// or "".
func (s *Server) endedHost(id string) string {
	if reason, _ := s.hostEnd(id); reason != "" {
		return "reason " + reason
	}
	return ""
}

// OfflineReason says, for a caller who finds host id offline or unknown,
// what the gateway knows of why, in words for a person, as the API's
// answers say it: ended is true for an execution that ended for good, and
// why is then "its execution ended (reason …)"; otherwise why is its
// agent's last refusal and who can fix it, or "" when nothing is known.
func (s *Server) OfflineReason(id string) (ended bool, why string) {
	why, reason, _ := s.OfflineCause(id)
	return reason != "", why
}

// OfflineCause is OfflineReason with, for an execution that ended for
// good, its end reason and time as its gone answers carry them (reason ""
// otherwise), from one question to SetHostEnded's answerer.
func (s *Server) OfflineCause(id string) (why, reason string, endedAt time.Time) {
	if reason, at := s.hostEnd(id); reason != "" {
		return "its execution ended (reason " + reason + ")", reason, at
	}
	return s.agentRefusals.why(id, time.Now()), "", time.Time{}
}

// endedMessage says that host id, an execution, ended for good, and why.
func endedMessage(id, why string) string {
	return wire.HostMessage(id, "its execution ended ("+why+"): provision a new one")
}

// codeGone is the code of an ended execution's answers, the executions
// API's (dockerhost.CodeGone) and its host's alike.
const codeGone = "gone"

// hostGone answers a request for host id, when its execution ended for
// good, as the executions API answers the execution: 410 gone with the
// reason and endedAt, and reports whether it did. It answered 404
// not_found, which a caller could tell from a host that never was only by
// matching the message's words.
func (s *Server) hostGone(w http.ResponseWriter, id string) bool {
	reason, at := s.hostEnd(id)
	if reason == "" {
		return false
	}
	WriteEndedError(w, http.StatusGone, codeGone, endedMessage(id, "reason "+reason), reason, at)
	return true
}

// hostNotFound answers a request for host id, which has no record: 410
// gone for an execution that ended (its record goes with it), so that a
// caller holding its id learns to provision anew rather than doubt the id;
// 404 otherwise.
func (s *Server) hostNotFound(w http.ResponseWriter, id string) {
	if s.hostGone(w, id) {
		return
	}
	WriteError(w, http.StatusNotFound, "not_found", noSuchHost)
}

// noSuchHost is the 404 of a host id with no record: it says where the
// enrolled ones are listed, and when a machine's host gets its record.
const noSuchHost = "no such host: no host of this id is enrolled (GET /v1/hosts lists those that are; a machine's host is enrolled when its agent first connects)"

// hostAbsent answers, for host id, 410 gone when it ended for good and
// 404 when it is not enrolled, and reports whether it did; a store that
// cannot say answers nothing (false). For answers that are empty either
// way, such as a host's shares, so that they do not read as "none yet".
func (s *Server) hostAbsent(ctx context.Context, w http.ResponseWriter, id string) bool {
	if s.hostGone(w, id) {
		return true
	}
	if _, err := s.store.Host(ctx, id); errors.Is(err, store.ErrNotFound) {
		WriteError(w, http.StatusNotFound, "not_found", noSuchHost)
		return true
	}
	return false
}

// endedOffline answers, for host h, offline, whose execution ended for
// good but whose record is still there (until its agent is forgotten), as
// hostNotFound answers once the record has gone, and reports whether it
// did. Only a sandbox's is asked about: asking costs a machine's host a
// store read.
func (s *Server) endedOffline(w http.ResponseWriter, h store.Host) bool {
	return h.Kind == store.KindDocker && !s.route.Connected(h.ID) && s.hostGone(w, h.ID)
}

// hostEndedTimeout bounds asking why a host ended, as a relay closes: a
// store that does not answer costs the close reason, not the close.
const hostEndedTimeout = 2 * time.Second

// relayEndReason says why a relay to host id ends, if the gateway ends
// it: ctx ended (the gateway stops, the caller's token was revoked) or the
// host's tunnel ended (its agent stopped, restarted or lost its network,
// or a newer connection of its agent replaced it: tunnelCause says so; or
// the host itself ended, an execution terminated or out of its runtime:
// ended says so).
// yamux closes a session's close channel before it gives the session's
// streams EOF, so a stream ended by its tunnel finds tunnelDone closed.
// Reasons stay short (a close frame carries at most 123 bytes); the
// gateway's log has the detail. code is 0 when neither: the SSH
// connection ended by itself.
func relayEndReason(ctx context.Context, tunnelDone <-chan struct{}, tunnelCause func() error, ended func(id string) string, id string) (code int, reason string) {
	if ctx.Err() != nil {
		cause := context.Cause(ctx)
		switch {
		case errors.Is(cause, ErrShuttingDown):
			return bytestream.StatusServiceRestart, wire.HostMessage(id, "the gateway is shutting down; reconnect")
		case errors.Is(cause, ErrTokenRevoked):
			return bytestream.StatusPolicyViolation, wire.HostMessage(id, "the session's token was revoked or expired")
		}
		return 0, ""
	}
	select {
	case <-tunnelDone:
		switch cause := tunnelCause(); {
		case errors.Is(cause, errReplaced):
			// Not gone: the host is back on the newer connection.
			return bytestream.StatusBadGateway, wire.HostMessage(id, "its agent reconnected, ending this session's tunnel; connect again")
		case errors.Is(cause, ErrShuttingDown):
			return bytestream.StatusServiceRestart, wire.HostMessage(id, "the gateway is shutting down; reconnect")
		case errors.Is(cause, ErrTokenRevoked):
			return bytestream.StatusBadGateway, wire.HostMessage(id, "its agent's token was revoked or expired")
		case errors.Is(cause, errUnresponsive):
			return bytestream.StatusBadGateway, wire.HostMessage(id, "its agent stopped answering (the network, or the agent frozen); connect again once it is back")
		}
		if why := ended(id); why != "" {
			return bytestream.StatusBadGateway, endedMessage(id, why)
		}
		return bytestream.StatusBadGateway, wire.HostMessage(id, "its agent disconnected from the gateway")
	default:
		return 0, ""
	}
}

// tunnelOf is what a stream opened by Registry.Open says of its tunnel:
// a channel closed when the tunnel ends, and why it ended (nil while it
// lives, or when nothing says). A stream of another Tunnels says nothing.
func tunnelOf(stream net.Conn) (done <-chan struct{}, cause func() error) {
	cause = func() error { return nil }
	if t, ok := stream.(interface{ TunnelDone() <-chan struct{} }); ok {
		done = t.TunnelDone()
	}
	if t, ok := stream.(interface{ TunnelCause() error }); ok {
		cause = t.TunnelCause
	}
	return done, cause
}

// openError answers a failed Tunnels.Open.
func (s *Server) openError(w http.ResponseWriter, r *http.Request, id string, err error) {
	switch {
	case errors.Is(err, ErrTooManyStreams):
		// The limit and the way out: "too many open sessions" named neither.
		WriteError(w, http.StatusServiceUnavailable, "too_many_streams", wire.HostMessage(id, fmt.Sprintf(
			"too many open sessions: it has %d, the most one host may; close some (ssh sessions, SFTP, forwards, web terminals) and retry", s.tunnels.maxStreams)))
	case errors.Is(err, ErrClosed):
		WriteError(w, http.StatusServiceUnavailable, "shutting_down", "gateway is shutting down")
	case errors.Is(err, ErrHostOffline):
		if _, serr := s.store.Host(r.Context(), id); errors.Is(serr, store.ErrNotFound) {
			s.hostNotFound(w, id)
			return
		}
		// An execution that ended keeps its record a moment, until its
		// agent is forgotten: it is not coming back, so say what its
		// record's end will.
		if s.hostGone(w, id) {
			return
		}
		msg := "not connected to the gateway"
		if why := s.agentRefusals.why(id, time.Now()); why != "" {
			msg += "; " + why
		}
		WriteError(w, http.StatusServiceUnavailable, "host_offline", wire.HostMessage(id, msg))
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		WriteError(w, http.StatusServiceUnavailable, "host_offline", wire.HostMessage(id, "opening a stream was cancelled"))
	default:
		s.logger.Warn("open stream", "host", id, "err", err)
		WriteError(w, http.StatusBadGateway, "host_unreachable", wire.HostMessage(id, "could not open a stream"))
	}
}

// countConn counts relayed bytes as they pass, so /metrics moves during a
// long session, not only at its end.
type countConn struct {
	net.Conn
	in, out prometheus.Counter
}

func (c *countConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.in.Add(float64(n))
	}
	return n, err
}

func (c *countConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.out.Add(float64(n))
	}
	return n, err
}

// shrinkInterval is how often a relayed stream that holds no unread bytes
// gives back its receive buffer.
const shrinkInterval = 5 * time.Second

// shrinker is a yamux stream (or Registry.Open's wrapper of one): Shrink
// drops its receive buffer if empty.
type shrinker interface{ Shrink() }

var _ shrinker = (*bytestream.MuxStream)(nil)

// shrinkEvery calls s.Shrink every interval until the returned stop is
// called. A caller that reads slower than its host sends lets the stream's
// receive buffer grow to up to twice the tunnel's window, and yamux keeps
// it for the stream's life; dropping it whenever a Read empties it made a
// stream 4x slower (it was grown again, by doubling, over and over), so it
// is dropped at most once per interval, and only when empty.
func shrinkEvery(s shrinker, interval time.Duration) (stop func()) {
	var (
		mu      sync.Mutex
		stopped bool
		t       *time.Timer
	)
	mu.Lock()
	defer mu.Unlock()
	t = time.AfterFunc(interval, func() {
		s.Shrink()
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			t.Reset(interval)
		}
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}
