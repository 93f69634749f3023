package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hostgate/hostgate/internal/accept"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/rawio"
	"github.com/hostgate/hostgate/internal/yamux"
	"github.com/hostgate/hostgate/sshlayer"
	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

// Direct sessions (`agent connect --direct ADDR`): callers that can reach
// the agent's own listener run their SSH sessions on it, not through the
// gateway's relay, and the gateway admits each one over a control stream
// of the agent's tunnel (internal/gateway/wire's direct.go is the
// protocol). A direct connection is served by the tunnel's own SSH
// server, and lives no longer than the tunnel, or its control stream,
// that admitted it: past them the gateway could not end it.

// MaxDirectConns bounds the direct connections served at once, handshakes
// included; more are closed as they are accepted. Each holds a few
// goroutines and its SSH buffers, and a connection the gateway admitted
// is a caller with a token for the host: 256 is far beyond what one
// host's callers run, and small enough that a flood of connections does
// not take the agent's memory.
const MaxDirectConns = 256

// admitTimeout bounds the wait for the gateway's answer to a DirectOpen:
// under the server's handshake timeout (10 s), so that a gateway slow to
// answer is logged as that, not as a handshake timeout.
const admitTimeout = 8 * time.Second

// directSendTimeout bounds one write on the control stream: a gateway
// that stopped reading must not hold a connection's handshake or end.
const directSendTimeout = 5 * time.Second

// errTunnelDown refuses a direct connection while the agent has no
// tunnel: nobody could admit it.
var errTunnelDown = errors.New("the agent's tunnel to the gateway is down: direct sessions need the gateway to admit them; use the relay")

// errNoDirect refuses every direct connection of a tunnel whose gateway
// did not answer wire.DirectOn.
var errNoDirect = errors.New("this gateway does not admit direct sessions (its answer to the agent's connect had no " + wire.HeaderDirect + ": " + wire.DirectOn + "; a gateway started with --direct-sessions=off, or an older one): use the relay")

// directAddrs is what the agent advertises (wire.HeaderDirect) for its
// direct listener on listen, bound to bound: advertise when given, else
// the listen address when its host is specific, else the machine's
// addresses (ifaces) of the listener's family that a caller elsewhere
// could dial: not loopback, not link-local.
func directAddrs(listen string, bound net.Addr, advertise string, ifaces func() ([]net.Addr, error)) ([]string, error) {
	if strings.TrimSpace(advertise) != "" {
		addrs, err := wire.ParseDirectAddrs(advertise)
		if err != nil {
			return nil, fmt.Errorf("--direct-advertise: %w", err)
		}
		return addrs, nil
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("--direct %q: want [HOST]:PORT, such as :2222: %w", listen, err)
	}
	ta, ok := bound.(*net.TCPAddr)
	if !ok {
		return nil, fmt.Errorf("--direct %q: not a TCP listener", listen)
	}
	port := strconv.Itoa(ta.Port)
	ip := net.ParseIP(host)
	if host != "" && (ip == nil || !ip.IsUnspecified()) {
		addrs, err := wire.ParseDirectAddrs(net.JoinHostPort(host, port))
		if err != nil {
			return nil, fmt.Errorf("--direct %q: %w", listen, err)
		}
		return addrs, nil
	}
	v4only := ip != nil && ip.To4() != nil // 0.0.0.0 listens on IPv4 alone; "" and :: on both
	list, err := ifaces()
	if err != nil {
		return nil, fmt.Errorf("--direct %q: this machine's addresses, to advertise: %w (give --direct-advertise HOST:PORT)", listen, err)
	}
	var out []string
	for _, a := range list {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip := n.IP
		if ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsMulticast() || ip.IsUnspecified() || v4only && ip.To4() == nil {
			continue
		}
		out = append(out, net.JoinHostPort(ip.String(), port))
		if len(out) == wire.MaxDirectAddrs {
			break
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--direct %q: this machine has no address but loopback and link-local ones to advertise: give --direct-advertise HOST:PORT, or a specific host in --direct", listen)
	}
	return wire.ParseDirectAddrs(strings.Join(out, ","))
}

// interfaceAddrs lists this machine's addresses (a var for tests).
var interfaceAddrs = net.InterfaceAddrs

// directListener serves the agent's direct listener for its whole life;
// each tunnel's gate, while it is up, admits its connections.
type directListener struct {
	ln     net.Listener
	log    *slog.Logger
	listen string // --direct
	// ownAddrs: advertise is this machine's addresses (no
	// --direct-advertise, no specific host in --direct), which the
	// agent looks up again at each attempt to connect.
	ownAddrs  bool
	advertise []string      // set at the start, then by the connector's loop alone
	slots     chan struct{} // MaxDirectConns
	full      atomic.Bool   // the last accept found every slot taken (logged once)
	// downSaid: a connection was refused for want of a tunnel since the
	// last one came up; the next are logged at Debug, so a port scan or
	// a retrying caller writes one Info line, not one per connect.
	downSaid atomic.Bool
	cur      atomic.Pointer[directGate]
	ctx      context.Context // ends when the agent stops
	cancel   context.CancelFunc
	wg       sync.WaitGroup // the accept loop, every connection, every gate's reader
}

// listenDirect listens on cfg.Direct and works out what to advertise.
func listenDirect(cfg *ConnectConfig, log *slog.Logger) (*directListener, error) {
	ln, err := net.Listen("tcp", cfg.Direct)
	if err != nil {
		return nil, fmt.Errorf("agent: --direct: %w", err)
	}
	addrs, err := directAddrs(cfg.Direct, ln.Addr(), cfg.DirectAdvertise, interfaceAddrs)
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("agent: %w", err)
	}
	d := &directListener{ln: ln, log: log.With("direct", ln.Addr().String()), listen: cfg.Direct, advertise: addrs, slots: make(chan struct{}, MaxDirectConns)}
	if strings.TrimSpace(cfg.DirectAdvertise) == "" {
		host, _, _ := net.SplitHostPort(cfg.Direct)
		ip := net.ParseIP(host)
		d.ownAddrs = host == "" || ip != nil && ip.IsUnspecified()
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	d.log.Info("direct sessions: listening; callers that reach an advertised address run their sessions here, the gateway admitting each", "advertise", strings.Join(addrs, ","))
	d.wg.Go(d.acceptLoop)
	return d, nil
}

// currentAdvertise is what to advertise on the next attempt to connect.
// This machine's addresses are looked up again each time: a DHCP lease or
// a laptop's new network gives it others, and the ones found at the start
// were advertised for the agent's whole life, callers sent to an address
// it no longer had (each connection's direct dial failing first, direct
// sessions never used again) until it restarted. A lookup that finds none
// (the network down) keeps the last list.
func (d *directListener) currentAdvertise() []string {
	if !d.ownAddrs {
		return d.advertise
	}
	addrs, err := directAddrs(d.listen, d.ln.Addr(), "", interfaceAddrs)
	if err != nil {
		d.log.Debug("direct sessions: this machine's addresses not found now; advertising the last ones", "err", err, "advertise", strings.Join(d.advertise, ","))
		return d.advertise
	}
	if !slices.Equal(addrs, d.advertise) {
		d.log.Info("direct sessions: this machine's addresses changed; advertising the new ones", "advertise", strings.Join(addrs, ","), "was", strings.Join(d.advertise, ","))
		d.advertise = addrs
	}
	return addrs
}

// close stops the listener and every direct connection, and waits for
// them.
func (d *directListener) close() {
	d.cancel()
	_ = d.ln.Close()
	d.wg.Wait()
}

func (d *directListener) acceptLoop() {
	for {
		conn, err := accept.Next(d.ctx, d.ln, func(err error, wait time.Duration) {
			d.log.Warn("direct listener: accept failed for now; trying again", "err", err, "retry", wait)
		})
		if err != nil {
			if d.ctx.Err() == nil {
				d.log.Error("direct listener failed: direct sessions are refused until the agent restarts; callers use the relay", "err", err)
			}
			return
		}
		select {
		case d.slots <- struct{}{}:
			d.full.Store(false)
		default:
			if !d.full.Swap(true) {
				d.log.Warn("direct connection refused: too many at once; refusing more until one ends (logged once)", "remote", conn.RemoteAddr().String(), "max", MaxDirectConns)
			}
			_ = conn.Close()
			continue
		}
		d.wg.Go(func() {
			defer func() { <-d.slots }()
			g := d.cur.Load()
			if g == nil {
				level := slog.LevelInfo
				if d.downSaid.Swap(true) {
					level = slog.LevelDebug
				}
				d.log.Log(d.ctx, level, "direct connection refused; more while the tunnel is down are logged at debug", "remote", conn.RemoteAddr().String(), "reason", errTunnelDown.Error())
				_ = conn.Close()
				return
			}
			g.serve(conn)
		})
	}
}

// directGate admits the direct connections of one tunnel, through its
// control stream.
type directGate struct {
	d   *directListener
	srv *sshlayer.Server
	log *slog.Logger
	on  bool // the gateway answered wire.DirectOn
	// ctx ends with the tunnel or its control stream, its cause why, and
	// with it every connection admitted through the gate.
	ctx    context.Context
	cancel context.CancelCauseFunc

	wmu sync.Mutex // one line at a time on ctl

	mu      sync.Mutex // guards the fields below
	ctl     net.Conn   // the control stream; nil until opened
	nextID  uint64
	waiting map[uint64]pending                 // DirectOpen sent, no answer yet
	live    map[uint64]context.CancelCauseFunc // admitted: DirectEnd ends them
}

// pending is a connection waiting for the gateway's answer: where the
// answer goes, and what ends the connection once admitted.
type pending struct {
	answer chan wire.DirectMsg // buffered: the one answer
	end    context.CancelCauseFunc
}

// newGate makes the gate of a tunnel served by srv; on says whether its
// gateway admits direct sessions.
func (d *directListener) newGate(srv *sshlayer.Server, on bool, log *slog.Logger) *directGate {
	g := &directGate{d: d, srv: srv, log: log, on: on, waiting: map[uint64]pending{}, live: map[uint64]context.CancelCauseFunc{}}
	g.ctx, g.cancel = context.WithCancelCause(d.ctx)
	return g
}

// start puts the gate in service once its tunnel is up: with the gateway's
// DirectOn, it opens the control stream on sess, and reads it in the
// background. It opens the stream before it returns, so that a caller
// told the host is up finds its direct sessions admitted.
func (g *directGate) start(sess *yamux.Session) {
	if !g.on {
		g.log.Info("this gateway does not admit direct sessions: the direct listener refuses every connection while this tunnel lasts; callers use the relay")
		g.d.setGate(g)
		return
	}
	st, err := sess.OpenStreamContext(g.ctx)
	if err != nil {
		if g.ctx.Err() == nil {
			g.log.Warn("direct sessions: could not open their control stream on the tunnel; refusing them while this tunnel lasts", "err", err)
		}
		return
	}
	g.mu.Lock()
	if g.ctx.Err() != nil {
		g.mu.Unlock()
		_ = st.Close()
		return
	}
	g.ctl = st
	g.mu.Unlock()
	g.d.setGate(g)
	g.log.Info("direct sessions: the gateway admits them; control stream open")
	g.d.wg.Go(func() { g.read(st) })
}

// setGate puts g in service: a connection refused once it has gone is
// logged at Info again.
func (d *directListener) setGate(g *directGate) {
	d.cur.Store(g)
	d.downSaid.Store(false)
}

// end is the end of the gate's tunnel: new direct connections are refused
// until the next one, and the ones it admitted end.
func (g *directGate) end() {
	g.d.cur.CompareAndSwap(g, nil)
	g.cancel(errors.New("the agent's tunnel to the gateway ended, and with it the gateway's say over the session"))
	g.mu.Lock()
	ctl := g.ctl
	g.mu.Unlock()
	if ctl != nil {
		_ = ctl.Close()
	}
}

// read handles the gateway's lines until the control stream ends, which
// ends every connection admitted through it.
func (g *directGate) read(st net.Conn) {
	r := wire.NewDirectReader(st)
	for {
		m, err := wire.ReadDirectMsg(r)
		if err != nil {
			if g.ctx.Err() == nil {
				g.log.Warn("direct sessions: their control stream ended; ending the direct sessions it admitted and refusing new ones while this tunnel lasts", "err", err)
			}
			g.cancel(fmt.Errorf("the control stream of direct sessions ended (%v), and with it the gateway's say over the session", err))
			_ = st.Close()
			return
		}
		switch m.Op {
		case wire.DirectAdmit, wire.DirectRefuse:
			// Live here, before the next line is read, not once admit
			// has woken: a DirectEnd right behind the admission found
			// no live connection and was dropped, and the session ran
			// on out of the gateway's reach.
			g.mu.Lock()
			p, ok := g.waiting[m.ID]
			delete(g.waiting, m.ID)
			if ok && m.Op == wire.DirectAdmit {
				g.live[m.ID] = p.end
			}
			g.mu.Unlock()
			if !ok {
				g.log.Debug("direct sessions: the gateway answered a connection no longer waiting", "id", m.ID, "op", m.Op)
				continue
			}
			p.answer <- m
		case wire.DirectEnd:
			g.mu.Lock()
			end := g.live[m.ID]
			g.mu.Unlock()
			if end == nil {
				g.log.Debug("direct sessions: the gateway ended a connection already gone", "id", m.ID)
				continue
			}
			g.log.Info("direct session ended by the gateway", "id", m.ID, "reason", m.Reason)
			end(fmt.Errorf("the gateway ended the session: %s", m.Reason))
		default:
			g.log.Debug("direct sessions: ignoring a control line the agent does not take", "op", m.Op, "id", m.ID)
		}
	}
}

// send writes m on the control stream.
func (g *directGate) send(m wire.DirectMsg) error {
	g.mu.Lock()
	ctl := g.ctl
	g.mu.Unlock()
	if ctl == nil {
		return errors.New("no control stream")
	}
	g.wmu.Lock()
	defer g.wmu.Unlock()
	_ = ctl.SetWriteDeadline(time.Now().Add(directSendTimeout))
	_, err := ctl.Write(wire.AppendDirectMsg(nil, m))
	return err
}

// admission is one direct connection's dealings with the gateway.
type admission struct {
	id  uint64 // its DirectOpen's; 0 before one was sent
	err error  // the gateway's answer: nil admitted
}

// serve runs one direct connection on the tunnel's server, admitted by
// the gateway, until it ends or the gateway, the control stream or the
// tunnel ends it; then it tells the gateway so, with its bytes.
func (g *directGate) serve(conn net.Conn) {
	// Raw reads and writes under the count, as sshlayer gives a bare TCP
	// conn (internal/rawio; bench/HISTORY.md, round 53).
	cc := &countConn{Conn: rawio.NewTCPConn(conn)}
	ctx, cancel := context.WithCancelCause(g.ctx)
	defer cancel(nil)
	var a admission
	err := g.srv.ServeConnAdmitted(ctx, cc, func(cert *ssh.Certificate) error {
		return g.admit(ctx, cancel, &a, cert, conn.RemoteAddr().String())
	})
	if a.id == 0 {
		return
	}
	g.mu.Lock()
	delete(g.live, a.id)
	delete(g.waiting, a.id)
	g.mu.Unlock()
	m := wire.DirectMsg{Op: wire.DirectClosed, ID: a.id, ToHost: cc.in.Load(), FromHost: cc.out.Load()}
	switch {
	case a.err != nil:
		m.Reason = "refused: " + a.err.Error()
	case context.Cause(ctx) != nil && !errors.Is(context.Cause(ctx), context.Canceled):
		m.Reason = context.Cause(ctx).Error()
	case err != nil:
		m.Reason = err.Error()
	}
	if g.ctx.Err() == nil {
		if err := g.send(m); err != nil {
			g.log.Debug("direct sessions: could not report a connection's end", "id", a.id, "err", err)
		}
	}
}

// admit asks the gateway to admit a connection that authenticated with
// cert (its client signed), once per connection; end ends the connection.
func (g *directGate) admit(ctx context.Context, end context.CancelCauseFunc, a *admission, cert *ssh.Certificate, remote string) error {
	if !g.on {
		return errNoDirect
	}
	if a.id != 0 { // the client signed again: the gateway answered already
		return a.err
	}
	tok := cert.Permissions.Extensions[wire.CertTokenExtension]
	if tok == "" {
		return fmt.Errorf("it carries no %s extension, which the gateway admits a direct session by: its issuer is a gateway older than direct sessions, or not a gateway; use the relay", wire.CertTokenExtension)
	}
	if err := context.Cause(g.ctx); err != nil {
		return err
	}
	ch := make(chan wire.DirectMsg, 1)
	g.mu.Lock()
	g.nextID++
	a.id = g.nextID
	g.waiting[a.id] = pending{answer: ch, end: end}
	g.mu.Unlock()
	if err := g.send(wire.DirectMsg{Op: wire.DirectOpen, ID: a.id, Serial: cert.Serial, KeyID: cert.KeyId, TokenID: tok, Remote: remote}); err != nil {
		a.err = fmt.Errorf("could not ask the gateway to admit it: %w", err)
		return a.err
	}
	t := time.NewTimer(admitTimeout)
	defer t.Stop()
	select {
	case m := <-ch:
		if m.Op == wire.DirectAdmit { // read made it live
			g.log.Info("direct connection admitted by the gateway", "id", a.id, "keyId", cert.KeyId, "remote", remote)
			return nil
		}
		a.err = fmt.Errorf("the gateway refused it: %s", m.Reason)
		g.log.Info("direct connection refused by the gateway", "id", a.id, "keyId", cert.KeyId, "remote", remote, "reason", m.Reason)
	case <-t.C:
		a.err = fmt.Errorf("the gateway did not answer whether to admit it within %v", admitTimeout)
	case <-ctx.Done():
		a.err = context.Cause(ctx)
	}
	return a.err
}

// countConn counts a direct connection's bytes each way, for DirectClosed.
type countConn struct {
	net.Conn
	in, out atomic.Int64
}

func (c *countConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.in.Add(int64(n))
	return n, err
}

func (c *countConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.out.Add(int64(n))
	return n, err
}
