package hostgate

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hostgate/hostgate/internal/accept"
	"github.com/hostgate/hostgate/internal/bicopy"
)

// Forwarding is a running port forward. It stops when Close is called, when
// the ctx given to Host.Forward ends, when its Host is closed (Err then
// reports ErrClosed), or when the host connection it was made on ends
// (told by the forwarder's Done channel, like the SSH client's, or by
// Connection.Done; Err then reports ErrConnectionEnded). A Host made with
// Reconnect connects again on its next use, but a forward of the lost
// connection stays stopped: make it again.
type Forwarding struct {
	spec ForwardSpec
	ln   net.Listener
	dial func(ctx context.Context) (net.Conn, error)
	lead bool   // bicopy.DialLead waits for a client's first bytes
	host string // Connection.Name, for Err

	ctx    context.Context
	cancel context.CancelCauseFunc // ErrClosed when the Host is closed, ErrConnectionEnded when its connection ends
	wg     sync.WaitGroup          // accept loop and every copy

	conns    atomic.Int64
	active   atomic.Int64
	failed   atomic.Int64
	lastFail atomic.Pointer[error] // the newest connect failure, named
	bytesIn  atomic.Int64          // listener side → connect side
	bytesOut atomic.Int64
	done     chan struct{}
	err      error // set before done closes
}

// ForwardStats counts a forward's traffic.
type ForwardStats struct {
	Connections int64 // accepted so far
	Active      int64 // open now
	// Failed counts the accepted connections the far side could not
	// connect on (nothing listens on the connect address, the host
	// refused; for a remote forward, this side's dial failed): each was
	// closed at once. LastFailure says why.
	Failed   int64
	BytesIn  int64 // from the listening side to the connecting side
	BytesOut int64
}

// Forward starts spec on the host. Where the host takes early data
// (TakesEarlyData), a local forward waits up to 500 µs for what a new
// client sends first and sends it with the channel open: one message
// across every hop instead of two; a client whose server speaks first pays
// that wait once per connection.
func (h *Host) Forward(ctx context.Context, spec ForwardSpec) (*Forwarding, error) {
	fw, err := h.forward(ctx, spec)
	return fw, h.named(err)
}

func (h *Host) forward(ctx context.Context, spec ForwardSpec) (*Forwarding, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	f, name, err := h.forwarder(ctx)
	if err != nil {
		return nil, err
	}
	var (
		ln   net.Listener
		dial func(ctx context.Context) (net.Conn, error)
		lead bool // wait for a client's first bytes: the dial is early
	)
	switch spec.Kind {
	case ForwardLocal:
		// No TCP keepalive on accepted conns (ssh -L sets none either):
		// it is four setsockopt calls per forwarded connection, and the
		// far side of the forward has its own liveness checks.
		lc := net.ListenConfig{KeepAlive: -1}
		ln, err = lc.Listen(ctx, "tcp", spec.Listen)
		// A forwarder that can send a connection's first bytes before
		// the host has connected (the SSH client to a hostgate server)
		// saves a round trip per connection; the accepted conn is
		// closed either way when the connect fails.
		d := earlyDial(f)
		dial = func(ctx context.Context) (net.Conn, error) { return d(ctx, "tcp", spec.Connect) }
		lead = TakesEarlyData(ctx, f)
	case ForwardRemote:
		ln, err = f.Listen(ctx, "tcp", spec.Listen)
		dial = func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", spec.Connect)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("hostgate: forward %s %s: %w", spec.Kind, spec.Listen, err)
	}
	fw := &Forwarding{spec: spec, ln: ln, dial: dial, lead: lead, host: name.name, done: make(chan struct{})}
	fw.ctx, fw.cancel = context.WithCancelCause(context.Background())
	stop := context.AfterFunc(ctx, func() { fw.cancel(nil) })
	// Whatever the forwarder tells of its end: over one without Done, a
	// forward listened on after its Host was closed, taking connections
	// only to fail them.
	stopHost := context.AfterFunc(h.ctx, func() { fw.cancel(ErrClosed) })
	// A forwarder that knows when its connection ends (the SSH client
	// does) stops the forward then, so nothing listens for a dead host;
	// so does the end of the connection the forwarder came with
	// (Connection.Done), for a forwarder that tells nothing itself. The
	// forward dials, or listens, through that connection alone: a Host
	// made with Reconnect connects again on its next use, but this
	// forward would only take connections to fail them.
	var fdone <-chan struct{}
	if d, ok := f.(interface{ Done() <-chan struct{} }); ok {
		fdone = d.Done()
	}
	if fdone != nil || name.done != nil {
		fw.wg.Add(1)
		go func() {
			defer fw.wg.Done()
			select {
			case <-fdone:
			case <-name.done:
			case <-fw.ctx.Done():
				return
			}
			if h.ctx.Err() != nil {
				// The caller's own Close (Host.Close cancels before it
				// closes the connection): ErrClosed, as every other
				// call of a closed Host says.
				fw.cancel(ErrClosed)
			} else {
				fw.cancel(endedBy(f))
			}
		}()
	}
	fw.wg.Add(1)
	go func() {
		defer stop()
		defer stopHost()
		fw.serve()
	}()
	return fw, nil
}

// endedBy is why a forward through f stopped as f's connection ended:
// ErrConnectionEnded, with the connection's own end where f tells it (the
// SSH client's Wait: "the gateway is shutting down", "its agent stopped
// answering"), which a forward's Err said nothing of while its
// neighbours' errors did.
func endedBy(f Forwarder) error {
	if err := waitOf(f); err != nil {
		return fmt.Errorf("%w: %w", ErrConnectionEnded, err)
	}
	return ErrConnectionEnded
}

// Addr is the address actually listened on, with the picked port: for a
// remote forward, where the host listens, as its forwarder's listener says.
// The SSH client's says it as far as the server tells, which SSH's reply
// (the port alone) does not: the agent's rule, sshd's default GatewayPorts
// no (the host's loopback for ":0", not 0.0.0.0), and 0.0.0.0 once sshd
// has said that GatewayPorts yes bound every address. An sshd set to
// clientspecified, or a first ":0" under yes, is not told apart from no:
// sshlayer's Client.Listen lists where Addr is then not the truth.
func (fw *Forwarding) Addr() net.Addr { return fw.ln.Addr() }

// Spec returns the spec the forward runs.
func (fw *Forwarding) Spec() ForwardSpec { return fw.spec }

// Stats returns the forward's counters.
func (fw *Forwarding) Stats() ForwardStats {
	return ForwardStats{
		Connections: fw.conns.Load(), Active: fw.active.Load(), Failed: fw.failed.Load(),
		BytesIn: fw.bytesIn.Load(), BytesOut: fw.bytesOut.Load(),
	}
}

// LastFailure is why the newest of the Failed connections failed, naming
// the host and the connect address, or nil: errors.Is ErrConnectFailed
// for a local forward; for a remote one, this side's dial error.
// A forwarded connection that fails is closed without a word to its
// client (as `ssh -L` closes it, printing "open failed" to its stderr):
// this is how a program learns that, say, its dev server is not up yet.
func (fw *Forwarding) LastFailure() error {
	if p := fw.lastFail.Load(); p != nil {
		return *p
	}
	return nil
}

// connectFailed counts a connection the far side could not connect on,
// when err says so (ErrConnectFailed: a refused Dial, or an early dial's
// refusal seen by its first Read or Write).
func (fw *Forwarding) connectFailed(err error) {
	if !isConnectFailed(err) {
		return
	}
	fw.countFailure(err)
}

func isConnectFailed(err error) bool { return errors.Is(err, ErrConnectFailed) }

func (fw *Forwarding) countFailure(err error) {
	fw.failed.Add(1)
	named := nameErr(fw.host, fmt.Errorf("forward to %s: %w", fw.spec.Connect, err))
	fw.lastFail.Store(&named)
}

// Done is closed when the forward has stopped and released everything.
func (fw *Forwarding) Done() <-chan struct{} { return fw.done }

// Err says why the forward stopped, naming the host (see
// Connection.Name): nil after Close.
func (fw *Forwarding) Err() error {
	<-fw.done
	return fw.err
}

// Close stops listening, closes every forwarded connection and waits for
// them.
func (fw *Forwarding) Close() error {
	fw.cancel(nil)
	<-fw.done
	return nil
}

func (fw *Forwarding) serve() {
	// Closing the listener is what ends Accept on cancel. AfterFunc rather
	// than a parked goroutine; serve waits for it below, so nothing
	// outlives the forward.
	lnClosed := make(chan struct{})
	stopLn := context.AfterFunc(fw.ctx, func() { _ = fw.ln.Close(); close(lnClosed) })
	var err error
	for {
		var c net.Conn
		c, err = accept.Next(fw.ctx, fw.ln, nil)
		if err != nil {
			break
		}
		fw.conns.Add(1)
		fw.active.Add(1)
		fw.wg.Add(1)
		go fw.handle(c)
	}
	if stopLn() {
		_ = fw.ln.Close() // Accept failed on its own; the AfterFunc never ran
	} else {
		<-lnClosed
	}
	fw.cancel(nil)
	fw.wg.Done()
	fw.wg.Wait()
	if fw.ctx.Err() != nil && errors.Is(err, net.ErrClosed) {
		err = nil
	}
	if cause := context.Cause(fw.ctx); errors.Is(cause, ErrConnectionEnded) || errors.Is(cause, ErrClosed) {
		err = cause
	}
	fw.err = nameErr(fw.host, err)
	close(fw.done)
}

func (fw *Forwarding) handle(c net.Conn) {
	defer fw.wg.Done()
	defer fw.active.Add(-1)
	// What a local forward's client sends with its connect goes with an
	// early open.
	var wait time.Duration
	if fw.lead {
		wait = bicopy.LeadWait
	}
	t, n, err := bicopy.DialLead(c, wait, func() (net.Conn, error) { return fw.dial(fw.ctx) })
	fw.bytesIn.Add(n)
	if err != nil {
		if fw.spec.Kind == ForwardRemote && fw.ctx.Err() == nil {
			// This side's own dial (ssh -R prints "connect_to … failed"):
			// a program learns the same way that its server is not up.
			fw.countFailure(err)
		} else {
			fw.connectFailed(err)
		}
		_ = c.Close()
		return
	}
	if fw.lead {
		// An early dial's refusal comes from t's first Read or Write,
		// and Copy closes c before it returns that error: record it
		// first, so that a client that sees its connection closed finds
		// LastFailure saying why (the first failed GET through gateway
		// dev found it nil, as 4 of 5 runs of 100 connections did).
		w := &bicopy.ErrWatch{Conn: t, Match: isConnectFailed, Seen: fw.countFailure}
		st, err := bicopy.Copy(fw.ctx, c, w)
		if err != nil {
			w.Check(err) // counted once, if its Read or Write has not
		}
		fw.bytesIn.Add(st.AToB)
		fw.bytesOut.Add(st.BToA)
		return
	}
	st, err := bicopy.Copy(fw.ctx, c, t)
	fw.connectFailed(err)
	fw.bytesIn.Add(st.AToB)
	fw.bytesOut.Add(st.BToA)
}
