package yamux

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Session is used to wrap a reliable ordered connection and to
// multiplex it into multiple streams.
type Session struct {
	// remoteGoAway indicates the remote side does
	// not want futher connections. Must be first for alignment.
	remoteGoAway int32

	// localGoAway indicates that we should stop
	// accepting futher connections. Must be first for alignment.
	localGoAway int32

	// nextStreamID is the next stream we should
	// send. This depends if we are a client/server.
	nextStreamID uint32

	// config holds our configuration
	config *Config

	// logger is used for our logs
	logger Logger

	// conn is the underlying connection
	conn io.ReadWriteCloser

	// bufRead is a buffered reader (hostgate: or the conn itself, when
	// it buffers: Config.ReadsBuffered)
	bufRead io.Reader

	// pings is used to track inflight pings
	pings    map[uint32]chan struct{}
	pingID   uint32
	pingLock sync.Mutex

	// hostgate: pingReplies counts the answers to the peer's pings not
	// yet handed to the send loop (see handlePing).
	pingReplies atomic.Int32

	// streams maps a stream id to a stream, and inflight has an entry
	// for any outgoing stream that has not yet been established. Both are
	// protected by streamLock.
	streams    map[uint32]*Stream
	inflight   map[uint32]struct{}
	streamLock sync.Mutex

	// synCh acts like a semaphore. It is sized to the AcceptBacklog which
	// is assumed to be symmetric between the client and server. This allows
	// the client to avoid exceeding the backlog and instead blocks the open.
	synCh chan struct{}

	// acceptCh is used to pass ready streams to the client
	acceptCh chan *Stream

	// sendCh is used to mark a stream as ready to send,
	// or to send a header out directly.
	sendCh chan *sendReady

	// hostgate: writeTok serializes the frames written to conn: those
	// written in the caller's goroutine (Config.WriteInCaller) and the
	// send loop's. It is a lock (holding it is having put the one token
	// in) that a waiter can give up: a sync.Mutex held every other
	// stream's Write past its deadline, its Close, and the send loop past
	// the session's Close, for as long as one stream's write was stuck on
	// a connection the peer stopped reading (up to bytestream's 30 s write
	// watchdog). Blocked senders on a channel are served in turn, so a
	// waiter is not overtaken by writers arriving later.
	writeTok chan struct{}

	// recvDoneCh is closed when recv() exits to avoid a race
	// between stream registration and stream shutdown
	recvDoneCh chan struct{}
	sendDoneCh chan struct{}

	// hostgate: with Config.WriteInCaller the send loop runs only while
	// frames wait (kickSend): streams write their own frames, and what
	// is left (pings, their answers, GoAway) is one frame in a while, for
	// which a goroutine parked for the session's life held a stack on
	// every idle agent tunnel. sendMu guards the three below.
	sendMu      sync.Mutex
	sendRunning bool          // a send loop runs
	sendClosed  bool          // Close: no send loop starts
	sendRun     chan struct{} // closed when the last send loop started ends; nil if none

	// hostgate: closed is done when the session shuts down, as
	// shutdownCh is closed: AfterClose's functions run then, without a
	// goroutine each parked on CloseChan for the session's life.
	closed      context.Context
	closedStart context.CancelFunc

	// shutdown is used to safely close a session
	shutdown        bool
	shutdownErr     error
	shutdownCh      chan struct{}
	shutdownLock    sync.Mutex
	shutdownErrLock sync.Mutex
}

// sendReady is used to either mark a stream as ready
// or to directly send a header
type sendReady struct {
	Hdr  []byte
	mu   sync.Mutex // Protects Body from unsafe reads.
	Body []byte
	Err  chan error
}

// newSession is used to construct a new session
func newSession(config *Config, conn io.ReadWriteCloser, client bool) *Session {
	logger := config.Logger
	if logger == nil {
		logger = log.New(config.LogOutput, "", log.LstdFlags)
	}

	s := &Session{
		config:     config,
		logger:     logger,
		conn:       conn,
		bufRead:    conn,
		pings:      make(map[uint32]chan struct{}),
		streams:    make(map[uint32]*Stream),
		inflight:   make(map[uint32]struct{}),
		synCh:      make(chan struct{}, openBacklog(config)),
		acceptCh:   make(chan *Stream, config.AcceptBacklog),
		sendCh:     make(chan *sendReady, 64),
		writeTok:   make(chan struct{}, 1),
		recvDoneCh: make(chan struct{}),
		sendDoneCh: make(chan struct{}),
		shutdownCh: make(chan struct{}),
	}
	if !config.ReadsBuffered {
		s.bufRead = bufio.NewReader(conn)
	}
	s.closed, s.closedStart = context.WithCancel(context.Background())
	if client {
		s.nextStreamID = 1
	} else {
		s.nextStreamID = 2
	}
	go s.recv()
	if !config.WriteInCaller {
		go s.send()
	}
	if config.EnableKeepAlive {
		go s.keepalive()
	}
	return s
}

// openBacklog (hostgate) is synCh's size: Config.OpenBacklog, else
// AcceptBacklog.
func openBacklog(c *Config) int {
	if c.OpenBacklog > 0 {
		return c.OpenBacklog
	}
	return c.AcceptBacklog
}

// IsClosed does a safe check to see if we have shutdown
func (s *Session) IsClosed() bool {
	select {
	case <-s.shutdownCh:
		return true
	default:
		return false
	}
}

// CloseChan returns a read-only channel which is closed as
// soon as the session is closed.
func (s *Session) CloseChan() <-chan struct{} {
	return s.shutdownCh
}

// hostgate: AfterClose arranges for f to run in its own goroutine once the
// session shuts down (when CloseChan is closed), or at once if it has;
// stop undoes it, as context.AfterFunc's does.
func (s *Session) AfterClose(f func()) (stop func() bool) {
	return context.AfterFunc(s.closed, f)
}

// NumStreams returns the number of currently open streams
func (s *Session) NumStreams() int {
	s.streamLock.Lock()
	num := len(s.streams)
	s.streamLock.Unlock()
	return num
}

// Open is used to create a new stream as a net.Conn
func (s *Session) Open() (net.Conn, error) {
	conn, err := s.OpenStream()
	if err != nil {
		return nil, err
	}
	return conn, nil
}

// OpenStream is used to create a new stream
func (s *Session) OpenStream() (*Stream, error) {
	return s.OpenStreamContext(context.Background())
}

// hostgate: OpenStreamContext is OpenStream, giving up when ctx ends
// while it waits: for the peer to acknowledge earlier opens (the open
// backlog), or, with Config.WriteInCaller, for the connection to take the
// stream's first frame while another frame's write is stuck on it (a peer
// that stopped reading), which OpenStream waited out until the
// connection's own write bound ended the session. Nothing of the stream
// has been sent then, and the session goes on. Once the frame is being
// written, or in send-loop mode once it is queued, ctx no longer counts:
// ConnectionWriteTimeout bounds the rest.
func (s *Session) OpenStreamContext(ctx context.Context) (*Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.IsClosed() {
		return nil, ErrSessionShutdown
	}
	if atomic.LoadInt32(&s.remoteGoAway) == 1 {
		return nil, ErrRemoteGoAway
	}

	// Block if we have too many inflight SYNs
	select {
	case s.synCh <- struct{}{}:
	case <-s.shutdownCh:
		return nil, ErrSessionShutdown
	case <-ctx.Done():
		return nil, ctx.Err()
	}

GET_ID:
	// Get an ID, and check for stream exhaustion
	id := atomic.LoadUint32(&s.nextStreamID)
	if id >= math.MaxUint32-1 {
		return nil, ErrStreamsExhausted
	}
	if !atomic.CompareAndSwapUint32(&s.nextStreamID, id, id+2) {
		goto GET_ID
	}

	// Register the stream
	stream := newStream(s, id, streamInit)
	s.streamLock.Lock()
	s.streams[id] = stream
	s.inflight[id] = struct{}{}
	s.streamLock.Unlock()

	if s.config.StreamOpenTimeout > 0 {
		go s.setOpenTimeout(stream)
	}

	// Send the window update to create
	if err := stream.sendWindowUpdate(ctx.Done()); err != nil {
		if err == errGaveUp {
			// hostgate: nothing of it was written. forceClose ends
			// setOpenTimeout's wait, which would close the session;
			// closeStream gives back the SYN credit (unless a peer
			// guessing the id acknowledged it) and the budget.
			stream.forceClose()
			s.closeStream(id)
			return nil, ctx.Err()
		}
		select {
		case <-s.synCh:
		default:
			s.logger.Printf("[ERR] yamux: aborted stream open without inflight syn semaphore")
		}
		return nil, err
	}
	return stream, nil
}

// setOpenTimeout implements a timeout for streams that are opened but not established.
// If the StreamOpenTimeout is exceeded we assume the peer is unable to ACK,
// and close the session.
// The number of running timers is bounded by the capacity of the synCh.
func (s *Session) setOpenTimeout(stream *Stream) {
	timer := time.NewTimer(s.config.StreamOpenTimeout)
	defer timer.Stop()

	select {
	case <-stream.establishCh:
		return
	case <-s.shutdownCh:
		return
	case <-timer.C:
		// Timeout reached while waiting for ACK.
		// Close the session to force connection re-establishment.
		s.logger.Printf("[ERR] yamux: aborted stream open (destination=%s): %v", s.RemoteAddr().String(), ErrTimeout.err)
		s.Close()
	}
}

// Accept is used to block until the next available stream
// is ready to be accepted.
func (s *Session) Accept() (net.Conn, error) {
	conn, err := s.AcceptStream()
	if err != nil {
		return nil, err
	}
	return conn, err
}

// AcceptStream is used to block until the next available stream
// is ready to be accepted.
func (s *Session) AcceptStream() (*Stream, error) {
	select {
	case stream := <-s.acceptCh:
		if s.IsClosed() { // hostgate: why it ended, not a stream still queued
			return nil, s.closeErr()
		}
		if err := stream.sendWindowUpdate(nil); err != nil {
			return nil, err
		}
		return stream, nil
	case <-s.shutdownCh:
		return nil, s.shutdownErr
	}
}

// AcceptStream is used to block until the next available stream
// is ready to be accepted.
//
// hostgate: ctx also bounds the wait, with Config.WriteInCaller, for the
// connection to take the stream's acknowledgement while another frame's
// write is stuck on it; the peer's open is then refused (refuseAccepted).
func (s *Session) AcceptStreamWithContext(ctx context.Context) (*Stream, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case stream := <-s.acceptCh:
		if s.IsClosed() { // hostgate: why it ended, not a stream still queued
			return nil, s.closeErr()
		}
		if err := stream.sendWindowUpdate(ctx.Done()); err != nil {
			if err == errGaveUp {
				s.refuseAccepted(stream)
				return nil, ctx.Err()
			}
			return nil, err
		}
		return stream, nil
	case <-s.shutdownCh:
		return nil, s.shutdownErr
	}
}

// hostgate: refuseAccepted resets a stream whose acknowledgement
// AcceptStreamWithContext gave up writing (nothing of it was written): it
// leaves the session, and the peer is sent a RST as for a stream past the
// backlog. The RST is queued without waiting, for the queue fills only
// behind a stuck write: with no room it is dropped, and the peer's open
// ends at its StreamOpenTimeout or with the session, which the stuck
// write's bound ends.
func (s *Session) refuseAccepted(stream *Stream) {
	stream.stateLock.Lock()
	stream.state = streamReset
	stream.stateLock.Unlock()
	stream.notifyWaiting()
	s.closeStream(stream.id)
	hdr := header(make([]byte, headerSize))
	hdr.encode(typeWindowUpdate, flagRST, stream.id, 0)
	select {
	case s.sendCh <- &sendReady{Hdr: hdr}:
		s.kickSend()
	default:
		s.logger.Printf("[WARN] yamux: no room to refuse stream %d, whose accept was given up", stream.id)
	}
}

// Close is used to close the session and all streams.
// Attempts to send a GoAway before closing the connection.
func (s *Session) Close() error {
	s.shutdownLock.Lock()
	defer s.shutdownLock.Unlock()

	if s.shutdown {
		return nil
	}
	s.shutdown = true

	s.shutdownErrLock.Lock()
	if s.shutdownErr == nil {
		s.shutdownErr = ErrSessionShutdown
	}
	s.shutdownErrLock.Unlock()

	close(s.shutdownCh)
	s.closedStart() // hostgate: AfterClose

	s.conn.Close()
	<-s.recvDoneCh

	s.streamLock.Lock()
	defer s.streamLock.Unlock()
	for _, stream := range s.streams {
		stream.forceClose()
		stream.budgetRelease() // hostgate: budget.go
	}
	if s.config.WriteInCaller {
		// hostgate: the send loop that may run (kickSend).
		s.sendMu.Lock()
		s.sendClosed = true
		run := s.sendRun
		s.sendMu.Unlock()
		if run != nil {
			<-run
		}
		return nil
	}
	<-s.sendDoneCh
	return nil
}

// hostgate: closeErr is why the closed session ended. A stream the peer
// opened and nobody accepted stays queued after the end, and
// AcceptStream handed it out, with no error (its window update, which
// would have failed, was not due), where the caller asked why the session
// ended: the gateway logged a tunnel closed for a flood as ended with
// <nil>.
func (s *Session) closeErr() error {
	s.shutdownErrLock.Lock()
	defer s.shutdownErrLock.Unlock()
	if s.shutdownErr == nil {
		return ErrSessionShutdown
	}
	return s.shutdownErr
}

// CloseErr is why the session ended, once it has (CloseChan is closed);
// nil while it lives. hostgate: the gateway tells a tunnel's callers why
// it ended, where asking meant AcceptStream.
func (s *Session) CloseErr() error {
	if !s.IsClosed() {
		return nil
	}
	return s.closeErr()
}

// exitErr is used to handle an error that is causing the
// session to terminate.
func (s *Session) exitErr(err error) {
	s.shutdownErrLock.Lock()
	if s.shutdownErr == nil {
		s.shutdownErr = err
	}
	s.shutdownErrLock.Unlock()
	s.Close()
}

// GoAway can be used to prevent accepting further
// connections. It does not close the underlying conn.
func (s *Session) GoAway() error {
	return s.waitForSend(s.goAway(goAwayNormal), nil)
}

// goAway is used to send a goAway message
func (s *Session) goAway(reason uint32) header {
	atomic.SwapInt32(&s.localGoAway, 1)
	hdr := header(make([]byte, headerSize))
	hdr.encode(typeGoAway, 0, 0, reason)
	return hdr
}

// Ping is used to measure the RTT response time
func (s *Session) Ping() (time.Duration, error) {
	return s.PingContext(context.Background())
}

// hostgate: PingContext is Ping, giving up when ctx ends; an answer that
// comes later is ignored. Ping waits for its answer up to
// ConnectionWriteTimeout, which bytestream turns off (its connection
// bounds the writes, and its keepalive the answer to its own pings), so
// only the session's end stopped it: a peer that kept the session up and
// answered nothing kept each ping's caller waiting.
func (s *Session) PingContext(ctx context.Context) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	// Get a channel for the ping
	ch := make(chan struct{})

	// Get a new ping id, mark as pending
	s.pingLock.Lock()
	id := s.pingID
	s.pingID++
	s.pings[id] = ch
	s.pingLock.Unlock()
	forget := func() { // hostgate: upstream kept it when the send failed
		s.pingLock.Lock()
		delete(s.pings, id) // Ignore it if a response comes later.
		s.pingLock.Unlock()
	}

	// Send the ping request
	hdr := header(make([]byte, headerSize))
	hdr.encode(typePing, flagSYN, 0, id)
	if err := s.waitForSendErr(hdr, nil, make(chan error, 1), ctx.Done()); err != nil {
		forget()
		if err == errGaveUp {
			return 0, ctx.Err()
		}
		return 0, err
	}

	// Wait for a response
	start := time.Now()
	timer := time.NewTimer(s.config.ConnectionWriteTimeout)
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
		forget()
		return 0, ErrTimeout
	case <-ctx.Done():
		forget()
		return 0, ctx.Err()
	case <-s.shutdownCh:
		return 0, ErrSessionShutdown
	}

	// Compute the RTT
	return time.Since(start), nil
}

// keepalive is a long running goroutine that periodically does
// a ping to keep the connection alive.
func (s *Session) keepalive() {
	for {
		select {
		case <-time.After(s.config.KeepAliveInterval):
			_, err := s.Ping()
			if err != nil {
				if err != ErrSessionShutdown {
					s.logger.Printf("[ERR] yamux: keepalive failed: %v", err)
					s.exitErr(ErrKeepAliveTimeout)
				}
				return
			}
		case <-s.shutdownCh:
			return
		}
	}
}

// waitForSendErr waits to send a header, checking for a potential shutdown
func (s *Session) waitForSend(hdr header, body []byte) error {
	errCh := make(chan error, 1)
	return s.waitForSendErr(hdr, body, errCh, nil)
}

// waitForSendErr waits to send a header with optional data, checking for a
// potential shutdown. Since there's the expectation that sends can happen
// in a timely manner, we enforce the connection write timeout here.
// hostgate: giveUp (PingContext's ctx; nil for a stream's frame) ends
// the wait with errGaveUp, the frame left to be sent or not.
func (s *Session) waitForSendErr(hdr header, body []byte, errCh chan error, giveUp <-chan struct{}) error {
	t := timerPool.Get()
	timer := t.(*time.Timer)
	timer.Reset(s.config.ConnectionWriteTimeout)
	defer func() {
		timer.Stop()
		select {
		case <-timer.C:
		default:
		}
		timerPool.Put(t)
	}()

	ready := &sendReady{Hdr: hdr, Body: body, Err: errCh}
	select {
	case s.sendCh <- ready:
		s.kickSend()
	case <-s.shutdownCh:
		return ErrSessionShutdown
	case <-timer.C:
		return ErrConnectionWriteTimeout
	case <-giveUp:
		return errGaveUp
	}

	bodyCopy := func() {
		if body == nil {
			return // A nil body is ignored.
		}

		// In the event of session shutdown or connection write timeout,
		// we need to prevent `send` from reading the body buffer after
		// returning from this function since the caller may re-use the
		// underlying array.
		ready.mu.Lock()
		defer ready.mu.Unlock()

		if ready.Body == nil {
			return // Body was already copied in `send`.
		}
		newBody := make([]byte, len(body))
		copy(newBody, body)
		ready.Body = newBody
	}

	select {
	case err := <-errCh:
		return err
	case <-s.shutdownCh:
		bodyCopy()
		return ErrSessionShutdown
	case <-timer.C:
		bodyCopy()
		return ErrConnectionWriteTimeout
	case <-giveUp:
		bodyCopy()
		return errGaveUp
	}
}

// hostgate: sendStreamFrame sends a stream's frame (data, window update,
// FIN): in the caller's goroutine with Config.WriteInCaller, else through
// the send loop. Session frames (Ping, GoAway) always go through the send
// loop: a Ping's failed write would otherwise close the session from the
// goroutine that the connection's Close may be waiting for (bytestream's
// keepalive tick). data is the stream whose data frame this is, nil for a
// window update or FIN.
//
// giveUp, nil but for an open's SYN (OpenStreamContext), ends a wait for
// the write lock with errGaveUp, nothing written.
func (s *Session) sendStreamFrame(hdr header, body []byte, errCh chan error, data *Stream, giveUp <-chan struct{}) error {
	if s.config.WriteInCaller {
		return s.writeInCaller(hdr, body, data, giveUp)
	}
	return s.waitForSendErr(hdr, body, errCh, nil)
}

// hostgate: writeInCaller writes a frame in the caller's goroutine
// (Config.WriteInCaller). A failed write ends the session, as a failed
// write in the send loop does. While another frame is being written (the
// connection may be full: a peer that stopped reading), a data frame
// waits no longer than its stream's write deadline, Close or reset, and a
// window update or FIN goes to the send loop instead of waiting; a frame
// once started is written whole, or the session ends.
func (s *Session) writeInCaller(hdr header, body []byte, data *Stream, giveUp <-chan struct{}) error {
	select {
	case s.writeTok <- struct{}{}:
	default:
		switch {
		case data == nil && handOff(hdr.Flags()) && s.queueFrame(hdr):
			return nil
		case data != nil && hdr.Flags() == 0:
			// (A data frame with a SYN or ACK, which sendFlags took as
			// sent, is not given up; a stream's first frame is a window
			// update anyway.)
			if err := data.waitWriteTok(); err != nil {
				return err
			}
		default:
			select {
			case s.writeTok <- struct{}{}:
			case <-s.shutdownCh:
				return ErrSessionShutdown
			case <-giveUp:
				return errGaveUp
			}
		}
	}
	select {
	case <-s.shutdownCh:
		<-s.writeTok
		return ErrSessionShutdown
	default:
	}
	_, err := s.conn.Write(hdr)
	if err == nil && len(body) > 0 {
		_, err = s.conn.Write(body)
	}
	<-s.writeTok
	if err != nil {
		// Close waits for the send loop, which may wait for writeTok:
		// end the session only once it is released.
		s.logger.Printf("[ERR] yamux: Failed to write frame: %v", err)
		s.exitErr(err)
		return err
	}
	return nil
}

// hostgate: handOff says whether a stream's window update or FIN with
// these flags may be written after frames its caller writes later: the
// send loop writes it once the connection is free, and the stream's own
// later frames may go first. A SYN must precede everything of its stream
// (the peer drops frames of a stream it does not know), and an ACK
// without FIN precedes the accepted stream's data; a FIN ends the stream's
// data (a Write waiting then gives up: waitWriteTok), and the order of
// window updates does not matter.
func handOff(flags uint16) bool {
	if flags&flagSYN != 0 {
		return false
	}
	return flags&flagACK == 0 || flags&flagFIN != 0
}

// hostgate: queueFrame hands a copy of hdr, a frame without body, to the
// send loop, unless its queue is half full: the rest is kept for the
// receive loop's frames (a refusal, a go-away), for which it waits, and
// while it waits no stream receives anything.
func (s *Session) queueFrame(hdr header) bool {
	if len(s.sendCh) >= cap(s.sendCh)/2 {
		return false
	}
	h := header(make([]byte, headerSize))
	copy(h, hdr)
	select {
	case s.sendCh <- &sendReady{Hdr: h}:
		s.kickSend()
		return true
	default:
		return false
	}
}

// sendNoWait does a send without waiting. Since there's the expectation that
// the send happens right here, we enforce the connection write timeout if we
// can't queue the header to be sent.
func (s *Session) sendNoWait(hdr header) error {
	t := timerPool.Get()
	timer := t.(*time.Timer)
	timer.Reset(s.config.ConnectionWriteTimeout)
	defer func() {
		timer.Stop()
		select {
		case <-timer.C:
		default:
		}
		timerPool.Put(t)
	}()

	select {
	case s.sendCh <- &sendReady{Hdr: hdr}:
		s.kickSend()
		return nil
	case <-s.shutdownCh:
		return ErrSessionShutdown
	case <-timer.C:
		return ErrConnectionWriteTimeout
	}
}

// send is a long running goroutine that sends data
func (s *Session) send() {
	if err := s.sendLoop(); err != nil {
		s.exitErr(err)
	}
}

// hostgate: kickSend starts a send loop for a frame just queued, unless
// one runs (Config.WriteInCaller; the permanent one otherwise).
func (s *Session) kickSend() {
	if !s.config.WriteInCaller {
		return
	}
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if s.sendRunning || s.sendClosed {
		return
	}
	s.sendRunning = true
	run := make(chan struct{})
	s.sendRun = run
	go s.sendQueued(run)
}

// hostgate: sendQueued is a send loop started by kickSend: it writes the
// queued frames and ends when none waits. A frame queued as it finds the
// queue empty is seen: kickSend starts no loop while this one runs, and
// this one looks at the queue again, under sendMu, before it ends.
func (s *Session) sendQueued(run chan struct{}) {
	var bodyBuf bytes.Buffer
	for {
		err := s.sendFrames(&bodyBuf, false)
		shut := false
		select {
		case <-s.shutdownCh: // frames left are their senders' to fail
			shut = true
		default:
		}
		s.sendMu.Lock()
		if err != nil || shut || s.sendClosed || len(s.sendCh) == 0 {
			s.sendRunning = false
			s.sendMu.Unlock()
			close(run) // before exitErr, whose Close waits for it
			if err != nil {
				s.exitErr(err)
			}
			return
		}
		s.sendMu.Unlock()
	}
}

func (s *Session) sendLoop() error {
	defer close(s.sendDoneCh)
	var bodyBuf bytes.Buffer
	return s.sendFrames(&bodyBuf, true)
}

// sendFrames writes the frames queued on sendCh until the session shuts
// down or a write fails; hostgate: or, unless wait, until none is queued.
func (s *Session) sendFrames(bodyBuf *bytes.Buffer, wait bool) error {
	for {
		bodyBuf.Reset()
		if !wait && len(s.sendCh) == 0 {
			return nil
		}

		select {
		case ready := <-s.sendCh:
			// hostgate: behind a stream's write stuck on the connection,
			// the session's Close (which waits for this loop) must not
			// wait too: the frames left are their senders' to fail.
			select {
			case s.writeTok <- struct{}{}:
			default:
				select {
				case s.writeTok <- struct{}{}:
				case <-s.shutdownCh:
					asyncSendErr(ready.Err, ErrSessionShutdown)
					return nil
				}
			}
			// Send a header if ready
			if ready.Hdr != nil {
				_, err := s.conn.Write(ready.Hdr)
				if err != nil {
					<-s.writeTok
					s.logger.Printf("[ERR] yamux: Failed to write header: %v", err)
					asyncSendErr(ready.Err, err)
					return err
				}
			}

			ready.mu.Lock()
			if ready.Body != nil {
				// Copy the body into the buffer to avoid
				// holding a mutex lock during the write.
				_, err := bodyBuf.Write(ready.Body)
				if err != nil {
					ready.Body = nil
					ready.mu.Unlock()
					<-s.writeTok
					s.logger.Printf("[ERR] yamux: Failed to copy body into buffer: %v", err)
					asyncSendErr(ready.Err, err)
					return err
				}
				ready.Body = nil
			}
			ready.mu.Unlock()

			if bodyBuf.Len() > 0 {
				// Send data from a body if given
				_, err := s.conn.Write(bodyBuf.Bytes())
				if err != nil {
					<-s.writeTok
					s.logger.Printf("[ERR] yamux: Failed to write body: %v", err)
					asyncSendErr(ready.Err, err)
					return err
				}
			}

			<-s.writeTok
			// No error, successful send
			asyncSendErr(ready.Err, nil)
		case <-s.shutdownCh:
			return nil
		}
	}
}

// recv is a long running goroutine that accepts new data
func (s *Session) recv() {
	if err := s.recvLoop(); err != nil {
		s.exitErr(err)
	}
}

// Ensure that the index of the handler (typeData/typeWindowUpdate/etc) matches the message type
var (
	handlers = []func(*Session, header) error{
		typeData:         (*Session).handleStreamMessage,
		typeWindowUpdate: (*Session).handleStreamMessage,
		typePing:         (*Session).handlePing,
		typeGoAway:       (*Session).handleGoAway,
	}
)

// recvLoop continues to receive data until a fatal error is encountered
func (s *Session) recvLoop() error {
	defer close(s.recvDoneCh)
	hdr := header(make([]byte, headerSize))
	for {
		// Read the header
		if _, err := io.ReadFull(s.bufRead, hdr); err != nil {
			if err != io.EOF && !strings.Contains(err.Error(), "closed") && !strings.Contains(err.Error(), "reset by peer") {
				s.logger.Printf("[ERR] yamux: Failed to read header: %v", err)
			}
			return err
		}

		// Verify the version
		if hdr.Version() != protoVersion {
			s.logger.Printf("[ERR] yamux: Invalid protocol version: %d", hdr.Version())
			return ErrInvalidVersion
		}

		mt := hdr.MsgType()
		if mt < typeData || mt > typeGoAway {
			return ErrInvalidMsgType
		}

		if err := handlers[mt](s, hdr); err != nil {
			return err
		}
	}
}

// handleStreamMessage handles either a data or window update frame
func (s *Session) handleStreamMessage(hdr header) error {
	// Check for a new stream creation
	id := hdr.StreamID()
	flags := hdr.Flags()
	if flags&flagSYN == flagSYN {
		if err := s.incomingStream(id); err != nil {
			return err
		}
	}

	// Get the stream
	s.streamLock.Lock()
	stream := s.streams[id]
	s.streamLock.Unlock()

	// If we do not have a stream, likely we sent a RST
	if stream == nil {
		// Drain any data on the wire
		if hdr.MsgType() == typeData && hdr.Length() > 0 {
			s.logger.Printf("[WARN] yamux: Discarding data for stream: %d", id)
			if _, err := io.CopyN(io.Discard, s.bufRead, int64(hdr.Length())); err != nil {
				s.logger.Printf("[ERR] yamux: Failed to discard data: %v", err)
				return nil
			}
		} else {
			s.logger.Printf("[WARN] yamux: frame for missing stream: %v", hdr)
		}
		return nil
	}

	// Check if this is a window update
	if hdr.MsgType() == typeWindowUpdate {
		if err := stream.incrSendWindow(hdr, flags); err != nil {
			if sendErr := s.sendNoWait(s.goAway(goAwayProtoErr)); sendErr != nil {
				s.logger.Printf("[WARN] yamux: failed to send go away: %v", sendErr)
			}
			return err
		}
		return nil
	}

	// Read the new data
	if err := stream.readData(hdr, flags, s.bufRead); err != nil {
		if sendErr := s.sendNoWait(s.goAway(goAwayProtoErr)); sendErr != nil {
			s.logger.Printf("[WARN] yamux: failed to send go away: %v", sendErr)
		}
		return err
	}
	return nil
}

// handlePing is invokde for a typePing frame
func (s *Session) handlePing(hdr header) error {
	flags := hdr.Flags()
	pingID := hdr.Length()

	// Check if this is a query, respond back in a separate context so we
	// don't interfere with the receiving thread blocking for the write.
	if flags&flagSYN == flagSYN {
		// hostgate: at most maxPingReplies answers wait to be sent at once.
		// Upstream starts a goroutine per ping, and a peer that pings
		// without reading (writes to it stall) made one each, without
		// bound, until the write timeout: 136,000 goroutines in 3 s on
		// loopback. The pings past the bound go unanswered; an honest
		// peer has one or two out.
		if s.pingReplies.Add(1) > maxPingReplies {
			s.pingReplies.Add(-1)
			return nil
		}
		go func() {
			defer s.pingReplies.Add(-1)
			hdr := header(make([]byte, headerSize))
			hdr.encode(typePing, flagACK, 0, pingID)
			if err := s.sendNoWait(hdr); err != nil {
				s.logger.Printf("[WARN] yamux: failed to send ping reply: %v", err)
			}
		}()
		return nil
	}

	// Handle a response
	s.pingLock.Lock()
	ch := s.pings[pingID]
	if ch != nil {
		delete(s.pings, pingID)
		close(ch)
	}
	s.pingLock.Unlock()
	return nil
}

// handleGoAway is invokde for a typeGoAway frame
func (s *Session) handleGoAway(hdr header) error {
	code := hdr.Length()
	switch code {
	case goAwayNormal:
		atomic.SwapInt32(&s.remoteGoAway, 1)
	case goAwayProtoErr:
		s.logger.Printf("[ERR] yamux: received protocol error go away")
		return fmt.Errorf("yamux protocol error")
	case goAwayInternalErr:
		s.logger.Printf("[ERR] yamux: received internal error go away")
		return fmt.Errorf("remote yamux internal error")
	default:
		s.logger.Printf("[ERR] yamux: received unexpected go away")
		return fmt.Errorf("unexpected go away received")
	}
	return nil
}

// incomingStream is used to create a new incoming stream
func (s *Session) incomingStream(id uint32) error {
	// Reject immediately if we are doing a go away
	if atomic.LoadInt32(&s.localGoAway) == 1 {
		hdr := header(make([]byte, headerSize))
		hdr.encode(typeWindowUpdate, flagRST, id, 0)
		return s.sendNoWait(hdr)
	}

	// hostgate: a stream id of this side's parity (or 0, the session's)
	// is not the peer's to open. Accepted, it took the id of the next
	// stream this side opened, which then replaced it in s.streams: the
	// peer's stream was released by nothing, and what it had received
	// stayed on the RecvBudget's held for good.
	if id == 0 || id%2 == atomic.LoadUint32(&s.nextStreamID)%2 {
		s.logger.Printf("[ERR] yamux: peer opened stream %d, an id of ours", id)
		if sendErr := s.sendNoWait(s.goAway(goAwayProtoErr)); sendErr != nil {
			s.logger.Printf("[WARN] yamux: failed to send go away: %v", sendErr)
		}
		return ErrStreamIDNotPeers
	}

	// Allocate a new stream
	stream := newStream(s, id, streamSYNReceived)

	// hostgate: the refusals below are queued with streamLock released.
	// sendNoWait waits for room in the send loop's queue, which a write
	// stuck on the connection (a peer that stopped reading) keeps full
	// until the connection's write bound ends the session; holding the
	// lock meanwhile held every open, every stream's end and NumStreams
	// too, past their callers' deadlines.
	s.streamLock.Lock()

	// Check if stream already exists
	if _, ok := s.streams[id]; ok {
		s.streamLock.Unlock()
		s.logger.Printf("[ERR] yamux: duplicate stream declared")
		if sendErr := s.sendNoWait(s.goAway(goAwayProtoErr)); sendErr != nil {
			s.logger.Printf("[WARN] yamux: failed to send go away: %v", sendErr)
		}
		return ErrDuplicateStream
	}

	// Register the stream
	s.streams[id] = stream

	// Check if we've exceeded the backlog
	select {
	case s.acceptCh <- stream:
		s.streamLock.Unlock()
		return nil
	default:
		// Backlog exceeded! RST the stream
		delete(s.streams, id)
		s.streamLock.Unlock()
		s.logger.Printf("[WARN] yamux: backlog exceeded, forcing connection reset")
		hdr := header(make([]byte, headerSize))
		hdr.encode(typeWindowUpdate, flagRST, id, 0)
		return s.sendNoWait(hdr)
	}
}

// closeStream is used to close a stream once both sides have
// issued a close. If there was an in-flight SYN and the stream
// was not yet established, then this will give the credit back.
func (s *Session) closeStream(id uint32) {
	s.streamLock.Lock()
	if _, ok := s.inflight[id]; ok {
		select {
		case <-s.synCh:
		default:
			s.logger.Printf("[ERR] yamux: SYN tracking out of sync")
		}
		delete(s.inflight, id) // hostgate: upstream kept it for good
	}
	st := s.streams[id]
	delete(s.streams, id)
	s.streamLock.Unlock()
	if st != nil {
		st.budgetRelease() // hostgate: budget.go
	}
}

// establishStream is used to mark a stream that was in the
// SYN Sent state as established.
func (s *Session) establishStream(id uint32) {
	s.streamLock.Lock()
	if _, ok := s.inflight[id]; ok {
		delete(s.inflight, id)
	} else {
		s.logger.Printf("[ERR] yamux: established stream without inflight SYN (no tracking entry)")
	}
	select {
	case <-s.synCh:
	default:
		s.logger.Printf("[ERR] yamux: established stream without inflight SYN (didn't have semaphore)")
	}
	s.streamLock.Unlock()
}
