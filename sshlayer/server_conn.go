//go:build unix

package sshlayer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

// serverConn is one authenticated SSH connection. It is owned by
// Server.ServeConn, which calls run; run returns after every goroutine the
// connection started (channels, forwards, processes) has finished.
type serverConn struct {
	srv         *Server
	sc          *ssh.ServerConn
	log         *slog.Logger
	ctx         context.Context // ends when the connection must go
	cancel      context.CancelFunc
	fingerprint string
	certKeyID   string
	permitPTY   bool // the key may have a PTY (permit-pty)
	permitFwd   bool // the key may forward ports (permit-port-forwarding)
	permitAgent bool // the key may forward an agent (permit-agent-forwarding)

	wg sync.WaitGroup // channel handlers, forward accept loops

	mu         sync.Mutex // guards the fields below
	channels   int        // open channels, for the idle timer
	sessions   int        // open session channels, against MaxSessions
	tcpip      int        // open direct-tcpip channels, against MaxDirectTCPIP
	forwards   map[string]*remoteForward
	forwarded  int         // open forwarded-tcpip channels
	fwdDrops   dropLog     // forwarded connections dropped at maxForwardedConns
	idle       *time.Timer // nil without IdleTimeout
	nextChanID uint64
	limited    bool          // an OpenSSH client: sent under a send limit (sendsLimited)
	rtt        time.Duration // the shortest keepalive round trip, once measured
	sendLimit  uint32        // set from rtt; 0 for none

	// noSessionsAt, under mu, is the arrival (ssh.Request.Arrival) of
	// the first no-more-sessions@openssh.com, 0 before one: it refuses
	// the sessions opened after it, not one opened before it whose open
	// is handled after it.
	noSessionsAt uint64
}

func newServerConn(ctx context.Context, s *Server, sc *ssh.ServerConn, id uint64) *serverConn {
	c := &serverConn{
		srv:      s,
		sc:       sc,
		forwards: make(map[string]*remoteForward),
		limited:  sendsLimited(sc.ClientVersion()),
	}
	c.ctx, c.cancel = context.WithCancel(ctx)
	if sc.Permissions != nil {
		c.fingerprint = sc.Permissions.Extensions[extFingerprint]
		c.certKeyID = sc.Permissions.Extensions[extCertKeyID]
		_, c.permitPTY = sc.Permissions.Extensions[extPermitPTY]
		_, c.permitFwd = sc.Permissions.Extensions[extPermitPortForwarding]
		_, c.permitAgent = sc.Permissions.Extensions[extPermitAgentForwarding]
	}
	c.log = s.log.With("conn", id, "remote", addrString(sc.RemoteAddr()))
	return c
}

// run serves channels and global requests until the connection ends, then
// tears everything down and waits.
func (c *serverConn) run(chans <-chan ssh.NewChannel, reqs <-chan *ssh.Request) {
	stop := context.AfterFunc(c.ctx, func() { _ = c.sc.Close() })
	defer stop()
	if d := c.srv.cfg.IdleTimeout; d > 0 {
		c.mu.Lock()
		c.idle = time.AfterFunc(d, c.idleFired)
		c.mu.Unlock()
	}
	if c.limited {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.limitSends()
		}()
	}
	if c.srv.cfg.KeepaliveInterval > 0 {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.keepalive()
		}()
	}
	c.serve(chans, reqs)
	// The connection is gone: stop forwards and processes, then wait.
	c.cancel()
	c.mu.Lock()
	if c.idle != nil {
		c.idle.Stop()
	}
	for k, f := range c.forwards {
		f.close()
		delete(c.forwards, k)
	}
	c.mu.Unlock()
	_ = c.sc.Close()
	c.wg.Wait()
}

func (c *serverConn) dispatch(nc ssh.NewChannel) {
	fwd := false // a forwarded connection: direct-tcpip or a Unix socket's
	switch nc.ChannelType() {
	case "session":
	case "direct-tcpip", directStreamLocal:
		fwd = true
	default:
		_ = nc.Reject(ssh.UnknownChannelType, "unknown channel type")
		return
	}
	if fwd && !c.permitFwd {
		c.log.Info(nc.ChannelType() + " refused: key lacks permit-port-forwarding")
		_ = nc.Reject(ssh.Prohibited, "port forwarding not permitted")
		return
	}
	c.mu.Lock()
	if nc.ChannelType() == "session" && c.noSessionsAt != 0 && ssh.ChannelArrival(nc) > c.noSessionsAt {
		c.mu.Unlock()
		_ = nc.Reject(ssh.Prohibited, "no more sessions")
		return
	}
	n, limit := &c.sessions, c.srv.cfg.MaxSessions
	if fwd {
		n, limit = &c.tcpip, c.srv.cfg.MaxDirectTCPIP
	}
	if *n >= limit {
		c.mu.Unlock()
		c.log.Warn("ssh channel refused: too many channels", "type", nc.ChannelType(), "max", limit)
		_ = nc.Reject(ssh.ResourceShortage, "too many channels")
		return
	}
	*n++
	c.nextChanID++
	id := c.nextChanID
	c.mu.Unlock()
	c.activity(1)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer func() {
			c.mu.Lock()
			*n--
			c.mu.Unlock()
		}()
		defer c.activity(-1)
		// A forwarded connection's logger is made only when it logs:
		// With formats its attributes at once, six allocations on the
		// path of every small forwarded request.
		log := func() *slog.Logger { return c.log.With("chan", id, "type", nc.ChannelType()) }
		if nc.ChannelType() == "session" {
			c.session(nc, log())
		} else {
			c.directTCPIP(nc, log)
		}
	}()
}

// channelOpenTimeout bounds the wait for the client's answer to a
// channel the server opens: auth-agent@openssh.com, forwarded-tcpip and
// forwarded-streamlocal@openssh.com (Server.channelOpenTimeout overrides
// it in tests). OpenSSH answers at once (an agent's confirmation prompt
// comes later, on the channel; a remote forward's dial is after the
// answer); a client that does not answer must not hold the program that
// dialed the socket or the port, nor the session's end, until the
// connection ends.
const channelOpenTimeout = 30 * time.Second

// openTimeout is channelOpenTimeout, or the server's override (tests).
func (s *Server) openTimeout() time.Duration {
	if s.channelOpenTimeout > 0 {
		return s.channelOpenTimeout
	}
	return channelOpenTimeout
}

// openChannel opens a channel to the client as sc.OpenChannel does, but
// gives up when ctx ends: x/crypto's open waits for the client's answer
// with no deadline, so a client that never answers would hold whoever
// waits (a session's teardown) until the connection ends. The wait for the
// answer goes on in a goroutine counted in c.wg, which ends with the
// answer or the connection; a channel the client accepts after ctx ended
// is closed at once, and then given up is called (nil: nothing), so the
// caller can count an open it gave up as pending until it is answered.
// The caller runs in a goroutine counted in c.wg itself (a channel
// handler's, or one a handler waits for), so the counter cannot be at
// zero here.
func (c *serverConn) openChannel(ctx context.Context, typ string, payload []byte, givenUp func()) (ssh.Channel, <-chan *ssh.Request, error) {
	type answer struct {
		ch   ssh.Channel
		reqs <-chan *ssh.Request
		err  error
	}
	answered := make(chan answer) // unbuffered: a result is either taken or closed here
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		ch, reqs, err := c.sc.OpenChannel(typ, payload)
		select {
		case answered <- answer{ch, reqs, err}:
		case <-ctx.Done():
			if err == nil {
				ssh.DiscardLazily(ch, reqs)
				_ = ch.Close()
			}
			if givenUp != nil {
				givenUp()
			}
		}
	}()
	select {
	case a := <-answered:
		return a.ch, a.reqs, a.err
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("%s: %w: %w", typ, errOpenGivenUp, context.Cause(ctx))
	}
}

// errOpenGivenUp is openChannel's error when ctx ended before the answer.
var errOpenGivenUp = errors.New("channel open given up before the client answered")

// carry opens a channel of typ to the client for conn, a connection
// accepted on the client's behalf (its agent's socket, a remote forward's
// port), and copies between the two until either ends or ctx does; conn
// is closed when it returns. The wait for the client's answer ends with
// ctx or after the open timeout (channelOpenTimeout); an open given up
// keeps conn's place until the client answers it, so a client that never
// answers holds no more opens than its limit allows. release frees the
// place, once.
func (c *serverConn) carry(ctx context.Context, conn net.Conn, typ string, payload []byte, release func()) {
	timeout := c.srv.openTimeout()
	octx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("no answer in %v", timeout))
	ch, reqs, err := c.openChannel(octx, typ, payload, release)
	cancel()
	if err != nil {
		if errors.Is(err, errOpenGivenUp) {
			c.log.Info(typ+": the client did not answer the open", "err", err)
		} else {
			c.log.Info(typ+" refused by client", "err", err)
			release()
		}
		_ = conn.Close()
		return
	}
	defer release()
	copyForwarded(ctx, ch, reqs, conn)
}

// activity counts open channels and remote forwards; the idle timer runs
// only while there are none.
func (c *serverConn) activity(delta int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.channels += delta
	if c.idle == nil {
		return
	}
	if c.channels+len(c.forwards) == 0 {
		c.idle.Reset(c.srv.cfg.IdleTimeout)
	} else {
		c.idle.Stop()
	}
}

func (c *serverConn) idleFired() {
	c.mu.Lock()
	busy := c.channels+len(c.forwards) > 0
	c.mu.Unlock()
	if !busy {
		c.log.Info("ssh connection idle, closing", "idle_timeout", c.srv.cfg.IdleTimeout)
		c.cancel()
	}
}

// serve handles new channels and global requests until the connection
// closes. x/crypto's mux reads packets in order but hands requests and
// channel opens over on two buffered Go channels; a request sent before a
// channel open is therefore already queued when the open is received, and
// is handled first. A request sent after the open can be queued by then
// too, and is handled first as well: no-more-sessions@openssh.com (which
// OpenSSH's ssh sends without want-reply right behind its session's open)
// therefore compares arrivals, and binds only the sessions opened after
// it.
func (c *serverConn) serve(chans <-chan ssh.NewChannel, reqs <-chan *ssh.Request) {
	for {
		select {
		case r, ok := <-reqs:
			if !ok {
				reqs = nil // closed with chans; wait for that
				continue
			}
			c.globalRequest(r)
		case nc, ok := <-chans:
			if !ok {
				return
			}
			reqs = c.pendingRequests(reqs)
			c.dispatch(nc)
		}
	}
}

// pendingRequests handles the global requests already queued, without
// waiting for more; it returns nil once reqs is closed.
func (c *serverConn) pendingRequests(reqs <-chan *ssh.Request) <-chan *ssh.Request {
	for {
		select {
		case r, ok := <-reqs:
			if !ok {
				return nil
			}
			c.globalRequest(r)
		default:
			return reqs
		}
	}
}

// globalRequest answers one connection-level request. Unknown requests
// get a failure reply when one is wanted (RFC 4254 §4).
func (c *serverConn) globalRequest(r *ssh.Request) {
	switch r.Type {
	case "keepalive@openssh.com":
		_ = r.Reply(true, nil)
	case "no-more-sessions@openssh.com":
		c.mu.Lock()
		if c.noSessionsAt == 0 {
			c.noSessionsAt = r.Arrival()
		}
		c.mu.Unlock()
		if r.WantReply {
			_ = r.Reply(true, nil)
		}
	case "tcpip-forward":
		if !c.permitFwd {
			c.log.Info("tcpip-forward refused: key lacks permit-port-forwarding")
			if r.WantReply {
				_ = r.Reply(false, nil)
			}
			return
		}
		ok, payload := c.tcpipForward(r.Payload)
		if r.WantReply {
			_ = r.Reply(ok, payload)
		}
	case "cancel-tcpip-forward":
		ok := c.cancelTCPIPForward(r.Payload)
		if r.WantReply {
			_ = r.Reply(ok, nil)
		}
	case "streamlocal-forward@openssh.com":
		ok := c.permitFwd && c.streamLocalForward(r.Payload)
		if !c.permitFwd {
			c.log.Info("streamlocal-forward refused: key lacks permit-port-forwarding")
		}
		if r.WantReply {
			_ = r.Reply(ok, nil)
		}
	case "cancel-streamlocal-forward@openssh.com":
		ok := c.cancelStreamLocalForward(r.Payload)
		if r.WantReply {
			_ = r.Reply(ok, nil)
		}
	default:
		if r.WantReply {
			_ = r.Reply(false, nil)
		}
	}
}

// keepalive probes the client every KeepaliveInterval and ends the
// connection when a probe stays unanswered for KeepaliveMaxMissed
// intervals. SendRequest blocks forever on a dead transport, so it runs in
// its own goroutine, raced against a timer; closing the connection
// releases it.
func (c *serverConn) keepalive() {
	cfg := &c.srv.cfg
	tick := time.NewTicker(cfg.KeepaliveInterval)
	defer tick.Stop()
	limit := cfg.KeepaliveInterval * time.Duration(cfg.KeepaliveMaxMissed)
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-tick.C:
		}
		res := make(chan error, 1)
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			start := time.Now()
			_, _, err := c.sc.SendRequest("keepalive@openssh.com", true, nil)
			if err == nil {
				c.noteRTT(time.Since(start))
			}
			res <- err
		}()
		t := time.NewTimer(limit)
		select {
		case err := <-res:
			t.Stop()
			if err != nil {
				return // the connection is gone
			}
		case <-t.C:
			c.log.Info("ssh client stopped answering keepalives, closing", "after", limit)
			c.cancel()
			return
		case <-c.ctx.Done():
			t.Stop()
			return
		}
	}
}
