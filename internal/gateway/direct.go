package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/internal/textcut"
	"github.com/hostgate/hostgate/internal/yamux"
	"github.com/hostgate/hostgate/metrics"
)

// Direct sessions (wire/direct.go): a caller runs its SSH session straight
// to an agent's own listener, and the agent asks the gateway, over the
// one stream it opens on its tunnel, to admit each connection. The
// gateway judges it as it judges a relayed session at its door (the
// certificate's token still live and reaching the host, the audit log
// written), keeps it in the live set so that the token's revocation or
// expiry ends it (DirectEnd), and logs its start and end as the relay's.

// directWriteTimeout bounds one control stream line's write: the agent
// reads its control stream all the time, and one that stopped lets its
// tunnel's keepalive end the tunnel well before this.
var directWriteTimeout = 30 * time.Second

// serveDirect takes the control stream of the direct sessions of host
// hostID's tunnel sess: the first stream its agent opens. It closes any
// further one, and returns once sess has ended and the control stream's
// sessions are forgotten.
func (s *Server) serveDirect(sess *yamux.Session, hostID string, log *slog.Logger) {
	var control sync.WaitGroup
	defer control.Wait()
	taken, warned := false, false
	for {
		st, err := sess.AcceptStream()
		if err != nil {
			return
		}
		if taken {
			// The default tunnel mux (one stream) refuses one opened
			// while the control stream is open: this one came after it
			// ended, or the mux allows more. Logged once per tunnel, as
			// the mux's own misuse is: an agent opening streams in a
			// loop wrote a line for each.
			if !warned {
				warned = true
				log.Warn("agent opened another stream on its tunnel; closed it (an agent opens one, the control stream of its direct sessions, and when that ends its direct sessions end with it: a modified or broken agent; logged once per tunnel)")
			}
			_ = st.Close()
			continue
		}
		taken = true
		d := &directControl{s: s, hostID: hostID, log: log, st: st, sessions: map[uint64]*directSession{}}
		control.Go(d.run)
	}
}

// directControl is one tunnel's control stream and the direct sessions
// admitted on it.
type directControl struct {
	s      *Server
	hostID string
	log    *slog.Logger // the tunnel's
	st     net.Conn

	wmu sync.Mutex // one line written at a time

	mu       sync.Mutex
	sessions map[uint64]*directSession // admitted, by the agent's id; guarded by mu
	ends     sync.WaitGroup            // the DirectEnd senders (context.AfterFunc) that may run
}

// directSession is one admitted direct session.
type directSession struct {
	id      uint64
	log     *slog.Logger // host, the caller's address, the token
	started time.Time
	remove  func()      // out of the live set
	stop    func() bool // the DirectEnd sender's stop

	reasonMu sync.Mutex
	reason   string // why its token went ("revoked", "expired", …), set by the live set
}

// run reads the agent's lines until the stream or the tunnel ends or a
// line is malformed, then forgets the stream's sessions: the agent ends
// them when its control stream ends.
func (d *directControl) run() {
	defer d.endAll()
	defer d.st.Close()
	d.log.Debug("direct control stream open")
	r := wire.NewDirectReader(d.st)
	for {
		m, err := wire.ReadDirectMsg(r)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, yamux.ErrSessionShutdown) || errors.Is(err, yamux.ErrStreamClosed) {
				d.log.Debug("direct control stream ended", "err", err)
				return
			}
			d.log.Warn("direct control stream: the agent sent what is not a control line; closed it, which ends the agent's direct sessions (a modified or broken agent, or one of another version)", "err", err)
			return
		}
		switch m.Op {
		case wire.DirectOpen:
			d.open(m)
		case wire.DirectClosed:
			d.closed(m)
		default:
			d.log.Warn("direct control stream: the agent sent a line only the gateway sends; closed it, which ends the agent's direct sessions (a modified or broken agent)", "op", m.Op)
			return
		}
	}
}

// send writes one line to the agent; a failed write closes the stream,
// which ends the reader and so the stream's sessions.
func (d *directControl) send(m wire.DirectMsg) {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	_ = d.st.SetWriteDeadline(time.Now().Add(directWriteTimeout))
	_, err := d.st.Write(wire.AppendDirectMsg(nil, m))
	_ = d.st.SetWriteDeadline(time.Time{})
	if err != nil {
		d.log.Debug("direct control stream: write", "op", m.Op, "err", err)
		_ = d.st.Close()
	}
}

// open answers the agent's request to admit direct connection m.ID.
func (d *directControl) open(m wire.DirectMsg) {
	s := d.s
	remote := directRemote(m.Remote)
	log := s.logger.With("host", d.hostID, "remote", remote, "direct", m.ID)
	refuse := func(tokenName, reason string) {
		s.metrics.DirectAdmissions.WithLabelValues(metrics.DirectRefused).Inc()
		log.Info("direct refused", "token", tokenName, "keyId", m.KeyID, "reason", reason)
		d.send(wire.DirectMsg{Op: wire.DirectRefuse, ID: m.ID, Reason: reason})
	}
	d.mu.Lock()
	_, dup := d.sessions[m.ID]
	n := len(d.sessions)
	d.mu.Unlock()
	switch {
	case dup:
		refuse("", fmt.Sprintf("the agent's connection id %d is already an open direct session's (an agent bug); connect again", m.ID))
		return
	case n >= s.cfg.MaxDirectPerTunnel:
		refuse("", wire.HostMessage(d.hostID, fmt.Sprintf("it has %d direct sessions open, as many as the gateway admits per host; close one, or use the relay", n)))
		return
	}
	tok, ok, err := s.LiveToken(s.ctx, m.TokenID)
	switch {
	case err != nil:
		log.Warn("direct refused: the token could not be looked up", "err", err)
		refuse("", "the gateway cannot look the certificate's token up now (its state store does not answer); retry shortly, or use the relay")
		return
	case !ok:
		refuse("", "the certificate's token was revoked or has expired: get a new certificate with a live token (gateway cert, or the client does it itself)")
		return
	case tok.Role == store.RoleAgent:
		refuse(tok.Name, "the certificate was issued to an agent token, which reaches no host: use a client or admin token")
		return
	case !tok.Allows(d.hostID):
		refuse(tok.Name, wire.HostMessage(d.hostID, "not among the hosts the certificate's token reaches: a client token reaches only the hosts it was created with (gateway token create --role client --host ID)"))
		return
	}
	if s.cfg.AuditRequired {
		if err := s.auditUnavailable(); err != nil {
			refuse(tok.Name, auditRefusal(err))
			return
		}
	}
	s.metrics.SessionStarts.WithLabelValues("ssh-direct").Inc()
	if err := s.recordAudit(s.ctx, store.Session{TokenName: tok.Name, HostID: d.hostID, Kind: "ssh-direct", RemoteAddr: remote}); err != nil && s.cfg.AuditRequired {
		refuse(tok.Name, auditRefusal(err))
		return
	}
	ds := &directSession{id: m.ID, log: log.With("token", tok.Name), started: time.Now()}
	ctx, remove := s.live.addCut(s.ctx, tok, "ssh-direct", d.hostID, func(reason string) {
		ds.reasonMu.Lock()
		ds.reason = reason
		ds.reasonMu.Unlock()
	})
	ds.remove = remove
	d.mu.Lock()
	d.sessions[m.ID] = ds
	d.mu.Unlock()
	s.metrics.DirectOpen.Inc()
	s.metrics.DirectAdmissions.WithLabelValues(metrics.DirectAdmitted).Inc()
	ds.log.Info("direct start", "keyId", m.KeyID, "serial", m.Serial)
	d.send(wire.DirectMsg{Op: wire.DirectAdmit, ID: m.ID})
	// After the admission, so that an end the token's revocation sends
	// (at once, if it came meanwhile) follows it.
	d.ends.Add(1)
	ds.stop = context.AfterFunc(ctx, func() {
		defer d.ends.Done()
		if !errors.Is(context.Cause(ctx), ErrTokenRevoked) {
			return // the gateway is stopping, or the session ended: the agent knows
		}
		ds.reasonMu.Lock()
		why := ds.reason
		ds.reasonMu.Unlock()
		if why == "" {
			why = "revoked or expired"
		}
		d.send(wire.DirectMsg{Op: wire.DirectEnd, ID: ds.id, Reason: wire.HostMessage(d.hostID, "the session's token was "+why)})
	})
}

// directRemote is the caller's address as a DirectOpen gives it, as the
// audit log records it: the agent's word, which an agent taken over makes
// anything, and `gateway audit` prints its rows as they are, so a newline,
// tab or terminal escape in it made rows of its own (another host,
// another token) and commands to the admin's terminal. An address is
// kept as one (an agent sends its connection's remote address); anything
// else is quoted, in ASCII, and cut.
func directRemote(remote string) string {
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return ap.String()
	}
	return strconv.QuoteToASCII(textcut.Cut(remote, 100))
}

// closed forgets the session the agent says ended, and logs its end with
// the bytes it carried, as the relay's end is logged.
func (d *directControl) closed(m wire.DirectMsg) {
	d.mu.Lock()
	ds := d.sessions[m.ID]
	delete(d.sessions, m.ID)
	d.mu.Unlock()
	if ds == nil {
		// A connection refused, or one the agent never asked about: the
		// agent reports every one it ends.
		return
	}
	d.finish(ds)
	ds.log.Info("direct end", "toHost", m.ToHost, "fromHost", m.FromHost, "reason", m.Reason, "duration", time.Since(ds.started).Round(time.Millisecond))
}

// finish takes ds out of the live set and the gauge.
func (d *directControl) finish(ds *directSession) {
	if ds.stop() {
		d.ends.Done() // its sender will not run
	}
	d.s.metrics.DirectOpen.Dec()
	ds.remove()
}

// endAll forgets every session of the ended control stream (the agent
// ends them as its stream or tunnel ends), and waits for the DirectEnd
// senders, whose writes fail now that the stream is closed.
func (d *directControl) endAll() {
	d.mu.Lock()
	all := d.sessions
	d.sessions = map[uint64]*directSession{}
	d.mu.Unlock()
	for _, ds := range all {
		d.finish(ds)
		ds.log.Info("direct end", "reason", "the control stream of its agent's tunnel ended, which ends its direct sessions", "duration", time.Since(ds.started).Round(time.Millisecond))
	}
	d.ends.Wait()
}
