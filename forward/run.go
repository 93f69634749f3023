package forward

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/accept"
	"github.com/hostgate/hostgate/internal/bicopy"
)

// Host is what Run needs of a host: *hostgate.Host and every
// hostgate.Forwarder have it.
type Host interface {
	// Dial opens a connection from the host to addr.
	Dial(ctx context.Context, network, addr string) (net.Conn, error)
	// Listen makes the host listen on addr.
	Listen(ctx context.Context, network, addr string) (net.Listener, error)
}

var (
	_ Host = (*hostgate.Host)(nil)
	_ Host = hostgate.Forwarder(nil)
)

// forwarderSource is the part of *hostgate.Host Run uses to find the live
// connection's forwarder, so that it can watch the connection end.
type forwarderSource interface {
	Forwarder(ctx context.Context) (hostgate.Forwarder, error)
}

// doner is implemented by connections that report their end (the SSH client
// does, or may). A forward stops when Done is closed.
type doner interface{ Done() <-chan struct{} }

// ErrHostGone is the cause a forward stops with when the host connection
// ends.
var ErrHostGone = fmt.Errorf("forward: %w", hostgate.ErrConnectionEnded)

// Config holds a forward's knobs; nil or zero fields mean defaults.
type Config struct {
	// MaxConns bounds concurrent connections; more are accepted and closed at
	// once, counted in Stats.Rejected. Default 512.
	MaxConns int
	// HandshakeTimeout bounds the SOCKS5 greeting and request. Default 10 s.
	HandshakeTimeout time.Duration
	// DialTimeout bounds each dial of the connect side. Default 30 s. A
	// local forward's dial over a host that takes early data returns
	// before the host connects; a hostgate host bounds that connect by
	// hostgate.ConnectTimeout (10 s), and the connection's keepalive the
	// wait for its answer. A DialTimeout below ConnectTimeout turns early
	// dials off for the forward, so that it bounds every dial; each
	// connection then waits a round trip for the connect before its first
	// bytes go.
	DialTimeout time.Duration
	// Done, when set, is closed when the host connection ends; the forward
	// then stops. Without it, Run watches the host's forwarder for a
	// Done() <-chan struct{} method, and stops on a dial failing with
	// hostgate.ErrClosed.
	Done <-chan struct{}
}

func (c *Config) withDefaults() Config {
	var out Config
	if c != nil {
		out = *c
	}
	if out.MaxConns <= 0 {
		out.MaxConns = 512
	}
	if out.HandshakeTimeout <= 0 {
		out.HandshakeTimeout = 10 * time.Second
	}
	if out.DialTimeout <= 0 {
		out.DialTimeout = 30 * time.Second
	}
	return out
}

// Stats counts a forward's traffic. Byte counts are live: they grow while
// connections are open.
type Stats struct {
	Connections int64 // accepted so far
	Active      int64 // open now
	Failed      int64 // dial (for a local forward, the host's connect) or SOCKS handshake failed
	Rejected    int64 // closed at once because MaxConns were open
	BytesIn     int64 // from the listening side to the connect side
	BytesOut    int64 // from the connect side to the listening side
}

// Forward is a running forward. It owns its listener, every forwarded
// connection and the goroutines copying them.
type Forward struct {
	spec Spec
	cfg  Config
	ln   net.Listener
	dial func(ctx context.Context, c net.Conn) (net.Conn, error)
	// lead reports whether dial is early (hostgate.TakesEarlyData), so
	// that a connection's first bytes are worth waiting for
	// (bicopy.DialLead); nil: never.
	lead func(ctx context.Context) bool

	ctx    context.Context // ended by Close, Run's ctx, or the host going away
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup // serve and every handle
	sem    chan struct{}  // one token per open connection

	conns, active, failed, rejected, bytesIn, bytesOut atomic.Int64

	done chan struct{}
	err  error // written before done closes
}

// Run starts spec over h and returns once it listens. The forward runs until
// ctx ends, Close is called, or the host connection ends. A local forward
// over a host that takes early data waits, as Host.Forward does, up to
// 500 µs for what a new client sends first, to send it with the open.
func Run(ctx context.Context, h Host, spec Spec) (*Forward, error) {
	return RunConfig(ctx, h, spec, nil)
}

// RunConfig is Run with knobs.
func RunConfig(ctx context.Context, h Host, spec Spec, cfg *Config) (*Forward, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	fw := &Forward{spec: spec, cfg: cfg.withDefaults(), done: make(chan struct{})}
	fw.sem = make(chan struct{}, fw.cfg.MaxConns)

	hostDone := fw.cfg.Done
	// why, where the host's connection tells it (the SSH client's Wait,
	// through hostgate's named forwarder), says why it ended: "the
	// gateway is shutting down", "its agent stopped answering".
	var why interface{ Wait() error }
	if hostDone == nil {
		var d any = h
		if fs, ok := h.(forwarderSource); ok {
			// Dials still go through h, so that a closed Host is seen as
			// hostgate.ErrClosed.
			f, err := fs.Forwarder(ctx)
			if err != nil {
				return nil, fmt.Errorf("forward: %w", err)
			}
			d = f
		}
		if d, ok := d.(doner); ok {
			hostDone = d.Done()
		}
		why, _ = d.(interface{ Wait() error })
	}

	var err error
	switch spec.Kind {
	case Local, Dynamic:
		// No TCP keepalive on accepted conns, as in Host.Forward (ssh -L
		// sets none either): four setsockopt calls per connection.
		lc := net.ListenConfig{KeepAlive: -1}
		fw.ln, err = lc.Listen(ctx, "tcp", spec.Listen)
	case Remote:
		fw.ln, err = h.Listen(ctx, "tcp", spec.Listen)
	}
	if err != nil {
		return nil, fmt.Errorf("forward: %s listen %s: %w", spec.Kind, spec.Listen, err)
	}
	switch spec.Kind {
	case Local:
		// The connection's first bytes go behind the open where h can
		// (hostgate.Host.DialEarly): a round trip sooner. Such a dial
		// returns before the host connects, so only the host's own bound
		// (hostgate.ConnectTimeout) applies to the connect: a shorter
		// DialTimeout dials the late way, which it bounds.
		d := h.Dial
		if e, ok := h.(hostgate.EarlyDialer); ok && fw.cfg.DialTimeout >= hostgate.ConnectTimeout {
			d = e.DialEarly
			fw.lead = func(ctx context.Context) bool { return hostgate.TakesEarlyData(ctx, h) }
		}
		fw.dial = func(ctx context.Context, _ net.Conn) (net.Conn, error) { return d(ctx, "tcp", spec.Connect) }
	case Remote:
		fw.dial = func(ctx context.Context, _ net.Conn) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", spec.Connect)
		}
	case Dynamic:
		fw.dial = func(ctx context.Context, c net.Conn) (net.Conn, error) {
			return socksServe(ctx, c, h, fw.cfg.HandshakeTimeout, fw.cfg.DialTimeout)
		}
	}

	fw.ctx, fw.cancel = context.WithCancelCause(context.Background())
	stopCtx := context.AfterFunc(ctx, func() { fw.cancel(context.Cause(ctx)) })
	stopLn := context.AfterFunc(fw.ctx, func() { _ = fw.ln.Close() })
	if hostDone != nil {
		// A channel, not a ctx: the one goroutine that waits on it also ends
		// when the forward does, so it never outlives Close.
		fw.wg.Add(1)
		go func() {
			defer fw.wg.Done()
			select {
			case <-hostDone:
				if why != nil {
					if err := why.Wait(); err != nil {
						fw.cancel(fmt.Errorf("%w: %w", ErrHostGone, err))
						break
					}
				}
				fw.cancel(ErrHostGone)
			case <-fw.ctx.Done():
			}
		}()
	}
	fw.wg.Add(1)
	go func() {
		defer fw.wg.Done()
		fw.serve()
	}()
	go func() {
		fw.wg.Wait()
		stopCtx()
		stopLn()
		_ = fw.ln.Close()
		close(fw.done)
	}()
	return fw, nil
}

// Addr is the address listened on, with the picked port.
func (fw *Forward) Addr() net.Addr { return fw.ln.Addr() }

// Spec returns the spec the forward runs.
func (fw *Forward) Spec() Spec { return fw.spec }

// Stats returns the forward's counters.
func (fw *Forward) Stats() Stats {
	return Stats{
		Connections: fw.conns.Load(), Active: fw.active.Load(),
		Failed: fw.failed.Load(), Rejected: fw.rejected.Load(),
		BytesIn: fw.bytesIn.Load(), BytesOut: fw.bytesOut.Load(),
	}
}

// Done is closed once the forward has stopped and released everything.
func (fw *Forward) Done() <-chan struct{} { return fw.done }

// Err waits for the forward to stop and says why: nil after Close, ctx's
// cause when Run's ctx ended, ErrHostGone (or the listener's error) when the
// host connection ended, with the connection's own end where the host
// tells it.
func (fw *Forward) Err() error {
	<-fw.done
	return fw.err
}

// Close stops listening, closes every forwarded connection and waits for
// their goroutines. It is idempotent.
func (fw *Forward) Close() error {
	fw.cancel(errClosedByUser)
	<-fw.done
	return nil
}

var errClosedByUser = errors.New("forward: closed")

// serve is the accept loop; it owns fw.err.
func (fw *Forward) serve() {
	for {
		c, err := accept.Next(fw.ctx, fw.ln, nil)
		if err != nil {
			if fw.spec.Kind == Remote {
				// The host's listener only fails on its own when the
				// connection carrying it ended or the host dropped the
				// forward.
				fw.cancel(fmt.Errorf("%w: accept: %w", ErrHostGone, err))
			}
			fw.cancel(fmt.Errorf("forward: accept: %w", err))
			fw.err = context.Cause(fw.ctx)
			if errors.Is(fw.err, errClosedByUser) {
				fw.err = nil
			}
			return
		}
		fw.conns.Add(1)
		select {
		case fw.sem <- struct{}{}:
		default:
			fw.rejected.Add(1)
			_ = c.Close()
			continue
		}
		fw.active.Add(1)
		fw.wg.Add(1)
		go fw.handle(c)
	}
}

// handle dials the connect side for c and copies both ways; it owns c.
func (fw *Forward) handle(c net.Conn) {
	defer fw.wg.Done()
	defer func() { <-fw.sem }()
	defer fw.active.Add(-1)

	bound := fw.cfg.DialTimeout
	if fw.spec.Kind == Dynamic {
		bound += fw.cfg.HandshakeTimeout // the SOCKS request comes first
	}
	ctx, cancel := context.WithTimeout(fw.ctx, bound)
	// What a local forward's client sends with its connect goes with an
	// early open; SOCKS has its handshake to do first.
	var wait time.Duration
	early := fw.lead != nil && fw.lead(ctx)
	if early {
		wait = bicopy.LeadWait
	}
	t, n, err := bicopy.DialLead(c, wait, func() (net.Conn, error) { return fw.dial(ctx, c) })
	fw.bytesIn.Add(n)
	cancel()
	if err != nil {
		if !errors.Is(err, bicopy.ErrLeadFailed) { // the client's failure, not the dial's
			fw.failed.Add(1)
		}
		_ = c.Close()
		if errors.Is(err, hostgate.ErrClosed) {
			fw.cancel(ErrHostGone)
		}
		return
	}
	cc := &countConn{Conn: c, in: &fw.bytesIn, out: &fw.bytesOut}
	if early {
		// An early dial (DialEarly) learns of a refused connect from t's
		// first Read or Write, and Copy closes c before it returns that
		// error: count it first, so that a client that sees its
		// connection closed finds it in Stats (counted after Copy, the
		// 3rd of 100 refused connections was not yet, under -race).
		w := &bicopy.ErrWatch{Conn: t, Match: isConnectFailed, Seen: func(error) { fw.failed.Add(1) }}
		if _, err := bicopy.Copy(fw.ctx, cc, w); err != nil {
			w.Check(err) // counted once, if its Read or Write has not
		}
		return
	}
	// The forward's end tears both conns down through Copy's ctx.
	if _, err := bicopy.Copy(fw.ctx, cc, t); isConnectFailed(err) {
		fw.failed.Add(1)
	}
}

func isConnectFailed(err error) bool { return errors.Is(err, hostgate.ErrConnectFailed) }

// countConn counts bytes read from and written to the listening side as they
// pass, so Stats is live for long connections.
type countConn struct {
	net.Conn
	in, out *atomic.Int64
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

// CloseWrite passes half-close through; bicopy closes both ends when the
// underlying conn cannot half-close.
func (c *countConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}
