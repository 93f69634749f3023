package bytestream

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"sync"
	"time"

	"github.com/hostgate/hostgate/internal/yamux"
)

// Mux defaults. yamux's own 256 KiB stream window caps one stream at
// window/RTT (about 25 MB/s at 10 ms); 4 MiB lets a stream fill a fast link.
const (
	DefaultStreamWindow      = 4 << 20
	DefaultAcceptBacklog     = 256
	DefaultMaxStreams        = 1024
	DefaultKeepAliveInterval = 30 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
)

// MuxConfig tunes a yamux session; nil or zero fields mean defaults.
//
// Memory bound: a peer can make this side buffer up to StreamWindow bytes per
// stream it opens, so at most StreamWindow × MaxStreams in all (4 GiB with
// the defaults if the application never reads); lower either for untrusted
// peers.
type MuxConfig struct {
	// StreamWindow is the per-stream receive window; default 4 MiB, at
	// least 256 KiB (yamux's minimum).
	StreamWindow uint32
	// AcceptBacklog bounds streams opened by the peer and not yet
	// accepted; more are reset. Default 256.
	AcceptBacklog int
	// MaxStreams bounds the streams the peer may have open at once
	// (accepted or not, until both sides closed or one reset); a stream
	// beyond it is refused with a RST. 0 = 1024; negative = no bound.
	MaxStreams int
	// KeepAliveInterval is the time between pings; a ping not answered
	// within WriteTimeout closes the session. 0 = 30 s; negative disables.
	KeepAliveInterval time.Duration
	// WriteTimeout bounds a stalled write to the underlying conn (each
	// 64 KiB of it must go out within the timeout). One that stalls closes
	// the WHOLE session (yamux#142: a timed-out write must not leave a
	// half-alive session), and every pending Open, Read and Write fails.
	// It also bounds the keepalive ping's answer. 0 = 30 s; negative
	// disables.
	WriteTimeout time.Duration
	// CloseEndsReads makes a stream's Close end both directions, as a
	// net.Conn's does, instead of the half-close described at MuxClient:
	// a pending or later Read returns io.EOF, and what the peer still
	// sends is dropped, never buffered. Set it where the peer is not
	// trusted to close its side: with half-close, each stream closed here
	// holds what such a peer sends, up to StreamWindow, until the stream
	// is reset 5 minutes later.
	CloseEndsReads bool
	// RecvBudget, when set, is shared by the sessions whose streams'
	// unread bytes must stay within it together: a stream grants its
	// peer window beyond yamux's initial 256 KiB only out of the budget,
	// so all of them hold at most the budget plus 256 KiB per open
	// stream. When it is spent, streams whose reader keeps up keep their
	// window and the ones holding the most get no more (the peer's writes
	// wait; no byte is dropped, no stream cut). nil: each stream may hold
	// StreamWindow.
	RecvBudget *RecvBudget
	// OnMisuse, when set, is told of each frame of the peer that no
	// well-behaved peer sends: a stream beyond MaxStreams (refused), a
	// window update that grants (almost) nothing (after
	// maxEmptyUpdates of them within emptyUpdateSpan the session is
	// closed with ErrWindowUpdateFlood). It runs on the session's
	// receive loop, so it must not block.
	OnMisuse func(MuxMisuse)
}

// MuxMisuse is a kind of frame OnMisuse is told of.
type MuxMisuse int

const (
	// MisuseStreamRefused: the peer opened a stream beyond MaxStreams,
	// which was refused with a RST.
	MisuseStreamRefused MuxMisuse = iota + 1
	// MisuseEmptyWindowUpdate: the peer sent a window update without
	// flags that grants under minWindowGrant bytes. yamux grants window
	// only once it can grant half of the stream's (at least 128 KiB), so
	// a peer sending them burns this side's CPU for nothing.
	MisuseEmptyWindowUpdate
)

// RecvBudget is a bound on what mux streams hold unread, shared by the
// sessions of MuxConfigs that name it; its Held is what they hold now.
type RecvBudget = yamux.RecvBudget

// NewRecvBudget returns a RecvBudget of limit bytes.
func NewRecvBudget(limit int64) *RecvBudget { return yamux.NewRecvBudget(limit) }

// ErrWriteTimeout is the session's close reason when a write to the
// underlying conn did not finish within MuxConfig.WriteTimeout.
var ErrWriteTimeout error = &timeoutError{"bytestream: mux write timed out"}

// ErrKeepAliveTimeout is the session's close reason when a keepalive ping
// was not answered in time.
var ErrKeepAliveTimeout error = &timeoutError{"bytestream: mux keepalive timed out"}

// ErrWindowUpdateFlood closes a session whose peer sent more than
// maxEmptyUpdates window updates granting (almost) nothing within
// emptyUpdateSpan.
var ErrWindowUpdateFlood = errors.New("bytestream: mux peer flooded the session with window updates that grant nothing")

// ErrTooManyRefused closes a session whose peer keeps opening streams
// beyond MaxStreams faster than the refusals can be sent.
var ErrTooManyRefused = errors.New("bytestream: mux peer exceeded stream limit too often")

// timeoutError implements net.Error so callers can test Timeout().
type timeoutError struct{ msg string }

func (e *timeoutError) Error() string   { return e.msg }
func (e *timeoutError) Timeout() bool   { return true }
func (e *timeoutError) Temporary() bool { return true }

// MuxClient starts the client side of a yamux session over conn. The
// session owns conn: closing the session closes it. Streams are opened with
// Open and accepted with Accept on the returned session.
//
// yamux streams: Close is a half-close (FIN) — reading goes on until the
// peer closes too, and a stream whose peer never does is reset after 5
// minutes (unless MuxConfig.CloseEndsReads); there is no CloseWrite method,
// so bicopy closes both directions when either ends. A stream counts against the peer's MaxStreams until
// both sides closed it or one reset it.
//
// The session's shutdown error (returned by Accept after it ends) is
// ErrWriteTimeout or ErrKeepAliveTimeout when those ended it. Session.Ping
// waits until the answer comes or the session closes (yamux's own write
// timeout, which bounded it, is disabled because its expiry reports a
// failed write whose bytes may still be sent later). The keepalive here
// closes the session only when nothing arrives, so a peer that sends and
// answers no ping holds a Ping for the session's life: bound it with
// Session.PingContext.
func MuxClient(conn net.Conn, cfg *MuxConfig) (*MuxSession, error) {
	return newMux(conn, cfg, true)
}

// MuxServer starts the server side of a yamux session over conn; see
// MuxClient.
func MuxServer(conn net.Conn, cfg *MuxConfig) (*MuxSession, error) {
	return newMux(conn, cfg, false)
}

// MuxSession is a yamux session; its streams are *MuxStream. The
// implementation is hostgate's copy of hashicorp/yamux (internal/yamux:
// the same protocol, streams writing their own frames), so these names
// are how code outside the module refers to it.
type MuxSession = yamux.Session

// MuxStream is one stream of a MuxSession: a net.Conn.
type MuxStream = yamux.Stream

type muxSettings struct {
	window       uint32
	backlog      int
	maxStreams   int // <= 0: unbounded
	keepAlive    time.Duration
	writeTimeout time.Duration // <= 0: none
	closeEnds    bool
	budget       *RecvBudget
}

func (cfg *MuxConfig) settings() (muxSettings, error) {
	var c MuxConfig
	if cfg != nil {
		c = *cfg
	}
	s := muxSettings{
		window:       c.StreamWindow,
		backlog:      c.AcceptBacklog,
		maxStreams:   c.MaxStreams,
		keepAlive:    c.KeepAliveInterval,
		writeTimeout: c.WriteTimeout,
		closeEnds:    c.CloseEndsReads,
		budget:       c.RecvBudget,
	}
	if s.window == 0 {
		s.window = DefaultStreamWindow
	}
	if s.window < 256<<10 {
		return s, fmt.Errorf("bytestream: mux config: StreamWindow %d below 256 KiB", s.window)
	}
	if s.backlog == 0 {
		s.backlog = DefaultAcceptBacklog
	}
	if s.backlog < 0 {
		return s, fmt.Errorf("bytestream: mux config: negative AcceptBacklog")
	}
	if s.maxStreams == 0 {
		s.maxStreams = DefaultMaxStreams
	}
	if s.keepAlive == 0 {
		s.keepAlive = DefaultKeepAliveInterval
	}
	if s.writeTimeout == 0 {
		s.writeTimeout = DefaultWriteTimeout
	}
	if s.keepAlive > 0 && s.writeTimeout < 0 {
		return s, fmt.Errorf("bytestream: mux config: keepalive needs a WriteTimeout to bound the ping")
	}
	return s, nil
}

func newMux(conn net.Conn, cfg *MuxConfig, client bool) (*yamux.Session, error) {
	s, err := cfg.settings()
	if err != nil {
		return nil, err
	}
	yc := &yamux.Config{
		AcceptBacklog: s.backlog,
		// What this side opens is the peer's to bound (its MaxStreams
		// and backlog, 1024 and 256 by default), not ours: yamux sized
		// it by our AcceptBacklog, and a tunnel, which accepts one
		// stream, could then have one open unacknowledged at a time.
		OpenBacklog:     DefaultAcceptBacklog,
		EnableKeepAlive: false, // ours below: yamux's only detects a dead peer via the write timeout
		// KeepAliveInterval must be positive for VerifyConfig even when off.
		KeepAliveInterval: DefaultKeepAliveInterval,
		// Disabled: on expiry yamux returns an error for a frame it has
		// queued and may still send (yamux#142); muxConn bounds each write
		// instead and closes the whole session.
		ConnectionWriteTimeout: time.Duration(math.MaxInt64),
		// Streams write their own frames: muxConn's write watchdog bounds
		// every write, which is what WriteInCaller asks of the connection.
		WriteInCaller:       true,
		ReadsBuffered:       true, // muxConn reads through a buffer, its own or the WebSocket's
		CloseEndsReads:      s.closeEnds,
		MaxStreamWindowSize: s.window,
		RecvBudget:          s.budget,
		StreamOpenTimeout:   75 * time.Second,
		StreamCloseTimeout:  5 * time.Minute,
		LogOutput:           io.Discard, // library: no logs
	}
	mc := newMuxConn(conn, s.maxStreams, s.writeTimeout)
	if cfg != nil {
		mc.onMisuse = cfg.OnMisuse
	}
	var sess *yamux.Session
	if client {
		sess, err = yamux.Client(mc, yc)
	} else {
		sess, err = yamux.Server(mc, yc)
	}
	if err != nil {
		return nil, fmt.Errorf("bytestream: mux: %w", err)
	}
	if s.keepAlive > 0 {
		mc.startKeeper(sess, s.keepAlive, s.writeTimeout)
	}
	return sess, nil
}

// keeper pings a session every interval; a ping unanswered within timeout
// fails the conn, which ends the session with ErrKeepAliveTimeout. It is a
// timer, not a goroutine: between pings an idle session (10,000 agent
// tunnels on a gateway) holds no stack for it. muxConn.Close stops it and
// waits for a ping in flight, which the closing session fails at once.
type keeper struct {
	sess              *yamux.Session
	mc                *muxConn
	interval, timeout time.Duration

	mu      sync.Mutex
	t       *time.Timer
	stopped bool
	running sync.WaitGroup // a tick in progress
}

func (c *muxConn) startKeeper(sess *yamux.Session, interval, timeout time.Duration) {
	k := &keeper{sess: sess, mc: c, interval: interval, timeout: timeout}
	k.mu.Lock()
	defer k.mu.Unlock()
	c.rmu.Lock()
	closed := c.closed
	if !closed {
		c.keeper = k
	}
	c.rmu.Unlock()
	if closed {
		return
	}
	k.t = time.AfterFunc(interval, k.tick)
}

func (k *keeper) tick() {
	k.mu.Lock()
	if k.stopped {
		k.mu.Unlock()
		return
	}
	k.running.Add(1)
	k.mu.Unlock()
	defer k.running.Done()
	g := &pingGuard{k: k, heard: k.mc.heard.Load()}
	g.mu.Lock()
	g.t = time.AfterFunc(k.timeout, g.fire)
	g.mu.Unlock()
	_, err := k.sess.Ping()
	g.stop()
	if err != nil {
		// The session is closing: closed by its owner, or by the guard or
		// a failed write, which already recorded the reason.
		return
	}
	k.mu.Lock()
	if !k.stopped {
		k.t.Reset(k.interval)
	}
	k.mu.Unlock()
}

// pingGuard fails the conn when a ping goes unanswered for the keeper's
// timeout while nothing else arrives either. Frames arriving mean the peer
// is alive and its answer waits behind them: on a slow uplink a sustained
// download queued more than 30 s of data ahead of it, and the tunnel was
// cut under the download.
type pingGuard struct {
	k       *keeper
	mu      sync.Mutex
	t       *time.Timer
	heard   uint64 // frames received when last looked
	stopped bool
}

func (g *pingGuard) fire() {
	g.mu.Lock()
	if g.stopped {
		g.mu.Unlock()
		return
	}
	if n := g.k.mc.heard.Load(); n != g.heard {
		g.heard = n
		g.t.Reset(g.k.timeout)
		g.mu.Unlock()
		return
	}
	g.mu.Unlock()
	g.k.mc.fail(ErrKeepAliveTimeout)
}

func (g *pingGuard) stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopped = true
	g.t.Stop()
}

// stop ends the pings; called from muxConn.Close, so a ping in flight
// fails on the closed conn and stop returns once it has.
func (k *keeper) stop() {
	k.mu.Lock()
	k.stopped = true
	if k.t != nil {
		k.t.Stop()
	}
	k.mu.Unlock()
	k.running.Wait()
}
