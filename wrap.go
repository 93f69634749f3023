package hostgate

import (
	"context"
	"net"
	"sync"
)

// WrapFunc rewrites a process's argv and environment, given its working
// directory: to run it under an OS sandbox, nice, sudo -u, bwrap.
type WrapFunc func(argv []string, dir string, env map[string]string) ([]string, map[string]string)

// Wrap returns a Host that runs every process of base through wrap. Its
// filesystem, info, name (Connection.Name), forwarding and synchronous
// filesystem are base's.
//
// The wrapper borrows base's connection; base stays its owner's to close,
// so several wrappers (and base itself) can share one connection. Closing
// the wrapper ends what was opened through it, as closing a host ends what
// runs over its connection: its processes still running are killed
// (SIGKILL), its forwards stop (Err is ErrClosed), and the
// connections from its Dial and the listeners from its Listen are closed.
// Closing base ends its connection and so what runs over it, the
// wrapper's too; the wrapper's later uses fail with that connection's
// error, and the wrapper is still its owner's to close. Where base was
// made with Reconnect, the wrapper is too: its first use after the
// connection was lost borrows the one base makes again.
func Wrap(base *Host, wrap WrapFunc) *Host {
	w := NewNamed(base.Name(), base.Info(), func(ctx context.Context) (*Connection, error) {
		c, err := base.Connection(ctx)
		if err != nil {
			return nil, err
		}
		fs := c.FS
		if fs == nil {
			fs = ExecProvider(c.Transport)
		}
		l := &lease{done: make(chan struct{}), held: map[any]func(){}}
		var fwd Forwarder
		if c.Forward != nil {
			fwd = newLeasedForwarder(c.Forward, l)
		}
		// A lazy base may have learnt its info only now, by connecting.
		info := base.Info()
		return &Connection{
			Name:      c.Name,
			Info:      &info,
			Transport: wrappedTransport{base: c.Transport, wrap: wrap, lease: l},
			FS:        fs,
			Forward:   fwd,
			Sync:      c.Sync,
			// The connection is base's: its end is the wrapper's, so
			// that the wrapper's errors then match ErrConnectionEnded
			// as base's do.
			Done: c.Done,
			Close: func() error {
				l.end()
				return nil
			},
		}, nil
	})
	// A base that connects again after a loss has a new connection to
	// lend: without this the wrapper kept the lost one for good.
	w.reconnect = base.reconnect
	return w
}

// lease tracks what a wrapper opened on its base's connection, so that
// closing the wrapper ends it.
type lease struct {
	done chan struct{} // closed by end

	mu    sync.Mutex
	ended bool
	held  map[any]func() // what is open, and how to end it (guarded by mu)
}

// add records k, ended by end when the lease ends; false (and nothing
// recorded) when it has ended already.
func (l *lease) add(k any, end func()) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return false
	}
	l.held[k] = end
	return true
}

// remove forgets k, which ended by itself.
func (l *lease) remove(k any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.held, k)
}

// end ends everything held, once.
func (l *lease) end() {
	l.mu.Lock()
	if l.ended {
		l.mu.Unlock()
		return
	}
	l.ended = true
	held := l.held
	l.held = nil
	close(l.done)
	l.mu.Unlock()
	for _, end := range held {
		end()
	}
}

type wrappedTransport struct {
	base  Transport
	wrap  WrapFunc
	lease *lease
}

func (w wrappedTransport) Spawn(ctx context.Context, argv []string, opts SpawnOptions) (Process, error) {
	env := make(map[string]string, len(opts.Env))
	for k, v := range opts.Env {
		env[k] = v
	}
	argv, env = w.wrap(append([]string(nil), argv...), opts.Dir, env)
	opts.Env = env
	p, err := w.base.Spawn(ctx, argv, opts)
	if err != nil {
		return nil, err
	}
	lp := &leasedProcess{Process: p, lease: w.lease}
	if !w.lease.add(lp, func() { _ = p.Kill(SIGKILL) }) {
		_ = p.Kill(SIGKILL)
		_ = p.Wait()
		return nil, ErrClosed
	}
	if _, ok := p.(Resizer); ok {
		return resizableLeasedProcess{lp}, nil
	}
	return lp, nil
}

// OwnsSupervision passes the base's answer through: wrapping does not change
// who supervises the process.
func (w wrappedTransport) OwnsSupervision() bool { return ownsSupervision(w.base) }

// leasedProcess is a process started through a wrapper; the wrapper's
// lease forgets it once Wait has seen it exit.
type leasedProcess struct {
	Process
	lease *lease
}

func (p *leasedProcess) Wait() error {
	err := p.Process.Wait()
	p.lease.remove(p)
	return err
}

// Exited is the base process's (exitedOf).
func (p *leasedProcess) Exited() <-chan struct{} { return exitedOf(p.Process) }

type resizableLeasedProcess struct{ *leasedProcess }

func (p resizableLeasedProcess) Resize(cols, rows int) error {
	return p.Process.(Resizer).Resize(cols, rows)
}

// leasedForwarder hands out base's connections and listeners, ended with
// the lease; Done tells a Forwarding to stop when the lease ends (or
// base's connection does).
type leasedForwarder struct {
	base  Forwarder
	lease *lease
	done  chan struct{}
}

var _ EarlyDialer = (*leasedForwarder)(nil)

func newLeasedForwarder(base Forwarder, l *lease) *leasedForwarder {
	f := &leasedForwarder{base: base, lease: l, done: l.done}
	if d, ok := base.(interface{ Done() <-chan struct{} }); ok {
		// One channel for both ends; the goroutine lives until one of
		// them, and the lease ends at the latest with the wrapper.
		f.done = make(chan struct{})
		go func() {
			select {
			case <-d.Done():
			case <-l.done:
			}
			close(f.done)
		}()
	}
	return f
}

// Done is closed when the wrapper is closed or base's connection ends.
func (f *leasedForwarder) Done() <-chan struct{} { return f.done }

func (f *leasedForwarder) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	return f.conn(f.base.Dial(ctx, network, addr))
}

func (f *leasedForwarder) DialEarly(ctx context.Context, network, addr string) (net.Conn, error) {
	return f.conn(earlyDial(f.base)(ctx, network, addr))
}

// TakesEarlyData is base's answer.
func (f *leasedForwarder) TakesEarlyData(ctx context.Context) bool {
	return TakesEarlyData(ctx, f.base)
}

func (f *leasedForwarder) conn(c net.Conn, err error) (net.Conn, error) {
	if err != nil {
		return nil, err
	}
	lc := &leasedConn{Conn: c, lease: f.lease}
	if !f.lease.add(lc, func() { _ = c.Close() }) {
		_ = c.Close()
		return nil, ErrClosed
	}
	if _, ok := c.(interface{ CloseWrite() error }); ok {
		return halfClosableLeasedConn{lc}, nil
	}
	return lc, nil
}

func (f *leasedForwarder) Listen(ctx context.Context, network, addr string) (net.Listener, error) {
	ln, err := f.base.Listen(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	ll := &leasedListener{Listener: ln, lease: f.lease}
	if !f.lease.add(ll, func() { _ = ln.Close() }) {
		_ = ln.Close()
		return nil, ErrClosed
	}
	return ll, nil
}

type leasedConn struct {
	net.Conn
	lease *lease
}

func (c *leasedConn) Close() error {
	c.lease.remove(c)
	return c.Conn.Close()
}

type halfClosableLeasedConn struct{ *leasedConn }

func (c halfClosableLeasedConn) CloseWrite() error {
	return c.Conn.(interface{ CloseWrite() error }).CloseWrite()
}

type leasedListener struct {
	net.Listener
	lease *lease
}

func (l *leasedListener) Close() error {
	l.lease.remove(l)
	return l.Listener.Close()
}
