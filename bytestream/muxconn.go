package bytestream

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// yamux wire format (hashicorp/yamux spec.md): a 12-byte header — version,
// type, flags, stream id, length — and, for data frames only, length bytes
// of body.
const (
	hdrSize          = 12
	typeData         = 0
	typeWindowUpdate = 1
	flagSYN          = 1
	flagFIN          = 4
	flagRST          = 8
)

// maxCoalesce bounds the write that joins a data frame's header to the
// start of its body: yamux writes them separately, which over a WebSocket
// would be a 12-byte message before every body. It equals MaxMessageSize so the
// joined write is one whole WebSocket message.
const maxCoalesce = MaxMessageSize

// initialWindow is yamux's initial stream window (const.go
// initialStreamWindow), the most a peer may send on a stream before we
// grant more.
const initialWindow = 256 << 10

var errFrameTooBig = errors.New("bytestream: mux peer sent a frame beyond the initial window")

// minWindowGrant is the least window an update without flags grants from
// a well-behaved peer, with room to spare: yamux sends one only once it can
// grant half of the stream's window, which is at least 256 KiB.
const minWindowGrant = 64 << 10

// maxEmptyUpdates window updates granting under minWindowGrant are taken
// within emptyUpdateSpan; one more closes the session. yamux sends none
// (but a stream ended with its window used up may grant 0 once), so the
// bound is far above what any peer of ours sends and far below a flood:
// 5.5 million updates in 3 s cost 0.82 CPU-s.
const (
	maxEmptyUpdates = 4096
	emptyUpdateSpan = 30 * time.Second
)

// maxPendingRST bounds the refusals queued while a frame is being written;
// a peer that outruns it loses the session.
const maxPendingRST = 1024

type frameHeader [hdrSize]byte

func (h *frameHeader) typ() uint8       { return h[1] }
func (h *frameHeader) flags() uint16    { return binary.BigEndian.Uint16(h[2:4]) }
func (h *frameHeader) streamID() uint32 { return binary.BigEndian.Uint32(h[4:8]) }
func (h *frameHeader) length() uint32   { return binary.BigEndian.Uint32(h[8:12]) }

// bodyLen is the number of body bytes following the header on the wire.
func (h *frameHeader) bodyLen() uint32 {
	if h.typ() == typeData {
		return h.length()
	}
	return 0
}

func rstFrame(id uint32) frameHeader {
	var h frameHeader
	h[1] = typeWindowUpdate
	binary.BigEndian.PutUint16(h[2:4], flagRST)
	binary.BigEndian.PutUint32(h[4:8], id)
	return h
}

// muxConn sits between a yamux session and its conn. It watches the frames
// both ways to enforce MaxStreams (yamux has no such bound), refusing extra
// streams with a RST the session never sees; it bounds every write with a
// watchdog that closes the conn, so a stuck peer ends the whole session
// (yamux#142); and it coalesces each small data frame into one write.
type muxConn struct {
	conn    net.Conn
	br      io.Reader    // conn, or a buffer over it (see bufferedReader)
	streams *streamTable // nil: no bound

	// Read side, owned by the yamux recv goroutine (the only reader).
	rhdr  frameHeader
	rpend []byte // undelivered header bytes (a slice of rhdr)
	rbody uint32 // body bytes of the current frame still to deliver
	// heard counts frames received, for the keeper: a peer whose frames
	// keep coming is alive though a ping's answer waits behind them.
	heard atomic.Uint64
	// Window updates granting under minWindowGrant since emptyAt.
	empties int
	emptyAt time.Time

	onMisuse func(MuxMisuse) // MuxConfig.OnMisuse; set before the session starts

	// Write side, guarded by wmu: the yamux send goroutine writes frames,
	// the flusher writes queued RSTs between them. The recv goroutine never
	// writes (a reader blocked on a write could deadlock two peers).
	wmu     sync.Mutex
	wscan   frameScanner
	held    []byte // a data header held back to go out with its body (in hbuf)
	hbuf    frameHeader
	buf     []byte // header+body coalescing buffer
	rstOut  []byte // RSTs being written
	timeout time.Duration
	timer   *time.Timer // write watchdog; nil when timeout <= 0
	joiner  joiner      // the conn joins a header to its body itself; nil if not
	joinLo  int         // joiner.joinRange()
	joinHi  int

	rmu      sync.Mutex
	rsts     []byte // RST frames waiting for a frame boundary; guarded by rmu
	flushing bool   // a flusher goroutine runs; guarded by rmu
	closed   bool   // no flusher starts; guarded by rmu

	// The flusher runs only while RSTs wait: a goroutine parked per
	// session would cost every idle agent tunnel a stack.
	flusher   sync.WaitGroup
	closeOnce sync.Once
	keeper    *keeper // the session's keepalive, stopped by Close; nil when off; guarded by rmu

	reason atomic.Pointer[error] // why fail closed the conn; set once
}

// muxReadBuf is the read buffer under the frame parser. It is small on
// purpose: it fills on a header read, so a data frame's body is copied out
// of it only up to its size, and the rest is read straight into yamux's
// buffer. At 32 KiB nearly every byte of a bulk stream was copied once more.
const muxReadBuf = 4 << 10

// bufferedReader is a conn whose small reads cost no syscall each: a
// WebSocket, read through coder/websocket's buffer (and, accepted, a
// read-ahead under it). muxConn reads one without a buffer of its own,
// which every idle agent tunnel held, 4 KiB, for as long as it lived.
type bufferedReader interface {
	readsBuffered() bool
}

// joiner is a conn that writes two parts as one Write of both: a
// write-behind WebSocket (an agent's, dialed), which copies what it is
// given into its buffer anyway, or a gateway's corked one, which sends the
// header as a message of its own in the body's writev. Either way a
// frame's header goes out with its body without muxConn copying the body
// first.
type joiner interface {
	joinsWrites() bool
	joinRange() (lo, hi int) // the body sizes to hand to writeJoined
	writeJoined(a, b []byte) (int, error)
}

func newMuxConn(conn net.Conn, maxStreams int, timeout time.Duration) *muxConn {
	c := &muxConn{conn: conn, br: conn, timeout: timeout}
	if b, ok := conn.(bufferedReader); !ok || !b.readsBuffered() {
		c.br = bufio.NewReaderSize(conn, muxReadBuf)
	}
	if j, ok := conn.(joiner); ok && j.joinsWrites() {
		c.joiner = j
		c.joinLo, c.joinHi = j.joinRange()
	}
	if timeout > 0 {
		c.timer = time.AfterFunc(time.Hour, func() { c.fail(ErrWriteTimeout) })
		c.timer.Stop()
	}
	if maxStreams > 0 {
		c.streams = newStreamTable(maxStreams)
	}
	return c
}

// flush writes queued RSTs while the send goroutine is between frames and
// exits once none wait; mid-frame it leaves them to the sender, which
// flushes at the frame's end (Write). Started by refuse, awaited by Close.
func (c *muxConn) flush() {
	defer c.flusher.Done()
	for {
		c.wmu.Lock()
		boundary := c.wscan.atBoundary() && c.held == nil
		if boundary {
			_ = c.flushRSTs() // a failed write also fails the session's writer
		}
		// Decide to stop while still holding wmu (the order flushRSTs takes
		// the locks in): mid-frame, the sender flushes at the frame's end,
		// which cannot have happened yet; an RST queued after this check
		// sees flushing false and starts a new flusher.
		c.rmu.Lock()
		stop := !boundary || len(c.rsts) == 0 || c.closed
		if stop {
			c.flushing = false
		}
		c.rmu.Unlock()
		c.wmu.Unlock()
		if stop {
			return
		}
	}
}

// fail records err as the reason the session ends and closes the conn,
// which ends both yamux loops; the first reason wins.
func (c *muxConn) fail(err error) {
	c.reason.CompareAndSwap(nil, &err)
	if a, ok := c.conn.(aborter); ok {
		_ = a.abort() // the peer is stuck or dead: no goodbye
		return
	}
	_ = c.conn.Close()
}

// aborter is a conn whose Close talks to the peer and that can also close
// at once.
type aborter interface{ abort() error }

// errOr returns the recorded failure reason, if any, else err: yamux takes
// the first loop error as the session's shutdown error.
func (c *muxConn) errOr(err error) error {
	if r := c.reason.Load(); r != nil {
		return *r
	}
	return err
}

// Close closes the conn (which unblocks any write) and waits for the
// flusher.
func (c *muxConn) Close() error {
	err := c.conn.Close()
	c.closeOnce.Do(func() {
		c.rmu.Lock()
		c.closed = true
		k := c.keeper // set under rmu by startKeeper, which may race a failing session
		c.rmu.Unlock()
		if k != nil {
			k.stop()
		}
		c.flusher.Wait()
		c.wmu.Lock()
		if c.timer != nil {
			c.timer.Stop()
		}
		c.wmu.Unlock()
	})
	return err
}

func (c *muxConn) Read(p []byte) (int, error) {
	for {
		if len(c.rpend) > 0 {
			n := copy(p, c.rpend)
			c.rpend = c.rpend[n:]
			return n, nil
		}
		if c.rbody > 0 {
			n, err := c.br.Read(p[:min(uint32(len(p)), c.rbody)])
			c.rbody -= uint32(n)
			if err != nil {
				return n, c.errOr(err)
			}
			return n, nil
		}
		if len(p) == 0 {
			return 0, nil
		}
		if _, err := io.ReadFull(c.br, c.rhdr[:]); err != nil {
			return 0, c.errOr(err)
		}
		c.heard.Add(1)
		if c.streams.inbound(&c.rhdr) {
			if c.rhdr.typ() == typeWindowUpdate && c.rhdr.flags() == 0 && c.rhdr.length() < minWindowGrant {
				if err := c.emptyUpdate(); err != nil {
					return 0, err
				}
			}
			c.rpend = c.rhdr[:]
			c.rbody = c.rhdr.bodyLen()
			continue
		}
		// Refused: yamux never sees the SYN; later frames of this stream
		// reach it as frames for an unknown stream, which it drops.
		if n := c.rhdr.bodyLen(); n > 0 {
			// A new stream's send window is yamux's fixed initial 256 KiB;
			// a bigger first frame is a protocol violation, not data.
			if n > initialWindow {
				c.fail(errFrameTooBig)
				return 0, errFrameTooBig
			}
			if _, err := io.CopyN(io.Discard, c.br, int64(n)); err != nil {
				return 0, c.errOr(err)
			}
		}
		c.misuse(MisuseStreamRefused)
		if err := c.refuse(c.rhdr.streamID()); err != nil {
			return 0, err
		}
	}
}

func (c *muxConn) misuse(m MuxMisuse) {
	if c.onMisuse != nil {
		c.onMisuse(m)
	}
}

// emptyUpdate counts a window update that grants (almost) nothing and
// closes the session when there were too many lately. The clock is read
// only for these, which a well-behaved peer does not send.
func (c *muxConn) emptyUpdate() error {
	c.misuse(MisuseEmptyWindowUpdate)
	if now := time.Now(); now.Sub(c.emptyAt) > emptyUpdateSpan {
		c.emptyAt, c.empties = now, 0
	}
	c.empties++
	if c.empties > maxEmptyUpdates {
		c.fail(ErrWindowUpdateFlood)
		return ErrWindowUpdateFlood
	}
	return nil
}

// refuse queues a RST for id and wakes the flusher. It never blocks on a
// write.
func (c *muxConn) refuse(id uint32) error {
	rst := rstFrame(id)
	c.rmu.Lock()
	full := len(c.rsts) >= maxPendingRST*hdrSize
	if !full {
		c.rsts = append(c.rsts, rst[:]...)
	}
	c.rmu.Unlock()
	if full {
		c.fail(ErrTooManyRefused)
		return ErrTooManyRefused
	}
	c.rmu.Lock()
	start := !c.flushing && !c.closed
	if start {
		c.flushing = true
		c.flusher.Add(1)
	}
	c.rmu.Unlock()
	if start {
		go c.flush()
	}
	return nil
}

// flushRSTs writes queued RSTs; wmu held, at a frame boundary.
func (c *muxConn) flushRSTs() error {
	c.rmu.Lock()
	c.rstOut, c.rsts = append(c.rstOut[:0], c.rsts...), c.rsts[:0]
	c.rmu.Unlock()
	if len(c.rstOut) == 0 {
		return nil
	}
	return c.writeOut(c.rstOut)
}

func (c *muxConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if r := c.reason.Load(); r != nil {
		return 0, *r
	}
	wasBoundary := c.wscan.atBoundary()
	c.wscan.scan(p, c.streams)
	if wasBoundary && c.held == nil && len(p) == hdrSize && c.wscan.body > 0 {
		c.held = append(c.hbuf[:0], p...)
		return len(p), nil
	}
	var err error
	if c.held != nil && c.joiner != nil && len(p) >= c.joinLo && len(p) <= c.joinHi {
		err = c.writeJoined(c.held, p)
		c.held = nil
	} else {
		err = c.writeCoalesced(p)
	}
	if err != nil {
		return 0, err
	}
	if c.wscan.atBoundary() {
		if err := c.flushRSTs(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// writeCoalesced writes p, and before it a held header joined to (the
// start of) it by a copy: at most maxCoalesce bytes are copied, the rest
// is written as is. wmu held.
func (c *muxConn) writeCoalesced(p []byte) error {
	out, rest := p, []byte(nil)
	if c.held != nil {
		k := min(len(p), maxCoalesce-hdrSize)
		c.buf = append(append(c.buf[:0], c.held...), p[:k]...)
		out, rest = c.buf, p[k:]
		c.held = nil
	}
	if err := c.writeOut(out); err != nil {
		return err
	}
	if len(rest) > 0 {
		return c.writeOut(rest)
	}
	return nil
}

// writeOut writes b under the watchdog; wmu held. The watchdog is re-armed
// for every MaxMessageSize bytes, so WriteTimeout bounds a stall, not the time
// a large frame takes on a slow but moving link.
func (c *muxConn) writeOut(b []byte) error {
	if c.timer == nil {
		if _, err := c.conn.Write(b); err != nil {
			return c.errOr(err)
		}
		return nil
	}
	defer c.timer.Stop()
	for len(b) > 0 {
		chunk := b[:min(len(b), MaxMessageSize)]
		c.timer.Reset(c.timeout)
		if _, err := c.conn.Write(chunk); err != nil {
			return c.errOr(err)
		}
		b = b[len(chunk):]
	}
	return nil
}

// writeJoined writes a header and its body through the joiner under the
// watchdog; wmu held. One arming bounds the wait for room in a
// write-behind buffer (they are less than wbMax together), or one corked
// write of a message's worth (see joinRange).
func (c *muxConn) writeJoined(hdr, body []byte) error {
	if c.timer != nil {
		c.timer.Reset(c.timeout)
		defer c.timer.Stop()
	}
	if _, err := c.joiner.writeJoined(hdr, body); err != nil {
		return c.errOr(err)
	}
	return nil
}

func (c *muxConn) LocalAddr() net.Addr  { return c.conn.LocalAddr() }
func (c *muxConn) RemoteAddr() net.Addr { return c.conn.RemoteAddr() }

// frameScanner follows frame boundaries in a byte stream written in
// arbitrary pieces.
type frameScanner struct {
	hdr  frameHeader
	n    int    // header bytes collected
	body uint32 // body bytes of the current frame still to come
}

func (s *frameScanner) atBoundary() bool { return s.n == 0 && s.body == 0 }

// scan consumes p, reporting each complete header to t.
func (s *frameScanner) scan(p []byte, t *streamTable) {
	for len(p) > 0 {
		if s.body > 0 {
			k := min(uint32(len(p)), s.body)
			s.body -= k
			p = p[k:]
			continue
		}
		k := copy(s.hdr[s.n:], p)
		s.n += k
		p = p[k:]
		if s.n == hdrSize {
			s.n = 0
			s.body = s.hdr.bodyLen()
			t.outbound(&s.hdr)
		}
	}
}

// streamTable tracks the streams the peer opened and that are not yet
// closed both ways or reset. Frames are seen in both directions: inbound
// (peer to us) and outbound.
type streamTable struct {
	max  int
	mu   sync.Mutex
	live map[uint32]uint8 // stream id -> finIn|finOut; at most max entries
}

const (
	finIn  = 1
	finOut = 2
)

func newStreamTable(max int) *streamTable {
	return &streamTable{max: max, live: make(map[uint32]uint8)}
}

// inbound records a frame from the peer and reports whether to deliver it;
// false refuses a stream open beyond the bound.
func (t *streamTable) inbound(h *frameHeader) bool {
	if t == nil || (h.typ() != typeData && h.typ() != typeWindowUpdate) {
		return true
	}
	id, flags := h.streamID(), h.flags()
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.live[id]; !ok && flags&flagSYN != 0 {
		if len(t.live) >= t.max {
			return false
		}
		t.live[id] = 0
	}
	t.update(id, flags, finIn)
	return true
}

// outbound records a frame this side sends.
func (t *streamTable) outbound(h *frameHeader) {
	if t == nil || (h.typ() != typeData && h.typ() != typeWindowUpdate) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.update(h.streamID(), h.flags(), finOut)
}

// update applies a frame's FIN/RST to a tracked stream; t.mu held.
func (t *streamTable) update(id uint32, flags uint16, fin uint8) {
	st, ok := t.live[id]
	if !ok {
		return
	}
	switch {
	case flags&flagRST != 0:
		delete(t.live, id)
	case flags&flagFIN != 0:
		st |= fin
		if st == finIn|finOut {
			delete(t.live, id)
		} else {
			t.live[id] = st
		}
	}
}

// open reports how many peer streams are tracked (for tests).
func (t *streamTable) open() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.live)
}
