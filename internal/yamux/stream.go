package yamux

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

type streamState int

const (
	streamInit streamState = iota
	streamSYNSent
	streamSYNReceived
	streamEstablished
	streamLocalClose
	streamRemoteClose
	streamClosed
	streamReset
)

// Stream is used to represent a logical stream
// within a session.
type Stream struct {
	recvWindow uint32
	sendWindow uint32

	id      uint32
	session *Session

	state     streamState
	stateLock sync.Mutex

	recvBuf  *recvRing // hostgate: a ring, not a bytes.Buffer (recvring.go)
	recvLock sync.Mutex

	controlHdr     header
	controlErr     chan error
	controlHdrLock sync.Mutex

	sendHdr  header
	sendErr  chan error
	sendLock sync.Mutex

	recvNotifyCh chan struct{}
	sendNotifyCh chan struct{}

	readDeadline  atomic.Value // time.Time
	writeDeadline atomic.Value // time.Time

	// establishCh is notified if the stream is established or being closed.
	establishCh chan struct{}

	// closeTimer is set with stateLock held to honor the StreamCloseTimeout
	// setting on Session.
	closeTimer *time.Timer

	// hostgate: ended is set by Close under Config.CloseEndsReads: the
	// stream has left the session, and frames the receive loop looked it
	// up for before that are dropped. Atomic, since readData holds
	// recvLock where Read takes stateLock first.
	ended atomic.Bool

	// hostgate: the stream's share of Config.RecvBudget (budget.go), under
	// recvLock: the window it granted beyond the initial one, and whether
	// it has given it back for good.
	budgetRes    uint32
	budgetGoal   uint32 // the window beyond the initial one it aims to keep
	budgetRecent bool   // it received data since the last budgetIdle
	budgetDone   bool
}

// newStream is used to construct a new stream within
// a given session for an ID
func newStream(session *Session, id uint32, state streamState) *Stream {
	s := &Stream{
		id:           id,
		session:      session,
		state:        state,
		controlHdr:   header(make([]byte, headerSize)),
		controlErr:   make(chan error, 1),
		sendHdr:      header(make([]byte, headerSize)),
		sendErr:      make(chan error, 1),
		recvWindow:   initialStreamWindow,
		sendWindow:   initialStreamWindow,
		recvNotifyCh: make(chan struct{}, 1),
		sendNotifyCh: make(chan struct{}, 1),
		establishCh:  make(chan struct{}, 1),
	}
	s.readDeadline.Store(time.Time{})
	s.writeDeadline.Store(time.Time{})
	return s
}

// Session returns the associated stream session
func (s *Stream) Session() *Session {
	return s.session
}

// StreamID returns the ID of this stream
func (s *Stream) StreamID() uint32 {
	return s.id
}

// Read is used to read from the stream
func (s *Stream) Read(b []byte) (n int, err error) {
	defer asyncNotify(s.recvNotifyCh)
	recvEnded := false // hostgate: seen the session's receive loop end (see WAIT)
START:

	// If the stream is closed and there's no data buffered, return EOF
	s.stateLock.Lock()
	switch s.state {
	case streamLocalClose:
		// LocalClose only prohibits further local writes. Handle reads normally.
	case streamRemoteClose:
		fallthrough
	case streamClosed:
		s.recvLock.Lock()
		if s.recvBuf == nil || s.recvBuf.Len() == 0 {
			s.recvLock.Unlock()
			s.stateLock.Unlock()
			return 0, io.EOF
		}
		s.recvLock.Unlock()
	case streamReset:
		s.stateLock.Unlock()
		return 0, ErrConnectionReset
	}
	s.stateLock.Unlock()

	// If there is no data available, block
	s.recvLock.Lock()
	if s.recvBuf == nil || s.recvBuf.Len() == 0 {
		s.recvLock.Unlock()
		goto WAIT
	}

	// Read any bytes
	n, _ = s.recvBuf.Read(b)
	if bg := s.session.config.RecvBudget; bg != nil && !s.budgetDone {
		bg.held.Add(-int64(n))
	}
	s.recvLock.Unlock()

	// Send a window update potentially
	err = s.sendWindowUpdate(nil)
	if err == ErrSessionShutdown {
		err = nil
	}
	if err != nil && s.session.config.WriteInCaller {
		// hostgate: these bytes were read. A window update that could not
		// be written has ended the session (writeInCaller), and the next
		// reads return what is still buffered, then EOF, as after any
		// session end; failing this read would lose that data.
		err = nil
	}
	return n, err

WAIT:
	var timeout <-chan time.Time
	var timer *time.Timer
	readDeadline := s.readDeadline.Load().(time.Time)
	if !readDeadline.IsZero() {
		delay := time.Until(readDeadline)
		timer = time.NewTimer(delay)
		timeout = timer.C
	}
	select {
	case <-s.session.shutdownCh:
		// hostgate: upstream went back to START, whose stream state stays
		// open until Close has closed the conn and then forceClose runs:
		// every Read blocked on the session spun at full CPU for as long as
		// that Close took (a write-behind drain, a close handshake with a
		// peer that does not answer: seconds). The receive loop still
		// delivers until it ends; once it has and nothing is buffered, the
		// stream is at its end, as forceClose would make it.
		if recvEnded {
			if timer != nil {
				timer.Stop()
			}
			return 0, io.EOF
		}
		select {
		case <-s.session.recvDoneCh:
			recvEnded = true
		case <-s.recvNotifyCh:
		case <-timeout:
			return 0, ErrTimeout
		}
	case <-s.recvNotifyCh:
	case <-timeout:
		return 0, ErrTimeout
	}
	if timer != nil {
		if !timer.Stop() {
			<-timeout
		}
	}
	goto START
}

// Write is used to write to the stream
func (s *Stream) Write(b []byte) (n int, err error) {
	s.sendLock.Lock()
	defer s.sendLock.Unlock()
	total := 0
	for total < len(b) {
		n, err := s.write(b[total:])
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// write is used to write to the stream, may return on
// a short write.
func (s *Stream) write(b []byte) (n int, err error) {
	var flags uint16
	var max uint32
	var body []byte
START:
	s.stateLock.Lock()
	switch s.state {
	case streamLocalClose:
		fallthrough
	case streamClosed:
		s.stateLock.Unlock()
		return 0, ErrStreamClosed
	case streamReset:
		s.stateLock.Unlock()
		return 0, ErrConnectionReset
	}
	s.stateLock.Unlock()

	// If there is no data available, block
	window := atomic.LoadUint32(&s.sendWindow)
	if window == 0 {
		goto WAIT
	}

	// Determine the flags if any
	flags = s.sendFlags()

	// Send up to our send window
	max = min(window, uint32(len(b)))
	body = b[:max]

	// Send the header
	s.sendHdr.encode(typeData, flags, s.id, max)
	if err = s.session.sendStreamFrame(s.sendHdr, body, s.sendErr, s, nil); err != nil {
		if errors.Is(err, ErrSessionShutdown) || errors.Is(err, ErrConnectionWriteTimeout) {
			// Message left in ready queue, header re-use is unsafe.
			s.sendHdr = header(make([]byte, headerSize))
		}
		return 0, err
	}

	// Reduce our send window
	atomic.AddUint32(&s.sendWindow, ^uint32(max-1))

	// Unlock
	return int(max), err

WAIT:
	var timeout <-chan time.Time
	var timer *time.Timer
	writeDeadline := s.writeDeadline.Load().(time.Time)
	if !writeDeadline.IsZero() {
		delay := time.Until(writeDeadline)
		timer = time.NewTimer(delay)
		timeout = timer.C
	}
	select {
	case <-s.session.shutdownCh:
		// hostgate: no frame goes out once the session is shut down
		// (writeInCaller says so too); going back to START spun until
		// forceClose, as in Read.
		if timer != nil {
			timer.Stop()
		}
		return 0, ErrSessionShutdown
	case <-s.sendNotifyCh:
	case <-timeout:
		return 0, ErrTimeout
	}
	if timer != nil {
		if !timer.Stop() {
			<-timeout
		}
	}
	goto START
}

// hostgate: waitWriteTok waits for the session's write lock for one of
// the stream's data frames while another frame holds it, which it may for
// as long as the connection's own write bound (a peer that stopped
// reading): no longer than the stream's write deadline (ErrTimeout), its
// Close or reset, or the session's end. Nothing of the frame is written
// then. A Close while it waits has sent or queued the FIN, which no data
// may follow, so the state is looked at again once the lock is held.
func (s *Stream) waitWriteTok() error {
	sess := s.session
	for {
		var timeout <-chan time.Time
		var timer *time.Timer
		if d := s.writeDeadline.Load().(time.Time); !d.IsZero() {
			timer = time.NewTimer(time.Until(d))
			timeout = timer.C
		}
		var err error
		select {
		case sess.writeTok <- struct{}{}:
			if err = s.writable(); err != nil {
				<-sess.writeTok
			}
			if timer != nil {
				timer.Stop()
			}
			return err
		case <-sess.shutdownCh:
			err = ErrSessionShutdown
		case <-timeout:
			return ErrTimeout
		case <-s.sendNotifyCh: // a Close, a reset, a new deadline, or more window
			err = s.writable()
		}
		if timer != nil {
			timer.Stop()
		}
		if err != nil {
			return err
		}
	}
}

// hostgate: writable is write's check of the stream's state; and a
// stream that closeBoth ended (it sets the state only after its FIN) is
// closed.
func (s *Stream) writable() error {
	s.stateLock.Lock()
	defer s.stateLock.Unlock()
	switch s.state {
	case streamLocalClose, streamClosed:
		return ErrStreamClosed
	case streamReset:
		return ErrConnectionReset
	}
	if s.ended.Load() {
		return ErrStreamClosed
	}
	return nil
}

// sendFlags determines any flags that are appropriate
// based on the current stream state
func (s *Stream) sendFlags() uint16 {
	s.stateLock.Lock()
	defer s.stateLock.Unlock()
	var flags uint16
	switch s.state {
	case streamInit:
		flags |= flagSYN
		s.state = streamSYNSent
	case streamSYNReceived:
		flags |= flagACK
		s.state = streamEstablished
	}
	return flags
}

// sendWindowUpdate potentially sends a window update enabling
// further writes to take place. Must be invoked with the lock.
// hostgate: giveUp is sendStreamFrame's, nil but for an open's SYN.
func (s *Stream) sendWindowUpdate(giveUp <-chan struct{}) error {
	s.controlHdrLock.Lock()
	defer s.controlHdrLock.Unlock()

	// Determine the flags if any. hostgate: before recvLock, not under
	// it as upstream did: a Read at its start holds the state lock while
	// it takes recvLock (a stream the peer closed), so two Reads at once
	// deadlocked, and the receive loop with them at its next frame for the
	// stream (processFlags).
	flags := s.sendFlags()

	// Determine the delta update
	max := s.session.config.MaxStreamWindowSize
	var bufLen uint32
	s.recvLock.Lock()
	if s.recvBuf != nil {
		bufLen = uint32(s.recvBuf.Len())
	}
	if b := s.session.config.RecvBudget; b != nil {
		max = s.budgetWindow(b, max, bufLen)
	}
	delta := (max - bufLen) - s.recvWindow

	// Check if we can omit the update. One that grants nothing, which a
	// budgeted stream that ended with its window used up would send (max
	// then near 0), is a frame the peer counts as misuse.
	if (delta < max/2 || delta == 0) && flags == 0 {
		if b := s.session.config.RecvBudget; b != nil && !s.budgetDone {
			s.budgetTrim(b, bufLen) // what budgetWindow took is not granted
		}
		s.recvLock.Unlock()
		return nil
	}

	// Update our window
	s.recvWindow += delta
	s.recvLock.Unlock()

	// Send the header
	s.controlHdr.encode(typeWindowUpdate, flags, s.id, delta)
	if err := s.session.sendStreamFrame(s.controlHdr, nil, s.controlErr, nil, giveUp); err != nil {
		if errors.Is(err, ErrSessionShutdown) || errors.Is(err, ErrConnectionWriteTimeout) {
			// Message left in ready queue, header re-use is unsafe.
			s.controlHdr = header(make([]byte, headerSize))
		}
		return err
	}
	return nil
}

// sendClose is used to send a FIN
func (s *Stream) sendClose() error {
	s.controlHdrLock.Lock()
	defer s.controlHdrLock.Unlock()

	flags := s.sendFlags()
	flags |= flagFIN
	s.controlHdr.encode(typeWindowUpdate, flags, s.id, 0)
	if err := s.session.sendStreamFrame(s.controlHdr, nil, s.controlErr, nil, nil); err != nil {
		if errors.Is(err, ErrSessionShutdown) || errors.Is(err, ErrConnectionWriteTimeout) {
			// Message left in ready queue, header re-use is unsafe.
			s.controlHdr = header(make([]byte, headerSize))
		}
		return err
	}
	return nil
}

// Close is used to close the stream
func (s *Stream) Close() error {
	if s.session.config.CloseEndsReads {
		return s.closeBoth()
	}
	closeStream := false
	s.stateLock.Lock()
	switch s.state {
	// Opened means we need to signal a close
	case streamSYNSent:
		fallthrough
	case streamSYNReceived:
		fallthrough
	case streamEstablished:
		s.state = streamLocalClose
		goto SEND_CLOSE

	case streamLocalClose:
	case streamRemoteClose:
		s.state = streamClosed
		closeStream = true
		goto SEND_CLOSE

	case streamClosed:
	case streamReset:
	default:
		panic("unhandled state")
	}
	s.stateLock.Unlock()
	return nil
SEND_CLOSE:
	// This shouldn't happen (the more realistic scenario to cancel the
	// timer is via processFlags) but just in case this ever happens, we
	// cancel the timer to prevent dangling timers.
	if s.closeTimer != nil {
		s.closeTimer.Stop()
		s.closeTimer = nil
	}

	// If we have a StreamCloseTimeout set we start the timeout timer.
	// We do this only if we're not already closing the stream since that
	// means this was a graceful close.
	//
	// This prevents memory leaks if one side (this side) closes and the
	// remote side poorly behaves and never responds with a FIN to complete
	// the close. After the specified timeout, we clean our resources up no
	// matter what.
	if !closeStream && s.session.config.StreamCloseTimeout > 0 {
		s.closeTimer = time.AfterFunc(
			s.session.config.StreamCloseTimeout, s.closeTimeout)
	}

	s.stateLock.Unlock()
	s.sendClose()
	s.notifyWaiting()
	if closeStream {
		s.session.closeStream(s.id)
	}
	return nil
}

// hostgate: closeBoth is Close under Config.CloseEndsReads: a FIN for the
// peer (unless the stream was reset or already closed), and the stream ends
// both ways and leaves the session now, its unread bytes dropped.
func (s *Stream) closeBoth() error {
	s.stateLock.Lock()
	if s.ended.Load() {
		s.stateLock.Unlock()
		return nil
	}
	s.ended.Store(true)
	fin := false
	switch s.state {
	case streamSYNSent, streamSYNReceived, streamEstablished, streamRemoteClose:
		fin = true
	}
	if s.closeTimer != nil {
		s.closeTimer.Stop()
		s.closeTimer = nil
	}
	s.stateLock.Unlock()
	if fin {
		_ = s.sendClose() // with the ACK a stream not yet accepted owes
	}
	s.stateLock.Lock()
	if s.state != streamReset {
		s.state = streamClosed
	}
	s.stateLock.Unlock()
	s.budgetRelease() // before the unread bytes go: budget.go counts them
	s.recvLock.Lock()
	s.recvBuf = nil
	s.recvLock.Unlock()
	s.notifyWaiting()
	s.session.closeStream(s.id)
	return nil
}

// closeTimeout is called after StreamCloseTimeout during a close to
// close this stream.
func (s *Stream) closeTimeout() {
	// Close our side forcibly
	s.forceClose()

	// Free the stream from the session map
	s.session.closeStream(s.id)

	// Send a RST so the remote side closes too.
	s.sendLock.Lock()
	defer s.sendLock.Unlock()
	hdr := header(make([]byte, headerSize))
	hdr.encode(typeWindowUpdate, flagRST, s.id, 0)
	_ = s.session.sendNoWait(hdr)
}

// forceClose is used for when the session is exiting
func (s *Stream) forceClose() {
	s.stateLock.Lock()
	s.state = streamClosed
	s.stateLock.Unlock()
	s.notifyWaiting()
}

// processFlags is used to update the state of the stream
// based on set flags, if any. Lock must be held
func (s *Stream) processFlags(flags uint16) error {
	// Close the stream without holding the state lock. hostgate: deferred
	// before the lock's, so that it runs after the unlock, as upstream's
	// comment meant and its order did not do. closeStream's budgetRelease
	// takes recvLock, which sendWindowUpdate holds while it takes the
	// state lock (sendFlags): a peer's RST or FIN arriving as a stream was
	// accepted deadlocked the receive loop, and with it the whole session.
	closeStream := false
	var closeTimer *time.Timer
	defer func() {
		if closeStream {
			if closeTimer != nil {
				// Stop our close timeout timer since we gracefully closed
				closeTimer.Stop()
			}

			s.session.closeStream(s.id)
		}
	}()
	s.stateLock.Lock()
	defer s.stateLock.Unlock()
	closeTimer = s.closeTimer
	if s.ended.Load() {
		// hostgate: closed both ways and gone from the session (its SYN
		// credit given back): a FIN or ACK the peer sent meanwhile is no
		// protocol error, and no longer concerns anyone.
		return nil
	}

	if flags&flagACK == flagACK {
		if s.state == streamSYNSent {
			s.state = streamEstablished
		}
		asyncNotify(s.establishCh)
		s.session.establishStream(s.id)
	}
	if flags&flagFIN == flagFIN {
		switch s.state {
		case streamSYNSent:
			fallthrough
		case streamSYNReceived:
			fallthrough
		case streamEstablished:
			s.state = streamRemoteClose
			s.notifyWaiting()
		case streamLocalClose:
			s.state = streamClosed
			closeStream = true
			s.notifyWaiting()
		default:
			s.session.logger.Printf("[ERR] yamux: unexpected FIN flag in state %d", s.state)
			return ErrUnexpectedFlag
		}
	}
	if flags&flagRST == flagRST {
		s.state = streamReset
		closeStream = true
		s.notifyWaiting()
	}
	return nil
}

// notifyWaiting notifies all the waiting channels
func (s *Stream) notifyWaiting() {
	asyncNotify(s.recvNotifyCh)
	asyncNotify(s.sendNotifyCh)
	asyncNotify(s.establishCh)
}

// incrSendWindow updates the size of our send window
func (s *Stream) incrSendWindow(hdr header, flags uint16) error {
	if err := s.processFlags(flags); err != nil {
		return err
	}

	// Increase window, unblock a sender
	atomic.AddUint32(&s.sendWindow, hdr.Length())
	asyncNotify(s.sendNotifyCh)
	return nil
}

// readData is used to handle a data frame
func (s *Stream) readData(hdr header, flags uint16, conn io.Reader) error {
	if err := s.processFlags(flags); err != nil {
		return err
	}

	// Check that our recv window is not exceeded
	length := hdr.Length()
	if length == 0 {
		return nil
	}

	// Copy into buffer
	s.recvLock.Lock()

	if length > s.recvWindow {
		s.session.logger.Printf("[ERR] yamux: receive window exceeded (stream: %d, remain: %d, recv: %d)", s.id, s.recvWindow, length)
		s.recvLock.Unlock()
		return ErrRecvWindowExceeded
	}

	if s.ended.Load() {
		// hostgate: nobody reads an ended stream: drop the bytes.
		s.recvWindow -= length
		s.recvLock.Unlock()
		if _, err := io.Copy(io.Discard, &io.LimitedReader{R: conn, N: int64(length)}); err != nil {
			return err
		}
		return nil
	}

	if s.recvBuf == nil {
		// Allocate the receive buffer just-in-time to fit the full data frame.
		// This way we can read in the whole packet without further allocations.
		s.recvBuf = newRecvRing(int(length))
	}
	copiedLength, err := s.recvBuf.fill(conn, int(length))

	// Decrement the receive window. hostgate: before the error check, for
	// the start of a frame the conn cut short is in the ring too, and
	// Read and budgetRelease take it off held: uncounted, every tunnel
	// that ended in the middle of a frame left the shared budget's held
	// that much lower, for good (the gateway's relay_held_bytes drifted
	// below what its relays hold, and below zero).
	s.recvWindow -= uint32(copiedLength)
	if b := s.session.config.RecvBudget; b != nil && !s.budgetDone {
		b.held.Add(int64(copiedLength))
		s.budgetRecent = true
	}
	if err != nil {
		s.session.logger.Printf("[ERR] yamux: Failed to read stream data: %v", err)
		s.recvLock.Unlock()
		return err
	}
	s.recvLock.Unlock()

	// Unblock any readers
	asyncNotify(s.recvNotifyCh)
	return nil
}

// SetDeadline sets the read and write deadlines
func (s *Stream) SetDeadline(t time.Time) error {
	if err := s.SetReadDeadline(t); err != nil {
		return err
	}
	if err := s.SetWriteDeadline(t); err != nil {
		return err
	}
	return nil
}

// SetReadDeadline sets the deadline for blocked and future Read calls.
func (s *Stream) SetReadDeadline(t time.Time) error {
	s.readDeadline.Store(t)
	asyncNotify(s.recvNotifyCh)
	return nil
}

// SetWriteDeadline sets the deadline for blocked and future Write calls
func (s *Stream) SetWriteDeadline(t time.Time) error {
	s.writeDeadline.Store(t)
	asyncNotify(s.sendNotifyCh)
	return nil
}

// Shrink is used to compact the amount of buffers utilized
// This is useful when using Yamux in a connection pool to reduce
// the idle memory utilization.
func (s *Stream) Shrink() {
	s.recvLock.Lock()
	if s.recvBuf != nil && s.recvBuf.Len() == 0 {
		s.recvBuf = nil
	}
	if s.session.config.RecvBudget != nil {
		s.budgetIdle()
	}
	s.recvLock.Unlock()
}

// hostgate: SessionDone is the stream's session's CloseChan. The session
// closes it before it ends its streams, so a Read that returns EOF because
// the session ended finds it closed: the gateway's relay tells a caller
// that the host's agent went, not that the stream merely ended.
func (s *Stream) SessionDone() <-chan struct{} { return s.session.CloseChan() }
