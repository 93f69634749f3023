package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/proxyproto"
	"github.com/hostgate/hostgate/internal/yamux"
)

// Exported errors of the tunnel registry.
var (
	// ErrHostOffline means no live tunnel serves the host.
	ErrHostOffline = errors.New("gateway: host offline")
	// ErrUnknownHost means no host of that id was ever enrolled; it is an
	// ErrHostOffline too.
	ErrUnknownHost = fmt.Errorf("%w (no host of that id is known)", ErrHostOffline)
	// ErrTooManyStreams means the host's tunnel already carries its
	// maximum number of relayed streams.
	ErrTooManyStreams = errors.New("gateway: too many streams to host")
	// ErrClosed is returned once the gateway is shutting down.
	ErrClosed = errors.New("gateway: closed")
	// ErrShuttingDown is the cause of every request context the gateway
	// ends as it stops.
	ErrShuttingDown = errors.New("the gateway is shutting down")
)

// Tunnels is how the gateway reaches a host's SSH server: each Open is a new
// byte stream to it. The registry below is the embedded implementation; a
// multi-replica relay (find the replica holding the tunnel, relay to it)
// slots in behind this interface.
type Tunnels interface {
	// Open returns a new stream to hostID's SSH server, ErrHostOffline when
	// no tunnel serves it, or ErrTooManyStreams.
	Open(ctx context.Context, hostID string) (net.Conn, error)
	// Connected reports whether a live tunnel serves hostID.
	Connected(hostID string) bool
}

// Tunnel is one live multiplexed connection to an agent: a dialed-out
// agent's WebSocket or a Docker execution's `agent serve --stdio --mux`.
type Tunnel interface {
	// Open opens a new stream on which the agent serves one SSH connection.
	Open(ctx context.Context) (net.Conn, error)
	// Close ends the tunnel and every stream on it.
	Close() error
	// Done is closed when the tunnel has ended, for whatever reason.
	Done() <-chan struct{}
}

// MuxTunnel adapts a yamux session whose peer serves SSH on every stream.
func MuxTunnel(s *yamux.Session) Tunnel { return muxTunnel{s: s} }

// CallerTunnel is MuxTunnel for a peer that reads a caller preamble at
// the start of every stream (it said so: wire.HeaderCallerPreamble, a
// sandbox agent's answer to its keys): each stream names the caller of the
// context it was opened under (WithCaller), or none.
func CallerTunnel(s *yamux.Session) Tunnel { return muxTunnel{s: s, callers: true} }

type muxTunnel struct {
	s       *yamux.Session
	callers bool
}

// OpenCallerStream opens a stream of s that first names caller to the
// agent, which reads a caller preamble on every stream (CallerTunnel):
// for streams opened on the session itself, not through a Tunnel. ctx
// bounds the open as in muxTunnel.Open.
func OpenCallerStream(ctx context.Context, s *yamux.Session, caller proxyproto.Header) (net.Conn, error) {
	st, err := s.OpenStreamContext(ctx)
	if err != nil {
		return nil, err
	}
	return proxyproto.NewStream(st, caller), nil
}

func (t muxTunnel) Open(ctx context.Context) (net.Conn, error) {
	// The open waits for the peer only past 256 opens it has not
	// acknowledged (bytestream's OpenBacklog, the accept backlog an
	// honest agent keeps), but its SYN waits for the tunnel's write
	// under way, which a peer that stopped reading holds until the
	// write watchdog (30 s) ends the tunnel: ctx bounds both waits.
	c, err := t.s.OpenStreamContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("open stream: %w", err)
	}
	if t.callers {
		return proxyproto.NewStream(c, callerOf(ctx)), nil
	}
	return c, nil
}
func (t muxTunnel) Close() error          { return t.s.Close() }
func (t muxTunnel) Done() <-chan struct{} { return t.s.CloseChan() }

// Registry maps host ids to live tunnels. It is safe for concurrent use.
type Registry struct {
	maxStreams int
	onChange   func(connected int)

	mu      sync.Mutex
	tunnels map[string]*entry
	closed  bool
	// ended is when each host's last tunnel ended, while it has none (a
	// host whose tunnel comes back drops out), for the hosts' lastSeen:
	// the store keeps only the last connect. At most maxEnded, dropping
	// any: a gateway that ran up many executions forgets some.
	ended map[string]time.Time
}

// maxEnded bounds Registry.ended.
const maxEnded = 100_000

var _ Tunnels = (*Registry)(nil)

// entry is one registered tunnel and its stream budget.
type entry struct {
	t     Tunnel
	slots chan struct{} // one token per open stream; cap = max streams
}

// NewRegistry returns an empty registry that allows maxStreams open streams
// per tunnel (<= 0 means 256). onChange, when set, is called with the
// number of tunnels after every change (for a gauge), under the registry's
// lock: it must not call back into the registry.
func NewRegistry(maxStreams int, onChange func(connected int)) *Registry {
	if maxStreams <= 0 {
		maxStreams = 256
	}
	if onChange == nil {
		onChange = func(int) {}
	}
	return &Registry{maxStreams: maxStreams, onChange: onChange, tunnels: map[string]*entry{}, ended: map[string]time.Time{}}
}

// Register makes t the tunnel for hostID. A tunnel already registered for
// hostID is closed and replaced (an agent that reconnects wins over its own
// stale connection; enrollment checked the key before this). replaced
// reports whether one was. unregister removes t if it is still the host's
// tunnel; it does not close t. Register fails with ErrClosed after Close,
// and then closes t.
func (r *Registry) Register(hostID string, t Tunnel) (unregister func(), replaced bool, err error) {
	e := &entry{t: t, slots: make(chan struct{}, r.maxStreams)}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		_ = t.Close()
		return nil, false, ErrClosed
	}
	old := r.tunnels[hostID]
	r.tunnels[hostID] = e
	delete(r.ended, hostID)
	r.onChange(len(r.tunnels))
	r.mu.Unlock()
	if old != nil {
		// Said to the replaced agent and to its callers: it was not cut
		// off, a newer connection for its host took over.
		cause := errReplaced
		if p, ok := t.(*pendingTunnel); ok && p.remote != "" {
			cause = fmt.Errorf("%w from %s", errReplaced, p.remote)
		}
		closeWithCause(old.t, cause)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			if r.tunnels[hostID] == e {
				delete(r.tunnels, hostID)
				r.endedLocked(hostID, time.Now())
				r.onChange(len(r.tunnels))
			}
			r.mu.Unlock()
		})
	}, old != nil, nil
}

func (r *Registry) lookup(hostID string) (*entry, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	e := r.tunnels[hostID]
	if e == nil {
		return nil, ErrHostOffline
	}
	select {
	case <-e.t.Done():
		return nil, ErrHostOffline
	default:
	}
	return e, nil
}

// Connected implements Tunnels.
func (r *Registry) Connected(hostID string) bool {
	_, err := r.lookup(hostID)
	return err == nil
}

// Done returns a channel closed when hostID's current tunnel ends, or nil
// when none is registered. Work bound to a host's tunnel (a browser pty,
// a preview) watches it.
func (r *Registry) Done(hostID string) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.tunnels[hostID]; e != nil {
		return e.t.Done()
	}
	return nil
}

// tunnel returns hostID's registered tunnel, nil when none is.
func (r *Registry) tunnel(hostID string) Tunnel {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.tunnels[hostID]; e != nil {
		return e.t
	}
	return nil
}

// Len returns the number of registered tunnels.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.tunnels)
}

// Open implements Tunnels. The returned conn releases its stream slot when
// closed.
func (r *Registry) Open(ctx context.Context, hostID string) (net.Conn, error) {
	e, err := r.lookup(hostID)
	if err != nil {
		return nil, err
	}
	select {
	case e.slots <- struct{}{}:
	default:
		return nil, ErrTooManyStreams
	}
	c, err := e.t.Open(ctx)
	if err != nil {
		<-e.slots
		select {
		case <-e.t.Done():
			return nil, fmt.Errorf("%w: %w", ErrHostOffline, err)
		default:
		}
		if errors.Is(err, yamux.ErrSessionShutdown) {
			return nil, fmt.Errorf("%w: %w", ErrHostOffline, err)
		}
		return nil, fmt.Errorf("gateway: open stream to %s: %w", hostID, err)
	}
	return &slotConn{Conn: c, release: func() { <-e.slots }, done: e.t.Done(), cause: tunnelCause(e.t)}, nil
}

// endedLocked records that hostID's tunnel ended at t; r.mu is held.
func (r *Registry) endedLocked(hostID string, t time.Time) {
	if len(r.ended) >= maxEnded {
		for id := range r.ended {
			delete(r.ended, id)
			break
		}
	}
	r.ended[hostID] = t
}

// LastSeen is when hostID was last seen by this gateway: now while a live
// tunnel serves it, when its tunnel ended if that was since the gateway
// started, else the zero time (the caller has the store's last connect).
func (r *Registry) LastSeen(hostID string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.tunnels[hostID]; e != nil && !r.closed {
		// Live, or ended a moment ago and not yet unregistered.
		return time.Now()
	}
	return r.ended[hostID]
}

// Closed reports whether Close was called: a tunnel that ended since was
// ended by the gateway's shutdown, or may have been.
func (r *Registry) Closed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// Close closes every tunnel and refuses new registrations and streams.
func (r *Registry) Close() {
	r.mu.Lock()
	r.closed = true
	ts := r.tunnels
	r.tunnels = map[string]*entry{}
	now := time.Now()
	for id := range ts {
		r.endedLocked(id, now)
	}
	r.onChange(0)
	r.mu.Unlock()
	for _, e := range ts {
		closeWithCause(e.t, ErrShuttingDown)
	}
}

// closeWithCause closes t, telling its agent and callers cause where t
// can carry one (an agent's tunnel).
func closeWithCause(t Tunnel, cause error) {
	if p, ok := t.(*pendingTunnel); ok {
		p.setCause(cause)
	}
	_ = t.Close()
}

// tunnelCause is why t ended, if the gateway ended it for a reason its
// callers are told (replaced, shutting down, token revoked, its agent
// stopped answering), else nil.
func tunnelCause(t Tunnel) func() error {
	if p, ok := t.(*pendingTunnel); ok {
		return func() error {
			if c := p.endCause(); c != nil {
				return c
			}
			return p.unresponsive()
		}
	}
	return func() error { return nil }
}

// errUnresponsive is a tunnel the gateway's keepalive or write timeout
// ended: its agent stopped answering (frozen, or the path to it stalled).
// Its callers heard that the agent disconnected, which reads as an agent
// that stopped, while the gateway's log said it stopped answering.
var errUnresponsive = errors.New("the agent stopped answering")

// unresponsive is errUnresponsive when the tunnel's session ended by its
// keepalive or write timeout, else nil. The session's end reason is set
// before its streams end, so a relay that sees its stream end finds it.
func (p *pendingTunnel) unresponsive() error {
	p.mu.Lock()
	t := p.t
	p.mu.Unlock()
	mt, ok := t.(muxTunnel)
	if !ok {
		return nil
	}
	if err := mt.s.CloseErr(); errors.Is(err, bytestream.ErrKeepAliveTimeout) || errors.Is(err, bytestream.ErrWriteTimeout) {
		return errUnresponsive
	}
	return nil
}

// slotConn gives back its stream slot on the first Close.
type slotConn struct {
	net.Conn
	once    sync.Once
	release func()
	done    <-chan struct{} // the tunnel's Done
	cause   func() error    // why the gateway ended the tunnel, if it did
}

// TunnelCause is why the gateway ended the stream's tunnel, once
// TunnelDone is closed: errReplaced (a newer connection of the host's
// agent took over), ErrShuttingDown, ErrTokenRevoked, errUnresponsive
// (the gateway's keepalive found the agent silent); nil when the agent or
// its network ended it.
func (c *slotConn) TunnelCause() error { return c.cause() }

// TunnelDone is closed when the tunnel the stream runs over has ended, so
// that the relay can tell the caller its host's agent went, rather than
// that the stream ended. A yamux stream's own session says so before the
// stream reads EOF; an agent's registered tunnel (a pendingTunnel) closes
// its Done only after its handler has seen the session end.
func (c *slotConn) TunnelDone() <-chan struct{} {
	if s, ok := c.Conn.(interface{ SessionDone() <-chan struct{} }); ok {
		return s.SessionDone()
	}
	return c.done
}

// Shrink passes yamux's Shrink through (see shrinkEvery): without it the
// relay could not reach the stream's method through this wrapper.
func (c *slotConn) Shrink() {
	if s, ok := c.Conn.(shrinker); ok {
		s.Shrink()
	}
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// pendingTunnel is registered before an agent's WebSocket upgrade answers,
// so that once the agent sees 101 its host is routable: Open waits (up to
// ctx) for the session to be set. The upgrade handler owns it and closes
// it when the session ends; a replacing registration closes it too.
type pendingTunnel struct {
	ready  chan struct{} // closed by set
	done   chan struct{} // closed by Close
	remote string        // the agent's IP (no port, which each connection changes), named to a tunnel it replaces
	// noAgentFwd: the agent said it forwards no SSH agent (started with
	// --no-agent-forwarding, wire.HeaderAgentForwarding), so the host's
	// certificates do not permit it while this tunnel serves it. Set
	// before registration, so it is registered and replaced with the
	// tunnel.
	noAgentFwd bool
	// signed: the agent's request carried a good key signature, so it
	// holds the host key; an unsigned connection does not replace it. Set
	// before registration; atomic because a test changes it after.
	signed atomic.Bool
	// agent is the agent's build as it said it (agentVersion), for
	// GET /v1/hosts: which hosts run an old agent in a rolling upgrade.
	// Set before registration.
	agent string
	// direct is the addresses of the agent's direct listener, as its
	// request said them (wire.HeaderDirect) to a gateway that admits
	// direct sessions; nil otherwise. Published with the host while this
	// tunnel serves it, so a replaced tunnel's go with it. Set before
	// registration.
	direct []string

	cause atomic.Pointer[error] // set before Close, by whoever ends the tunnel for a reason

	mu      sync.Mutex
	t       Tunnel
	closed  bool
	closeWS func(cause error) // tells the agent why, before the session closes; set by the handler
}

func newPendingTunnel() *pendingTunnel {
	return &pendingTunnel{ready: make(chan struct{}), done: make(chan struct{})}
}

// set supplies the live tunnel; if the pending one was closed meanwhile,
// t is closed and set returns false.
func (p *pendingTunnel) set(t Tunnel) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = t.Close()
		return false
	}
	p.t = t
	close(p.ready)
	return true
}

func (p *pendingTunnel) Open(ctx context.Context) (net.Conn, error) {
	select {
	case <-p.ready:
		return p.t.Open(ctx)
	case <-p.done:
		return nil, ErrHostOffline
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *pendingTunnel) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	if cause := p.endCause(); cause != nil && p.closeWS != nil {
		// The WebSocket first, with the reason: the session's own
		// close would end it plainly, and the agent could only log
		// that the gateway closed its tunnel. Before done, too: the
		// tunnel's owner closes the session once done is, and its
		// plain close frame went out before this one in 13 runs of 200
		// (TestReplacedTunnelSaysSo, -race).
		p.closeWS(cause)
	}
	close(p.done)
	if p.t != nil {
		return p.t.Close()
	}
	return nil
}

// setCause records why the tunnel is about to be closed; the first cause
// set stays.
func (p *pendingTunnel) setCause(err error) { p.cause.CompareAndSwap(nil, &err) }

// endCause is the cause setCause recorded, or nil.
func (p *pendingTunnel) endCause() error {
	if c := p.cause.Load(); c != nil {
		return *c
	}
	return nil
}

// onClose sets the function Close calls with the cause, if any, before it
// closes the session. A tunnel closed for a cause before the handler got
// here (registered before the upgrade answered, and replaced or the
// gateway stopping meanwhile) is told now: it was closed plainly by set,
// and a replaced agent, not hearing it was replaced, took its host back
// at once (TestConnectReplacedStandsBy in internal/agent, 4 of 320 runs
// under load).
func (p *pendingTunnel) onClose(f func(cause error)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeWS = f
	if cause := p.endCause(); p.closed && cause != nil {
		f(cause)
	}
}

// Done is closed by Close, which the owner calls when the session ends.
func (p *pendingTunnel) Done() <-chan struct{} { return p.done }
