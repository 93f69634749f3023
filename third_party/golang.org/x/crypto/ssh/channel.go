// Copyright 2011 The Go Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package ssh

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"sync"
	"sync/atomic"
	"time"
)

const (
	minPacketLength = 9
	// channelMaxPacket contains the maximum number of bytes that will be
	// sent in a single packet. As per RFC 4253, section 6.1, 32k is also
	// the minimum.
	channelMaxPacket = 1 << 15
	// hostgate: 8 MiB, four times OpenSSH's 2 MiB. A channel through the
	// gateway crosses three processes, and at 2 MiB the window ran out
	// before the bytes in flight filled them (see HOSTGATE.md).
	channelWindowSize = 256 * channelMaxPacket
	// hostgate: the window a channel starts with, 1 MiB. It grows to
	// channelWindowSize as the program reads (adjustWindow), so a
	// channel whose program does not read holds at most this much of
	// what its peer sends, not 8 MiB (see HOSTGATE.md).
	channelInitialWindow = 32 * channelMaxPacket
)

// NewChannel represents an incoming request to a channel. It must either be
// accepted for use by calling Accept, or rejected by calling Reject.
type NewChannel interface {
	// Accept accepts the channel creation request. It returns the Channel
	// and a Go channel containing SSH requests. The Go channel must be
	// serviced otherwise the Channel will hang.
	Accept() (Channel, <-chan *Request, error)

	// Reject rejects the channel creation request. After calling
	// this, no other methods on the Channel may be called.
	Reject(reason RejectionReason, message string) error

	// ChannelType returns the type of the channel, as supplied by the
	// client.
	ChannelType() string

	// ExtraData returns the arbitrary payload for this channel, as supplied
	// by the client. This data is specific to the channel type.
	ExtraData() []byte
}

// A Channel is an ordered, reliable, flow-controlled, duplex stream
// that is multiplexed over an SSH connection.
type Channel interface {
	// Read reads up to len(data) bytes from the channel.
	Read(data []byte) (int, error)

	// Write writes len(data) bytes to the channel.
	//
	// hostgate: after CloseWrite, Write (and a write to Stderr) sends
	// nothing and returns ErrWriteAfterCloseWrite, which wraps
	// io.ErrClosedPipe, as a TCP conn's Write fails after its CloseWrite;
	// upstream returned io.EOF, which io.Copy's caller takes for a clean
	// end. A Write waiting for window when CloseWrite is called returns
	// the bytes it sent and that error. After Close, or once the peer has
	// closed the channel, Write returns io.EOF. Writes from several
	// goroutines go one after another, each whole.
	Write(data []byte) (int, error)

	// Close signals end of channel use. No data may be sent after this
	// call.
	Close() error

	// CloseWrite signals the end of sending in-band
	// data. Requests may still be sent, and the other side may
	// still send data.
	//
	// hostgate: one EOF goes to the peer however often it is called: a
	// second CloseWrite is a no-op, as a second shutdown(SHUT_WR) is;
	// upstream sent an EOF per call.
	CloseWrite() error

	// SendRequest sends a channel request.  If wantReply is true,
	// it will wait for a reply and return the result as a
	// boolean, otherwise the return value will be false. Channel
	// requests are out-of-band messages so they may be sent even
	// if the data stream is closed or blocked by flow control.
	// If the channel is closed before a reply is returned, io.EOF
	// is returned.
	SendRequest(name string, wantReply bool, payload []byte) (bool, error)

	// Stderr returns an io.ReadWriter that writes to this channel
	// with the extended data type set to stderr. Stderr may
	// safely be read and written from a different goroutine than
	// Read and Write respectively.
	Stderr() io.ReadWriter
}

// Request is a request sent outside of the normal stream of
// data. Requests can either be specific to an SSH channel, or they
// can be global.
type Request struct {
	Type      string
	WantReply bool
	Payload   []byte

	ch  *channel
	mux *mux
	// hostgate: arrival is a global request's place in the order the
	// mux read requests and opens (arrival.go, change 28).
	arrival uint64
}

// Reply sends a response to a request. It must be called for all requests
// where WantReply is true and is a no-op otherwise. The payload argument is
// ignored for replies to channel-specific requests.
func (r *Request) Reply(ok bool, payload []byte) error {
	if !r.WantReply {
		return nil
	}

	if r.ch == nil {
		return r.mux.ackRequest(ok, payload)
	}

	return r.ch.ackRequest(ok)
}

// RejectionReason is an enumeration used when rejecting channel creation
// requests. See RFC 4254, section 5.1.
type RejectionReason uint32

const (
	Prohibited RejectionReason = iota + 1
	ConnectionFailed
	UnknownChannelType
	ResourceShortage
)

// String converts the rejection reason to human readable form.
func (r RejectionReason) String() string {
	switch r {
	case Prohibited:
		return "administratively prohibited"
	case ConnectionFailed:
		return "connect failed"
	case UnknownChannelType:
		return "unknown channel type"
	case ResourceShortage:
		return "resource shortage"
	}
	return fmt.Sprintf("unknown reason %d", int(r))
}

// minPayloadSize returns min(limit, length) clamped to a uint32. It is used
// to compute the size of the next channel data packet from the remaining
// payload. The comparison is done in int64 because length is an int — on
// 64-bit systems len(data) can exceed 2^32, and a direct uint32(length)
// cast would silently truncate to 0 at every multiple of 2^32, causing
// WriteExtended's loop to spin without making progress.
func minPayloadSize(limit uint32, length int) uint32 {
	if int64(length) > int64(limit) {
		return limit
	}
	return uint32(length)
}

type channelDirection uint8

const (
	channelInbound channelDirection = iota
	channelOutbound
)

// channel is an implementation of the Channel interface that works
// with the mux class.
type channel struct {
	// R/O after creation
	chanType          string
	extraData         []byte
	localId, remoteId uint32

	// maxRemotePayload is the maximum payload size of normal and extended data
	// packets that we can send to the peer. The wire packet will be 9 or 13
	// bytes larger (excluding encryption overhead).
	maxRemotePayload uint32

	mux *mux

	// decided is set to true if an accept or reject message has been sent
	// (for outbound channels) or received (for inbound channels).
	decided bool

	// established is set to true once the channel is open and may carry normal
	// channel traffic: for an outbound channel when the peer's open
	// confirmation is received, for an inbound channel when the local side
	// accepts it. It is set and read from different goroutines.
	established atomic.Bool

	// direction contains either channelOutbound, for channels created
	// locally, or channelInbound, for channels created by the peer.
	direction channelDirection

	// Pending internal channel messages.
	msg chan interface{}

	// Since requests have no ID, there can be only one request
	// with WantReply=true outstanding.  This lock is held by a
	// goroutine that has such an outgoing request pending.
	sentRequestMu sync.Mutex
	// sentRequestPending is set to true while a SendRequest call with
	// WantReply=true is in flight. handlePacket uses it as a gate: responses
	// arriving while no request is pending are dropped to prevent a
	// misbehaving peer from stalling the mux read loop by filling ch.msg
	// with unsolicited channelRequestSuccess/Failure messages.
	sentRequestPending atomic.Bool

	incomingRequests chan *Request

	// sentEOF is set under writeMu, by the EOF's send or, for an early
	// channel not answered yet, when CloseWrite leaves the EOF for the
	// mux goroutine (hostgate, change 11): a data packet checks it under
	// the same lock, so none follows the EOF. WriteExtended also reads it
	// without the lock, to fail at once.
	sentEOF atomic.Bool
	// eofOnWire, under writeMu, is set when the EOF message is written.
	eofOnWire bool
	// gotEOF is set when the peer's EOF has come (hostgate).
	gotEOF atomic.Bool
	// arrival is an inbound channel's place in the order the mux read
	// requests and opens (hostgate, arrival.go, change 28); set before
	// the channel is handed over.
	arrival uint64
	// openHeld is set while an early open may be held back unsent
	// (hostgate, earlydata.go).
	openHeld atomic.Bool

	// thread-safe data
	remoteWin  window
	pending    *buffer
	extPending *buffer

	// windowMu protects myWindow, the flow-control window, and myConsumed,
	// the number of bytes consumed since we last increased myWindow
	windowMu   sync.Mutex
	myWindow   uint32
	myConsumed uint32
	// hostgate: myLimit is the window granted now: myWindow, myConsumed
	// and what is buffered add up to it. It starts at
	// channelInitialWindow and grows to channelWindowSize; myRead counts
	// the bytes read since it last grew.
	myLimit uint32
	myRead  uint32
	// hostgate: maxLimit, when set (SetWindowLimit), is where myLimit
	// stops growing, in place of channelWindowSize.
	maxLimit uint32

	// writeMu serializes calls to mux.conn.writePacket() and
	// protects sentClose and packetPool. This mutex must be
	// different from windowMu, as writePacket can block if there
	// is a key exchange pending.
	writeMu   sync.Mutex
	sentClose bool

	// packetPool has a buffer for each extended channel ID to
	// save allocations during writes.
	packetPool map[uint32][]byte

	// closeOnce guards close so it is idempotent: closing the internal Go
	// channels (msg, incomingRequests) more than once would panic.
	closeOnce sync.Once

	// hostgate: early data (earlydata.go). early is set for an outbound
	// channel opened by openChannelEarly, before it is registered; opened
	// is closed once the open is answered or the channel closes, openErr
	// (written before) says why it failed. earlyIn counts early bytes an
	// inbound channel got.
	early    bool
	opened   chan struct{}
	openOnce sync.Once
	openErr  error
	earlyIn  uint32
	// earlyMu guards answered and what a Close or CloseWrite before the
	// answer left for the mux goroutine to send once it comes.
	earlyMu     sync.Mutex
	answered    bool
	closeWanted bool
	eofWanted   bool
	// An inbound channel accepted with early data holds its confirmation
	// back to go with its first packet (earlydata.go): heldConfirm, under
	// writeMu, is the packet until it is sent; confirmTimer, set under
	// earlyMu and writeMu when Accept holds it, sends it alone if nothing
	// else comes first.
	heldConfirm  []byte
	confirmTimer *time.Timer
	// hostgate: early requests (earlyrequest.go). earlyRequests is set
	// for an outbound early channel whose requests may go before the
	// answer; earlyReqIn counts those an inbound channel got (the mux
	// goroutine's alone).
	earlyRequests bool
	earlyReqIn    int

	// hostgate: the deadlines of Read (the data stream) and of writes
	// waiting on the peer's window (change 9, deadline.go).
	readDeadline  deadline
	writeDeadline deadline

	// hostgate: held by a WriteExtended from start to end, one for the
	// data stream and one for the extended ones (change 10): a Write's
	// bytes go out whole, no other Write's between them, as a TCP conn's
	// do. Taken before writeMu, never after.
	writeSerial [2]sync.Mutex

	// hostgate: what DiscardLazily set up (change 13, discardlazily.go).
	discard lazyDiscard
}

// SetDeadline sets the read and write deadlines, as a net.Conn's
// SetDeadline does (hostgate, change 9).
func (ch *channel) SetDeadline(t time.Time) error {
	ch.readDeadline.set(t)
	ch.writeDeadline.set(t)
	return nil
}

// SetReadDeadline sets the deadline of Read, pending and future: past it,
// Read returns os.ErrDeadlineExceeded (a net.Error whose Timeout is true)
// and leaves what is buffered for a later Read. A zero t clears it. Reads
// of Stderr are not bound by it.
func (ch *channel) SetReadDeadline(t time.Time) error {
	ch.readDeadline.set(t)
	return nil
}

// SetWriteDeadline sets the deadline of writes waiting on the peer's
// window, pending and future: past it, Write returns
// os.ErrDeadlineExceeded with the count of the bytes sent before. A zero t
// clears it. A write blocked on the connection itself (its TCP send
// buffer, a key exchange) is not woken: the connection is shared by every
// channel.
func (ch *channel) SetWriteDeadline(t time.Time) error {
	ch.writeDeadline.set(t)
	return nil
}

// writePacket sends a packet. If the packet is a channel close, it updates
// sentClose. This method takes the lock c.writeMu.
func (ch *channel) writePacket(packet []byte) error { return ch.writePacketAs(packet, false) }

// writePacketAs is writePacket; with reply set, a CLOSE answers the
// peer's. hostgate: a CLOSE nothing waits for is held (held.go).
func (ch *channel) writePacketAs(packet []byte, reply bool) error {
	ch.writeMu.Lock()
	if ch.sentClose {
		ch.writeMu.Unlock()
		return io.EOF
	}
	switch packet[0] {
	case msgChannelData, msgChannelExtendedData, msgChannelEarlyData:
		// hostgate: a Write that raced CloseWrite must not send after
		// the EOF (RFC 4254 5.3).
		if ch.sentEOF.Load() {
			ch.writeMu.Unlock()
			return ErrWriteAfterCloseWrite
		}
	case msgChannelEOF:
		// hostgate: one EOF on the wire (change 11): a second
		// CloseWrite is a no-op, as a second shutdown(SHUT_WR) is.
		// eofOnWire, not sentEOF, which an early channel's CloseWrite
		// sets before its deferred EOF goes out through here.
		if ch.eofOnWire {
			ch.writeMu.Unlock()
			return nil
		}
		ch.eofOnWire = true
		ch.sentEOF.Store(true)
	}
	ch.sentClose = (packet[0] == msgChannelClose)
	// hostgate: a held confirmation goes first (earlydata.go).
	err := ch.sendHeldConfirmLocked()
	if err == nil {
		lazy := ch.sentClose && lazyClose(ch.chanType) && (reply || ch.eofOnWire && ch.gotEOF.Load())
		err = ch.mux.writePacketAs(packet, lazy)
		if err == nil && !lazy {
			// hostgate: a write that is not held takes a held early
			// open along (or, during a key exchange, the KEXINIT did):
			// a Read or Close after it has nothing to send, and must not
			// wait on the transport's lock, which a write blocked on the
			// conn holds (held.go).
			ch.openHeld.Store(false)
		}
	}
	ch.writeMu.Unlock()
	return err
}

func (ch *channel) sendMessage(msg interface{}) error { return ch.sendMessageAs(msg, false) }

// sendMessageAs is sendMessage; reply is writePacketAs's.
func (ch *channel) sendMessageAs(msg interface{}, reply bool) error {
	// hostgate: an early channel's remoteId is the peer's answer.
	if err := ch.awaitOpen(); err != nil {
		return err
	}
	if debugMux {
		log.Printf("send(%d): %#v", ch.mux.chanList.offset, msg)
	}

	p := Marshal(msg)
	binary.BigEndian.PutUint32(p[1:], ch.remoteId)
	return ch.writePacketAs(p, reply)
}

// ErrWriteAfterCloseWrite is what a channel's Write returns once
// CloseWrite has sent (or, for an early channel not answered yet, left
// for sending) the EOF: no data may follow it (RFC 4254 5.3). Upstream
// returns io.EOF, which io.Copy's caller takes for success; a TCP conn's
// Write after CloseWrite fails too (EPIPE). It wraps io.ErrClosedPipe, the
// error of a write on a closed net.Pipe, so copy loops see a closed stream.
var ErrWriteAfterCloseWrite = fmt.Errorf("ssh: write on a channel after its CloseWrite: %w", io.ErrClosedPipe)

// WriteExtended writes data to a specific extended stream. These streams are
// used, for example, for stderr.
func (ch *channel) WriteExtended(data []byte, extendedCode uint32) (n int, err error) {
	return ch.writeExtended(context.Background(), data, extendedCode)
}

// WriteContext is Write whose waits for the peer's window end when ctx
// does (hostgate, change 16): it then returns the count of the bytes sent
// before, in whole packets, and context.Cause(ctx), and the channel's
// stream stays whole for the Writes that follow, which may send the rest.
// It is a write deadline of the one call, for a caller that must give up
// on a write without closing the channel (an SFTP request of a file
// aborted while the session's other files go on). A write blocked on the
// connection itself is not woken, as by SetWriteDeadline.
func (ch *channel) WriteContext(ctx context.Context, data []byte) (int, error) {
	if !ch.decided {
		return 0, errUndecided
	}
	return ch.writeExtended(ctx, data, 0)
}

func (ch *channel) writeExtended(ctx context.Context, data []byte, extendedCode uint32) (n int, err error) {
	if ch.sentEOF.Load() {
		return 0, ErrWriteAfterCloseWrite
	}
	// 1 byte message type, 4 bytes remoteId, 4 bytes data length
	opCode := byte(msgChannelData)
	headerLength := uint32(9)
	if extendedCode > 0 {
		headerLength += 4
		opCode = msgChannelExtendedData
	}

	serial := &ch.writeSerial[min(extendedCode, 1)]
	serial.Lock()
	defer serial.Unlock()

	// hostgate: the stream's lock makes this call the buffer's only
	// user (change 10); upstream's concurrent Writes filled one buffer
	// together. It goes back on every return, early ones included.
	ch.writeMu.Lock()
	packet := ch.packetPool[extendedCode]
	ch.writeMu.Unlock()
	defer func() {
		ch.writeMu.Lock()
		ch.packetPool[extendedCode] = packet
		ch.writeMu.Unlock()
	}()

	if ch.early && extendedCode > 0 {
		// hostgate: only plain data goes early.
		if err := ch.awaitOpen(); err != nil {
			return 0, err
		}
	}
	for len(data) > 0 {
		// hostgate: until an early channel is answered, its packets are
		// early data, at most earlyDataMax bytes in all (the window it
		// starts with) and per packet; maxRemotePayload is the answer's.
		early := ch.early && !ch.established.Load()
		limit := uint32(earlyDataMax)
		if !early {
			limit = ch.maxRemotePayload
		}
		space := minPayloadSize(limit, len(data))
		if space, err = ch.remoteWin.reserve(ctx, space); err != nil {
			if err == io.EOF && ch.sentEOF.Load() {
				// CloseWrite closed the window to end this wait.
				err = ErrWriteAfterCloseWrite
			}
			return n, ch.openFailure(err)
		}
		if want := headerLength + space; uint32(cap(packet)) < want {
			packet = make([]byte, want)
		} else {
			packet = packet[:want]
		}

		todo := data[:space]

		if early && !ch.established.Load() {
			packet[0] = msgChannelEarlyData
			binary.BigEndian.PutUint32(packet[1:], ch.localId)
		} else {
			packet[0] = opCode
			binary.BigEndian.PutUint32(packet[1:], ch.remoteId)
		}
		if extendedCode > 0 {
			binary.BigEndian.PutUint32(packet[5:], uint32(extendedCode))
		}
		binary.BigEndian.PutUint32(packet[headerLength-4:], uint32(len(todo)))
		copy(packet[headerLength:], todo)
		if err = ch.writePacket(packet); err != nil {
			return n, ch.openFailure(err)
		}

		n += len(todo)
		data = data[len(todo):]
	}

	return n, err
}

func (ch *channel) handleData(packet []byte) error {
	headerLen := 9
	isExtendedData := packet[0] == msgChannelExtendedData
	if isExtendedData {
		headerLen = 13
	}
	if len(packet) < headerLen {
		// malformed data packet
		return parseError(packet[0])
	}

	var extended uint32
	if isExtendedData {
		extended = binary.BigEndian.Uint32(packet[5:])
	}

	length := binary.BigEndian.Uint32(packet[headerLen-4 : headerLen])
	if length == 0 {
		return nil
	}
	if length > channelMaxPacket {
		// TODO(hanwen): should send Disconnect?
		return errors.New("ssh: incoming packet exceeds maximum payload size")
	}

	data := packet[headerLen:]
	if length != uint32(len(data)) {
		return errors.New("ssh: wrong packet length")
	}

	ch.windowMu.Lock()
	if ch.myWindow < length {
		ch.windowMu.Unlock()
		// TODO(hanwen): should send Disconnect with reason?
		return errors.New("ssh: remote side wrote too much")
	}
	ch.myWindow -= length
	ch.windowMu.Unlock()

	if extended == 1 {
		ch.extPending.writePacket(data, packet)
		ch.startDiscards(false, true)
	} else if extended > 0 {
		// RFC 4254, Section 5.2 defines no extended data types other
		// than stderr (type 1, handled above) and this package provides
		// no API to read them, so the data is discarded. Credit its
		// window back immediately: it can never be read, so the
		// deduction above would otherwise shrink the window permanently.
		// adjustWindow returns io.EOF if the local side has already
		// sent a channel close; ignore it like ReadExtended does, since
		// an error returned here would terminate the mux read loop and
		// tear down the whole connection.
		if err := ch.adjustWindow(length, false); err != nil && err != io.EOF {
			return err
		}
	} else {
		ch.pending.writePacket(data, packet)
	}
	return nil
}

// setWindowLimit bounds the window this side grants to n bytes (at least
// one packet): it grows no further, and a window granted past n shrinks to
// it as the program reads (hostgate, see HOSTGATE.md).
func (c *channel) setWindowLimit(n uint32) {
	c.windowMu.Lock()
	c.maxLimit = max(n, channelMaxPacket)
	c.windowMu.Unlock()
}

// adjustWindow gives the peer back adj bytes the program has read;
// drained says it has read everything that had come.
func (c *channel) adjustWindow(adj uint32, drained bool) error {
	c.windowMu.Lock()
	// Since myConsumed and myWindow are managed on our side, and can never
	// exceed the initial window setting, we don't worry about overflow.
	c.myConsumed += adj
	c.myRead += adj
	ceiling := uint32(channelWindowSize)
	if c.maxLimit != 0 {
		ceiling = c.maxLimit
	}
	if c.myLimit > ceiling {
		// hostgate: a window granted past the limit (before it was
		// set) shrinks to it as the program reads: what was read past
		// it is not given back.
		cut := min(c.myLimit-ceiling, c.myConsumed)
		c.myConsumed -= cut
		c.myLimit -= cut
	}
	var sendAdj uint32
	// hostgate: adjust once an eighth of the full window (1 MiB), or a
	// quarter of the window granted now, has been read, not whenever
	// more than three packets (96 KiB) are outstanding as upstream and
	// OpenSSH do: each adjust is a message that crosses every process of
	// the path and wakes each (see HOSTGATE.md). Or when less than half
	// the window granted now is left and a Read has emptied the buffer,
	// so the program would wait: while data is buffered, a slow reader's
	// full window sent an adjust for every read.
	if c.myConsumed >= min(channelWindowSize/8, c.myLimit/4) ||
		(drained && c.myWindow < c.myLimit/2) {
		sendAdj = c.myConsumed
		c.myConsumed = 0
		// hostgate: a program that has read the whole window since it
		// last grew, and everything that had come, waits on the window,
		// not the other way round: double it, up to channelWindowSize.
		// One that stops reading stops it growing, so its channel
		// buffers at most the window granted when it stopped: the
		// initial one for a program that never reads.
		if drained && c.myRead >= c.myLimit && c.myLimit < ceiling {
			grow := min(c.myLimit, ceiling-c.myLimit)
			c.myLimit += grow
			c.myRead = 0
			sendAdj += grow
		}
		c.myWindow += sendAdj
	}
	c.windowMu.Unlock()
	if sendAdj == 0 {
		return nil
	}
	return c.sendMessage(windowAdjustMsg{
		AdditionalBytes: sendAdj,
	})
}

func (c *channel) ReadExtended(data []byte, extended uint32) (n int, err error) {
	c.sendHeldOpen() // hostgate: a reader waits on the peer
	switch extended {
	case 1:
		n, err = c.extPending.Read(data)
	case 0:
		n, err = c.pending.Read(data)
	default:
		return 0, fmt.Errorf("ssh: extended code %d unimplemented", extended)
	}

	if n > 0 {
		err = c.adjustWindow(uint32(n), c.pending.empty() && c.extPending.empty())
		// sendWindowAdjust can return io.EOF if the remote
		// peer has closed the connection, however we want to
		// defer forwarding io.EOF to the caller of Read until
		// the buffer has been drained.
		if n > 0 && err == io.EOF {
			err = nil
		}
	}

	return n, err
}

// ReadShared is Read without the copy (hostgate, change 15): it returns
// up to max bytes of the channel's data where they were received (a
// recycled packet; one packet per call), and what gives them back. The
// bytes stay valid and unchanged until release.Release is called, which
// the caller must do exactly once; until then they hold the packet (at
// most 40 KiB) out of reuse. The window is given back as by Read, for the
// bytes returned. Like Read otherwise: it blocks until data is buffered,
// returns io.EOF once all data has been read and the peer sent EOF, and
// may be mixed with Read.
func (c *channel) ReadShared(max int) (data []byte, release interface{ Release() }, err error) {
	data, release, err = c.pending.readShared(max)
	if n := len(data); n > 0 {
		err = c.adjustWindow(uint32(n), c.pending.empty() && c.extPending.empty())
		// As in ReadExtended: io.EOF waits until the buffer is drained.
		if err == io.EOF {
			err = nil
		}
	}
	return data, release, err
}

func (c *channel) close() {
	c.closeOnce.Do(func() {
		// hostgate: first, so that a reader or writer woken below finds
		// why an unanswered early channel ended; a no-op once answered
		// (earlydata.go). And writers are stopped before readers wake
		// (upstream woke readers first): a Write after a Read saw the
		// end must fail, not send an early packet into a closing
		// channel.
		c.markOpened(ErrOpenUnanswered)
		c.writeMu.Lock()
		// This is not necessary for a normal channel teardown, but if
		// there was another error, it is.
		c.sentClose = true
		c.dropHeldConfirmLocked()
		c.writeMu.Unlock()
		// Unblock writers.
		c.remoteWin.close()
		c.pending.eof()
		c.extPending.eof()
		c.readDeadline.stop()
		c.writeDeadline.stop()
		close(c.msg)
		close(c.incomingRequests)
	})
}

// responseMessageReceived is called when a success or failure message is
// received on a channel to check that such a message is reasonable for the
// given channel.
func (ch *channel) responseMessageReceived() error {
	if ch.direction == channelInbound {
		return errors.New("ssh: channel response message received on inbound channel")
	}
	if ch.early {
		// hostgate: decided at open; established once the fields the
		// answer carries are set (handlePacket).
		if !ch.earlyAnswered() {
			return errors.New("ssh: duplicate response received for channel")
		}
		return nil
	}
	if ch.decided {
		return errors.New("ssh: duplicate response received for channel")
	}
	ch.decided = true
	ch.established.Store(true)
	return nil
}

func (ch *channel) handlePacket(packet []byte) error {
	// Only the open response is expected before the channel is established.
	if !ch.established.Load() {
		switch packet[0] {
		case msgChannelOpenConfirm, msgChannelOpenFailure:
		default:
			return nil
		}
	}

	switch packet[0] {
	case msgChannelData, msgChannelExtendedData:
		return ch.handleData(packet)
	case msgChannelClose:
		ch.sendMessageAs(channelCloseMsg{PeersID: ch.remoteId}, true)
		ch.mux.chanList.remove(ch.localId)
		ch.close()
		return nil
	case msgChannelEOF:
		ch.gotEOF.Store(true) // hostgate: see writePacketAs
		// RFC 4254 is mute on how EOF affects dataExt messages but
		// it is logical to signal EOF at the same time.
		ch.extPending.eof()
		ch.pending.eof()
		return nil
	}

	decoded, err := decode(packet)
	if err != nil {
		return err
	}

	switch msg := decoded.(type) {
	case *channelOpenFailureMsg:
		if err := ch.responseMessageReceived(); err != nil {
			return err
		}
		if ch.early {
			// hostgate: close (which stops this channel's writers under
			// writeMu) before the id is free: a new channel may take it at
			// once, and an early packet of this one sent after that would
			// be the new one's to the peer.
			ch.markOpened(&OpenChannelError{msg.Reason, msg.Message})
			ch.close()
			ch.mux.chanList.remove(msg.PeersID)
			return nil
		}
		ch.mux.chanList.remove(msg.PeersID)
		ch.msg <- msg
	case *channelOpenConfirmMsg:
		if err := ch.responseMessageReceived(); err != nil {
			return err
		}
		if msg.MaxPacketSize < minPacketLength || msg.MaxPacketSize > 1<<31 {
			return fmt.Errorf("ssh: invalid MaxPacketSize %d from peer", msg.MaxPacketSize)
		}
		if ch.early {
			return ch.earlyConfirmed(msg)
		}
		ch.remoteId = msg.MyID
		ch.maxRemotePayload = msg.MaxPacketSize
		ch.remoteWin.add(msg.MyWindow)
		ch.msg <- msg
	case *windowAdjustMsg:
		if !ch.remoteWin.add(msg.AdditionalBytes) {
			return fmt.Errorf("ssh: invalid window update for %d bytes", msg.AdditionalBytes)
		}
	case *channelRequestMsg:
		req := Request{
			Type:      msg.Request,
			WantReply: msg.WantReply,
			Payload:   msg.RequestSpecificData,
			ch:        ch,
		}

		ch.incomingRequests <- &req
		ch.startDiscards(true, false)
	case *channelRequestSuccessMsg, *channelRequestFailureMsg:
		// Drop responses that arrive when no SendRequest is waiting, to
		// prevent a malicious peer from filling ch.msg and stalling the
		// mux read loop. The non-blocking send additionally protects the
		// loop if a well-behaved caller is slow to read.
		if !ch.sentRequestPending.Load() {
			return nil
		}
		select {
		case ch.msg <- msg:
		default:
		}
	default:
		// No other message type is expected on an established channel.
		return fmt.Errorf("ssh: unexpected message type %d on channel %d", packet[0], ch.localId)
	}
	return nil
}

func (m *mux) newChannel(chanType string, direction channelDirection, extraData []byte, early bool) *channel {
	ch := &channel{
		early:            early,
		remoteWin:        window{Cond: newCond()},
		myWindow:         channelInitialWindow,
		myLimit:          channelInitialWindow,
		pending:          newBuffer(),
		extPending:       newBuffer(),
		direction:        direction,
		incomingRequests: make(chan *Request, chanSize),
		msg:              make(chan interface{}, chanSize),
		chanType:         chanType,
		extraData:        extraData,
		mux:              m,
		packetPool:       make(map[uint32][]byte),
	}
	if m.windowCeiling != 0 {
		ch.maxLimit = max(m.windowCeiling, channelMaxPacket)
	}
	ch.readDeadline.cond = ch.pending.Cond
	ch.pending.deadline = &ch.readDeadline
	ch.writeDeadline.cond = ch.remoteWin.Cond
	ch.remoteWin.deadline = &ch.writeDeadline
	if early {
		ch.opened = make(chan struct{})
		ch.decided = true
		ch.remoteWin.add(earlyDataMax)
	}
	if !m.chanList.add(ch) {
		// The mux has shut down and will not close the channel.
		ch.close()
	}
	// hostgate (change 22): read once the channel is listed, so that a
	// setSendLimit running now either finds it or has stored first.
	if n := m.sendLimit.Load(); n != 0 {
		ch.remoteWin.setLimit(n)
	}
	return ch
}

var errUndecided = errors.New("ssh: must Accept or Reject channel")
var errDecidedAlready = errors.New("ssh: can call Accept or Reject only once")

type extChannel struct {
	code uint32
	ch   *channel
}

func (e *extChannel) Write(data []byte) (n int, err error) {
	return e.ch.WriteExtended(data, e.code)
}

func (e *extChannel) Read(data []byte) (n int, err error) {
	return e.ch.ReadExtended(data, e.code)
}

func (ch *channel) Accept() (Channel, <-chan *Request, error) {
	if ch.decided {
		return nil, nil, errDecidedAlready
	}
	// hostgate: the whole initial window, not what early data left of
	// it: the opener subtracts what it sent early, which may still be on
	// its way (earlydata.go). Without early data the two are equal.
	confirm := channelOpenConfirmMsg{
		PeersID:       ch.remoteId,
		MyID:          ch.localId,
		MyWindow:      channelInitialWindow,
		MaxPacketSize: channelMaxPacket,
	}
	ch.decided = true
	ch.established.Store(true)
	if ch.holdConfirm(confirm) {
		return ch, ch.incomingRequests, nil
	}
	if err := ch.sendMessage(confirm); err != nil {
		return nil, nil, err
	}

	return ch, ch.incomingRequests, nil
}

func (ch *channel) Reject(reason RejectionReason, message string) error {
	if ch.decided {
		return errDecidedAlready
	}
	reject := channelOpenFailureMsg{
		PeersID:  ch.remoteId,
		Reason:   reason,
		Message:  message,
		Language: "en",
	}
	ch.decided = true
	err := ch.sendMessage(reject)

	// Remove the channel from the mux to prevent memory leaks.
	// Do not call ch.close() here: no goroutine holds a reference to a
	// rejected channel's internal channels (msg, incomingRequests), so
	// removing it from chanList is sufficient for GC. Calling close()
	// would race with the mux loop goroutine (handlePacket or dropAll),
	// causing a panic from closing an already-closed channel.
	ch.mux.chanList.remove(ch.localId)

	return err
}

func (ch *channel) Read(data []byte) (int, error) {
	if !ch.decided {
		return 0, errUndecided
	}
	n, err := ch.ReadExtended(data, 0)
	return n, ch.openFailure(err)
}

func (ch *channel) Write(data []byte) (int, error) {
	if !ch.decided {
		return 0, errUndecided
	}
	return ch.WriteExtended(data, 0)
}

func (ch *channel) CloseWrite() error {
	if !ch.decided {
		return errUndecided
	}
	// hostgate: before an early channel's answer the EOF is left for the
	// mux goroutine to send with it (earlydata.go); remoteId below is the
	// answer's.
	if ch.deferEarly(func() {
		ch.eofWanted = true
		ch.writeMu.Lock()
		ch.sentEOF.Store(true)
		ch.writeMu.Unlock()
	}) {
		ch.remoteWin.close()
		return nil
	}
	if err := ch.awaitOpen(); err != nil {
		return err
	}
	err := ch.sendMessage(channelEOFMsg{
		PeersID: ch.remoteId})
	// hostgate: a Write waiting for window ends, as one blocked on a TCP
	// socket does when it is shut down for writing: nothing it sends
	// could follow the EOF (change 11). Requests need no window.
	if ch.sentEOF.Load() {
		ch.remoteWin.close()
	}
	return err
}

func (ch *channel) Close() error {
	if !ch.decided {
		return errUndecided
	}
	// hostgate: an early channel closed before its answer ends here at
	// once; the mux goroutine sends the CLOSE if the peer accepts.
	if ch.deferEarly(func() { ch.closeWanted = true }) {
		// hostgate: dropped, not only ended: nothing has come yet, and
		// what the peer sends after its answer is for nobody (see below).
		ch.pending.drop()
		ch.extPending.drop()
		ch.remoteWin.close()
		return nil
	}
	if ch.awaitOpen() != nil {
		// Refused, or the connection ended: the channel is closed
		// already and there is nothing to send.
		return nil
	}

	err := ch.sendMessage(channelCloseMsg{
		PeersID: ch.remoteId})
	// hostgate: this side closed first (a channel the peer closed already
	// sent our CLOSE in reply, and its buffers end with EOF: what is left
	// in them stays to be read). The channel is over for this side, reads
	// included: what the peer sent and nobody read goes, a Read blocked on
	// it returns io.EOF, and what the peer sends until its own CLOSE is
	// discarded. Upstream kept buffering it until that CLOSE, and a peer
	// that never sends one (a hostile agent, on the gateway's long-lived
	// preview connection) made each channel closed here hold up to its
	// window, and any goroutine still reading it, for the connection's
	// life. So did a Write waiting for window the peer never grants: it
	// waited for that CLOSE. It ends now, with what it sent; nothing may
	// follow our CLOSE anyway.
	if err == nil {
		ch.pending.drop()
		ch.extPending.drop()
		ch.remoteWin.close()
	}
	return err
}

// Extended returns an io.ReadWriter that sends and receives data on the given,
// SSH extended stream. Such streams are used, for example, for stderr.
func (ch *channel) Extended(code uint32) io.ReadWriter {
	if !ch.decided {
		return nil
	}
	return &extChannel{code, ch}
}

func (ch *channel) Stderr() io.ReadWriter {
	return ch.Extended(1)
}

func (ch *channel) SendRequest(name string, wantReply bool, payload []byte) (bool, error) {
	if !ch.decided {
		return false, errUndecided
	}
	// hostgate: an early channel's request may go before the answer,
	// addressed by this side's id (earlyrequest.go).
	early := ch.takesEarlyRequest()
	if !early {
		if err := ch.awaitOpen(); err != nil {
			return false, err
		}
	}

	if wantReply {
		ch.sentRequestMu.Lock()
		defer ch.sentRequestMu.Unlock()

		// Open the gate so that responses arriving while this request is in
		// flight are allowed to reach ch.msg. Responses arriving while no
		// request is pending are dropped by handlePacket.
		ch.sentRequestPending.Store(true)
		defer ch.sentRequestPending.Store(false)

		// Drain any spurious responses that may have been buffered. This
		// prevents a previously buffered unexpected response from being
		// consumed instead of the actual response for this request.
	drain:
		for {
			select {
			case _, ok := <-ch.msg:
				if !ok {
					break drain
				}
			default:
				break drain
			}
		}
	}

	msg := channelRequestMsg{
		Request:             name,
		WantReply:           wantReply,
		RequestSpecificData: payload,
	}
	if !early {
		// hostgate: an early request goes under this side's id; the
		// answer may be setting remoteId meanwhile.
		msg.PeersID = ch.remoteId
	}

	if early {
		if err := ch.sendEarlyRequest(msg); err != nil {
			return false, ch.openFailure(err)
		}
	} else if err := ch.sendMessage(msg); err != nil {
		return false, err
	}

	if wantReply {
		m, ok := (<-ch.msg)
		if !ok {
			// hostgate: a refused early open says so.
			return false, ch.openFailure(io.EOF)
		}
		switch m.(type) {
		case *channelRequestFailureMsg:
			return false, nil
		case *channelRequestSuccessMsg:
			return true, nil
		default:
			return false, fmt.Errorf("ssh: unexpected response to channel request: %#v", m)
		}
	}

	return false, nil
}

// ackRequest either sends an ack or nack to the channel request.
func (ch *channel) ackRequest(ok bool) error {
	if !ch.decided {
		return errUndecided
	}

	var msg interface{}
	if !ok {
		msg = channelRequestFailureMsg{
			PeersID: ch.remoteId,
		}
	} else {
		msg = channelRequestSuccessMsg{
			PeersID: ch.remoteId,
		}
	}
	return ch.sendMessage(msg)
}

func (ch *channel) ChannelType() string {
	return ch.chanType
}

func (ch *channel) ExtraData() []byte {
	return ch.extraData
}
