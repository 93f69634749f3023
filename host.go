package hostgate

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
)

// ConnectFunc creates or wakes a machine and connects to it.
type ConnectFunc func(ctx context.Context) (*Connection, error)

// Host is one machine or sandbox. It is lazy: the connect function runs on
// first use. A Host is safe for concurrent use.
type Host struct {
	connect ConnectFunc

	// ctx is cancelled by Close; it bounds the connect call so that Close
	// never waits on a caller's context.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	info    Info        // New's, then the connection's (Connection.Info)
	name    string      // NewNamed's, then Connection.Name once connected
	conn    *Connection // nil until connected
	pending *connectCall
	closed  bool
	wg      sync.WaitGroup // the in-flight connect goroutine

	reconnect bool // Reconnect's
}

// Option changes how New and NewNamed make a Host.
type Option func(*Host)

// Reconnect makes the Host connect again on its first use after its
// connection was lost (Connection.Done closed: the host's agent
// restarted, the gateway restarted, keepalives failed), as a failed first
// connect is tried again on the next use. Only new uses reconnect, each
// at most once: a use that fails on the lost connection is not tried
// again, since the host may have run it (a command, a write: its error
// matches ErrConnectionEnded, for a caller that decides to); the
// processes, files, forwards and listeners the lost connection handed out
// stay failed, and the connection is closed when the next use replaces
// it. A connect that fails (the host still offline) fails that use, and
// the next one tries again. Without Reconnect a lost connection fails
// every later use (ErrConnectionEnded) until a new Host is made.
func Reconnect() Option { return func(h *Host) { h.reconnect = true } }

// connectCall is one shared connect attempt; done is closed when conn or err
// is set.
type connectCall struct {
	done chan struct{}
	conn *Connection
	err  error
}

// New returns a lazy Host. connect runs once, on first use; concurrent first
// uses share that one call and its result. A failed connect is not cached:
// the next use tries again. A connection that was made and then lost (the
// agent restarted, a token revoked) is not made again, and every later use
// fails, unless the Host was made with Reconnect.
func New(info Info, connect ConnectFunc, opts ...Option) *Host {
	ctx, cancel := context.WithCancel(context.Background())
	if connect == nil {
		// Called on first use, in a goroutine of its own, a nil connect
		// crashed the program there.
		connect = func(context.Context) (*Connection, error) {
			return nil, errors.New("hostgate.New was given a nil connect function: pass one that returns the host's *Connection")
		}
	}
	h := &Host{info: info, connect: connect, ctx: ctx, cancel: cancel}
	for _, o := range opts {
		o(h)
	}
	return h
}

// NewNamed is New for a host whose name is known before it connects (the
// Go client's host id): the errors of a failing first connect, and of the
// uses that waited on it, name the host as those of a connected Host do.
// A connection's own Name, when it has one, names the host from then on.
func NewNamed(name string, info Info, connect ConnectFunc, opts ...Option) *Host {
	h := New(info, connect, opts...)
	h.name = name
	return h
}

// Name is the name the host's errors carry: the connection's Name once
// connected, else NewNamed's; empty when neither gave one.
func (h *Host) Name() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.name
}

// Info returns what the host is: what New was given until a connect
// brings more (Connection.Info), that from then on, also after Close. A
// lazy host whose info is only learnt by connecting (client.LazyHost)
// answers the zero Info until its first use has connected: Info never
// connects.
func (h *Host) Info() Info {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.info
}

// Connection returns the host's connection, connecting on first use. It
// fails with ErrClosed after Close, and with ctx's error when ctx ends first
// (the shared connect goes on for other callers). The connection's own
// parts (Transport, FS, Forward) make their errors as they do, without the
// host's Name that the Host's methods add.
func (h *Host) Connection(ctx context.Context) (*Connection, error) {
	c, err := h.connection(ctx)
	return c, h.named(err)
}

// named is err naming the host, once it is known (NewNamed,
// Connection.Name), and matching ErrConnectionEnded once the connection
// ended by itself (a connect's error, with none, does not).
func (h *Host) named(err error) error {
	if err == nil {
		return nil
	}
	h.mu.Lock()
	n := namer{name: h.name}
	if h.conn != nil {
		n.done = h.conn.Done
	}
	h.mu.Unlock()
	return n.err(err)
}

// namer names the errors of c's host and of what c handed out.
func (c *Connection) namer() namer { return namer{name: c.Name, done: c.Done} }

func (h *Host) connection(ctx context.Context) (*Connection, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrClosed
	}
	var lost *Connection
	if h.conn != nil && h.reconnect && h.conn.lost() {
		lost, h.conn = h.conn, nil
	}
	if h.conn != nil {
		c := h.conn
		h.mu.Unlock()
		return c, nil
	}
	call := h.pending
	if call == nil {
		call = &connectCall{done: make(chan struct{})}
		h.pending = call
		h.wg.Add(1)
		go h.runConnect(call)
	}
	name := h.name
	h.mu.Unlock()
	if lost != nil {
		// Ended already: its Close only releases what is left of it.
		_ = lost.Close()
	}

	select {
	case <-call.done:
		if call.err != nil {
			return nil, call.err
		}
		return call.conn, nil
	case <-ctx.Done():
		// The connect goes on for the next caller; this one's error
		// says what it was waiting for, not only that its time ran out.
		return nil, connectErr(name, "connect", ctxErr(ctx))
	case <-h.ctx.Done():
		return nil, ErrClosed
	}
}

func (h *Host) runConnect(call *connectCall) {
	defer h.wg.Done()
	conn, err := h.connect(h.ctx)
	if err == nil {
		err = conn.validate()
		if err != nil && conn != nil && conn.Close != nil {
			_ = conn.Close()
		}
	}
	h.mu.Lock()
	h.pending = nil
	switch {
	case h.closed:
		if err == nil {
			_ = conn.Close()
		}
		err = ErrClosed
	case err != nil:
		if verr, ok := err.(invalidConnection); ok && h.name != "" {
			// Its message is hostgate's, and names no host.
			err = fmt.Errorf("host %s: %w", h.name, verr)
		}
		err = connectErr(h.name, "", err)
	default:
		if conn.FS == nil {
			// One default provider per connection, so what it learns
			// (the stat dialect) is learnt once.
			conn.FS = ExecProvider(conn.Transport)
		}
		if conn.Name == "" {
			// NewNamed's name, so that the errors of what the
			// connection hands out name the host as the connect's did.
			conn.Name = h.name
		}
		conn.fs = nameProvider(conn.FS, conn.namer())
		conn.fwd = nameForwarder(conn.Forward, conn.namer())
		h.conn = conn
		h.name = conn.Name
		if conn.Info != nil {
			h.info = *conn.Info
		}
	}
	call.conn, call.err = conn, err
	close(call.done)
	h.mu.Unlock()
}

// connectErr is err, of a connect or of waiting on one, as the caller
// gets it. A named host's errors begin with its name ("host box: …"),
// which says whose they are, and a failed connect's own error says what
// failed (offline, a refused token, a host key mismatch): so it is told
// plainly, as "host box: offline: …", and a wait that ran out as
// "host box: connect: context deadline exceeded" (what, when "what" is
// not empty). An unnamed host's say "hostgate: connect: …", which is all
// that tells the caller where they come from.
func connectErr(name, what string, err error) error {
	if name == "" {
		return fmt.Errorf("hostgate: connect: %w", err)
	}
	if what == "" {
		return err
	}
	return fmt.Errorf("%s: %w", what, err)
}

// invalidConnection is validate's error: a connect function that broke
// New's contract, which the message says how to keep.
type invalidConnection struct{ msg string }

func (e invalidConnection) Error() string { return e.msg }

func (c *Connection) validate() error {
	if c == nil {
		return invalidConnection{"the connect function given to hostgate.New returned neither a *Connection nor an error: return one of them"}
	}
	if c.Transport == nil {
		return invalidConnection{"the connect function given to hostgate.New returned a Connection without a Transport, which is required: set Connection.Transport"}
	}
	if c.Close == nil {
		return invalidConnection{"the connect function given to hostgate.New returned a Connection without Close, which is required: set Connection.Close to end the connection"}
	}
	return nil
}

// Close closes the connection, if any. Every later use, and every use still
// waiting on connect, fails with ErrClosed. Close is idempotent.
//
// Close does not wait for the host to end the processes still running
// there: a hostgate agent ends them once it sees the connection go, as
// sshd's sessions end (stdin closed, then after about a second SIGHUP,
// and SIGKILL a second after that; a sleep spawned just before Close was
// gone 1.1-1.4 s after it returned). Kill and Wait a process first where that
// matters, as before reusing its port.
func (h *Host) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	conn := h.conn
	h.conn = nil
	h.mu.Unlock()

	h.cancel()
	h.wg.Wait()
	if conn != nil {
		return conn.Close()
	}
	return nil
}

// AfterClose arranges for f to run in its own goroutine once h is
// closed (at once if it is already), for what lives as long as the host
// does, such as a synchronous filesystem of its (syncfs.FromHost). stop
// cancels that, reporting whether it did.
func (h *Host) AfterClose(f func()) (stop func() bool) {
	return context.AfterFunc(h.ctx, f)
}

// Spawn starts argv on the host. When Info.Persistent is set and the
// transport does not own supervision, the process runs under a watchdog so
// that killing it, cancelling ctx or losing the connection ends its whole
// process tree.
func (h *Host) Spawn(ctx context.Context, argv []string, opts SpawnOptions) (Process, error) {
	p, n, err := h.spawn(ctx, argv, opts)
	if err != nil {
		return nil, h.named(err)
	}
	return nameProcess(p, n), nil
}

// spawn is Spawn without the host's name in its errors, and the namer of
// the connection it ran on.
func (h *Host) spawn(ctx context.Context, argv []string, opts SpawnOptions) (Process, namer, error) {
	if len(argv) == 0 {
		return nil, namer{}, errors.New("hostgate: spawn: empty argv")
	}
	c, err := h.connection(ctx)
	if err != nil {
		return nil, namer{}, err
	}
	var p Process
	if h.Info().Persistent && !ownsSupervision(c.Transport) {
		p, err = spawnWatched(ctx, c.Transport, argv, opts)
	} else {
		p, err = c.Transport.Spawn(ctx, argv, opts)
	}
	return p, c.namer(), err
}

func ownsSupervision(t Transport) bool {
	s, ok := t.(Supervisor)
	return ok && s.OwnsSupervision()
}

// FS returns the host's filesystem provider, which names the host in its
// errors (see Connection.Name).
func (h *Host) FS(ctx context.Context) (Provider, error) {
	c, err := h.connection(ctx)
	if err != nil {
		return nil, h.named(err)
	}
	return c.fs, nil
}

// Sync returns the connect spec of the synchronous filesystem, or
// ErrNotSupported when the connection has none.
func (h *Host) Sync(ctx context.Context) (*SyncSpec, error) {
	c, err := h.connection(ctx)
	if err != nil {
		return nil, h.named(err)
	}
	if c.Sync == nil {
		return nil, h.named(fmt.Errorf("%w: this host offers no synchronous filesystem (its Connection has no Sync spec)", ErrNotSupported))
	}
	return c.Sync, nil
}

// Forwarder returns the connection's forwarder, naming the host in its
// errors (see Connection.Name), or ErrNotSupported.
func (h *Host) Forwarder(ctx context.Context) (Forwarder, error) {
	c, err := h.connection(ctx)
	if err != nil {
		return nil, h.named(err)
	}
	if c.fwd == nil {
		return nil, h.named(errNoForward)
	}
	return c.fwd, nil
}

var errNoForward = fmt.Errorf("%w: this host offers no port forwarding (its Connection has no Forward)", ErrNotSupported)

// forwarder is Forwarder without the host's name in its errors, and the
// connection's namer.
func (h *Host) forwarder(ctx context.Context) (Forwarder, namer, error) {
	c, err := h.connection(ctx)
	if err != nil {
		return nil, namer{}, err
	}
	if c.Forward == nil {
		return nil, namer{}, errNoForward
	}
	return c.Forward, c.namer(), nil
}

// Dial opens a connection from the host to addr.
func (h *Host) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	f, n, err := h.forwarder(ctx)
	if err != nil {
		return nil, h.named(err)
	}
	c, err := f.Dial(ctx, network, addr)
	if err != nil {
		return nil, n.err(err)
	}
	return nameConn(c, n), nil
}

var _ EarlyDialer = (*Host)(nil)

// DialEarly is Dial for a connection whose first bytes need not wait for
// the host's connect: with a forwarder that is an EarlyDialer (the SSH
// client to a hostgate server) it returns before the host has connected and
// sends the first writes behind the open, a round trip sooner; see
// EarlyDialer for what a refused connect or a lost connection then looks
// like. Otherwise it is Dial.
func (h *Host) DialEarly(ctx context.Context, network, addr string) (net.Conn, error) {
	f, n, err := h.forwarder(ctx)
	if err != nil {
		return nil, h.named(err)
	}
	c, err := earlyDial(f)(ctx, network, addr)
	if err != nil {
		return nil, n.err(err)
	}
	return nameConn(c, n), nil
}

// earlyDial is f's DialEarly where f is an EarlyDialer, else its Dial.
func earlyDial(f Forwarder) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if e, ok := f.(EarlyDialer); ok {
		return e.DialEarly
	}
	return f.Dial
}

// TakesEarlyData reports whether DialEarly sends a connection's first
// bytes before the host has connected, rather than being Dial: its
// forwarder does (see the function TakesEarlyData).
func (h *Host) TakesEarlyData(ctx context.Context) bool {
	f, _, err := h.forwarder(ctx)
	return err == nil && TakesEarlyData(ctx, f)
}

// TakesEarlyData reports whether f's DialEarly sends a connection's first
// bytes before the host has connected: f is an EarlyDialer and, if it can
// tell, says so (a Host asks its forwarder; the SSH client knows whether
// the server announced early data). A local forward waits for a client's
// first bytes only then.
func TakesEarlyData(ctx context.Context, f Forwarder) bool {
	if _, ok := f.(EarlyDialer); !ok {
		return false
	}
	switch t := f.(type) {
	case interface{ TakesEarlyData(context.Context) bool }:
		return t.TakesEarlyData(ctx)
	case interface{ TakesEarlyData() bool }:
		return t.TakesEarlyData()
	}
	return true
}

// Listen makes the host listen on addr.
func (h *Host) Listen(ctx context.Context, network, addr string) (net.Listener, error) {
	f, n, err := h.forwarder(ctx)
	if err != nil {
		return nil, h.named(err)
	}
	ln, err := f.Listen(ctx, network, addr)
	if err != nil {
		return nil, n.err(err)
	}
	return nameListener(ln, n), nil
}
