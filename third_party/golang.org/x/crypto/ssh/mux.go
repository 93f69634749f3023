// Copyright 2013 The Go Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package ssh

import (
	"encoding/binary"
	"fmt"
	"io"
	"log"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// debugMux, if set, causes messages in the connection protocol to be
// logged.
const debugMux = false

// chanList is a thread safe channel list.
type chanList struct {
	// protects concurrent access to chans
	sync.Mutex

	// chans are indexed by the local id of the channel, which the
	// other side should send in the PeersId field.
	chans []*channel

	// This is a debugging aid: it offsets all IDs by this
	// amount. This helps distinguish otherwise identical
	// server/client muxes
	offset uint32

	// closed is set by dropAll.
	closed bool

	// hostgate: byRemote finds an inbound channel by the peer's id for
	// it, which is how early data is addressed (see earlydata.go).
	byRemote map[uint32]*channel
}

// add stores the given channel and assigns its localId while holding the
// lock, so that getChan can never return a channel whose localId is not yet
// initialized. Once dropAll has been called, add leaves the channel
// unregistered and returns false.
func (c *chanList) add(ch *channel) bool {
	c.Lock()
	defer c.Unlock()
	if c.closed {
		return false
	}
	for i := range c.chans {
		if c.chans[i] == nil {
			c.chans[i] = ch
			ch.localId = uint32(i) + c.offset
			return true
		}
	}
	c.chans = append(c.chans, ch)
	ch.localId = uint32(len(c.chans)-1) + c.offset
	return true
}

// getChan returns the channel for the given ID.
func (c *chanList) getChan(id uint32) *channel {
	id -= c.offset

	c.Lock()
	defer c.Unlock()
	if id < uint32(len(c.chans)) {
		return c.chans[id]
	}
	return nil
}

func (c *chanList) remove(id uint32) {
	id -= c.offset
	c.Lock()
	if id < uint32(len(c.chans)) {
		if ch := c.chans[id]; ch != nil && c.byRemote[ch.remoteId] == ch {
			delete(c.byRemote, ch.remoteId)
		}
		c.chans[id] = nil
	}
	c.Unlock()
}

// addRemote makes inbound channel ch findable by its remoteId
// (getRemote) until it is removed. hostgate: see earlydata.go.
func (c *chanList) addRemote(ch *channel) {
	c.Lock()
	defer c.Unlock()
	if c.closed {
		return
	}
	if c.byRemote == nil {
		c.byRemote = map[uint32]*channel{}
	}
	c.byRemote[ch.remoteId] = ch
}

// getRemote returns the inbound channel the peer calls id, or nil.
func (c *chanList) getRemote(id uint32) *channel {
	c.Lock()
	defer c.Unlock()
	return c.byRemote[id]
}

// dropAll forgets all channels it knows, returning them in a slice. No
// channel can be added afterwards.
func (c *chanList) dropAll() []*channel {
	c.Lock()
	defer c.Unlock()
	var r []*channel

	for _, ch := range c.chans {
		if ch == nil {
			continue
		}
		r = append(r, ch)
	}
	c.chans = nil
	c.byRemote = nil
	c.closed = true
	return r
}

// isClosed reports whether dropAll has been called.
func (c *chanList) isClosed() bool {
	c.Lock()
	defer c.Unlock()
	return c.closed
}

// mux represents the state for the SSH connection protocol, which
// multiplexes many channels onto a single packet transport.
type mux struct {
	conn     packetConn
	chanList chanList

	incomingChannels chan NewChannel

	globalSentMu      sync.Mutex
	globalSentPending atomic.Bool
	globalResponses   chan interface{}
	incomingRequests  chan *Request

	errCond *sync.Cond
	err     error

	// hostgate: how long a channel accepted with early data holds its
	// confirmation (ServerConfig.EarlyConfirmHold); set before the loop.
	confirmHold time.Duration
	// hostgate: where every channel's window stops growing, when not
	// zero (ServerConfig.WindowCeiling); set before the loop.
	windowCeiling uint32
	// hostgate: the most bytes each channel sends ahead of what the peer
	// has given back, when not zero (ServerConn.SetSendLimit, change 22).
	sendLimit atomic.Uint32
	// hostgate: the global requests and channel opens read so far, which
	// numbers each (arrival.go, change 28); the loop's alone.
	arrivals uint64
}

// setSendLimit sets every channel's send limit, the present ones' and
// those to come (change 22).
func (m *mux) setSendLimit(n uint32) {
	m.sendLimit.Store(n)
	m.chanList.Lock()
	chans := slices.Clone(m.chanList.chans)
	m.chanList.Unlock()
	for _, ch := range chans {
		if ch != nil {
			ch.remoteWin.setLimit(n)
		}
	}
}

// When debugging, each new chanList instantiation has a different
// offset.
var globalOff uint32

func (m *mux) Wait() error {
	m.errCond.L.Lock()
	defer m.errCond.L.Unlock()
	for m.err == nil {
		m.errCond.Wait()
	}
	return m.err
}

// newMux returns a mux that runs over the given connection.
func newMux(p packetConn) *mux {
	return newMuxHold(p, 0, 0)
}

// newMuxHold is newMux with a server's EarlyConfirmHold and WindowCeiling
// (hostgate).
func newMuxHold(p packetConn, confirmHold time.Duration, windowCeiling uint32) *mux {
	m := &mux{
		conn:             p,
		incomingChannels: make(chan NewChannel, chanSize),
		globalResponses:  make(chan interface{}, 1),
		incomingRequests: make(chan *Request, chanSize),
		errCond:          newCond(),
		confirmHold:      confirmHold,
		windowCeiling:    windowCeiling,
	}
	if debugMux {
		m.chanList.offset = atomic.AddUint32(&globalOff, 1)
	}

	go m.loop()
	return m
}

func (m *mux) sendMessage(msg interface{}) error { return m.sendMessageAs(msg, false) }

// sendMessageAs is sendMessage; lazy holds the packet back where the
// transport can (hostgate, held.go).
func (m *mux) sendMessageAs(msg interface{}, lazy bool) error {
	p := Marshal(msg)
	if debugMux {
		log.Printf("send global(%d): %#v", m.chanList.offset, msg)
	}
	return m.writePacketAs(p, lazy)
}

// writePacketAs writes p, held back if lazy and the conn can hold it
// (hostgate, held.go).
func (m *mux) writePacketAs(p []byte, lazy bool) error {
	if lazy {
		if lc, ok := m.conn.(lazyConn); ok {
			return lc.writePacketAs(p, true)
		}
	}
	return m.conn.writePacket(p)
}

func (m *mux) SendRequest(name string, wantReply bool, payload []byte) (bool, []byte, error) {
	if wantReply {
		m.globalSentMu.Lock()
		defer m.globalSentMu.Unlock()

		// Open the gate so that responses arriving while this request is in
		// flight are allowed to reach globalResponses. Any response arriving
		// while no request is pending is dropped by handleGlobalPacket.
		m.globalSentPending.Store(true)
		defer m.globalSentPending.Store(false)

		// Drain any spurious responses that may have been buffered. This prevents
		// a previously buffered unexpected response from being consumed instead
		// of the actual response for this request.
	drain:
		for {
			select {
			case _, ok := <-m.globalResponses:
				if !ok {
					break drain
				}
			default:
				break drain
			}
		}
	}

	if err := m.sendMessage(globalRequestMsg{
		Type:      name,
		WantReply: wantReply,
		Data:      payload,
	}); err != nil {
		return false, nil, err
	}

	if !wantReply {
		return false, nil, nil
	}

	msg, ok := <-m.globalResponses
	if !ok {
		return false, nil, io.EOF
	}
	switch msg := msg.(type) {
	case *globalRequestFailureMsg:
		return false, msg.Data, nil
	case *globalRequestSuccessMsg:
		return true, msg.Data, nil
	default:
		return false, nil, fmt.Errorf("ssh: unexpected response to request: %#v", msg)
	}
}

// ackRequest must be called after processing a global request that
// has WantReply set.
func (m *mux) ackRequest(ok bool, data []byte) error {
	if ok {
		return m.sendMessage(globalRequestSuccessMsg{Data: data})
	}
	return m.sendMessage(globalRequestFailureMsg{Data: data})
}

func (m *mux) Close() error {
	return m.conn.Close()
}

// loop runs the connection machine. It will process packets until an
// error is encountered. To synchronize on loop exit, use mux.Wait.
func (m *mux) loop() {
	var err error
	for err == nil {
		err = m.onePacket()
	}

	for _, ch := range m.chanList.dropAll() {
		ch.close()
	}

	close(m.incomingChannels)
	close(m.incomingRequests)
	close(m.globalResponses)

	m.conn.Close()

	m.errCond.L.Lock()
	m.err = err
	m.errCond.Broadcast()
	m.errCond.L.Unlock()

	if debugMux {
		log.Println("loop exit", err)
	}
}

// onePacket reads and processes one packet.
func (m *mux) onePacket() error {
	packet, err := m.conn.readPacket()
	if err != nil {
		return err
	}

	if debugMux {
		if packet[0] == msgChannelData || packet[0] == msgChannelExtendedData {
			log.Printf("decoding(%d): data packet - %d bytes", m.chanList.offset, len(packet))
		} else {
			p, _ := decode(packet)
			log.Printf("decoding(%d): %d %#v - %d bytes", m.chanList.offset, packet[0], p, len(packet))
		}
	}

	switch packet[0] {
	case msgChannelOpen:
		return m.handleChannelOpen(packet)
	case msgChannelEarlyData:
		return m.handleEarlyData(packet)
	case msgChannelEarlyRequest:
		return m.handleEarlyRequest(packet)
	case msgGlobalRequest, msgRequestSuccess, msgRequestFailure:
		return m.handleGlobalPacket(packet)
	case msgPing:
		var msg pingMsg
		if err := Unmarshal(packet, &msg); err != nil {
			return fmt.Errorf("failed to unmarshal ping@openssh.com message: %w", err)
		}
		return m.sendMessage(pongMsg(msg))
	}

	// assume a channel packet.
	if len(packet) < 5 {
		return parseError(packet[0])
	}
	id := binary.BigEndian.Uint32(packet[1:])
	ch := m.chanList.getChan(id)
	if ch == nil {
		return m.handleUnknownChannelPacket(id, packet)
	}

	return ch.handlePacket(packet)
}

func (m *mux) handleGlobalPacket(packet []byte) error {
	msg, err := decode(packet)
	if err != nil {
		return err
	}

	switch msg := msg.(type) {
	case *globalRequestMsg:
		m.arrivals++
		m.incomingRequests <- &Request{
			Type:      msg.Type,
			WantReply: msg.WantReply,
			Payload:   msg.Data,
			mux:       m,
			arrival:   m.arrivals,
		}
	case *globalRequestSuccessMsg, *globalRequestFailureMsg:
		// Drop responses that arrive when no SendRequest is waiting, to
		// prevent a malicious peer from staging responses for a future
		// caller.
		if !m.globalSentPending.Load() {
			return nil
		}
		select {
		case m.globalResponses <- msg:
		default:
		}
	default:
		panic(fmt.Sprintf("not a global message %#v", msg))
	}

	return nil
}

// handleChannelOpen schedules a channel to be Accept()ed.
func (m *mux) handleChannelOpen(packet []byte) error {
	var msg channelOpenMsg
	if err := Unmarshal(packet, &msg); err != nil {
		return err
	}

	if msg.MaxPacketSize < minPacketLength || msg.MaxPacketSize > 1<<31 {
		failMsg := channelOpenFailureMsg{
			PeersID:  msg.PeersID,
			Reason:   ConnectionFailed,
			Message:  "invalid request",
			Language: "en_US.UTF-8",
		}
		return m.sendMessage(failMsg)
	}

	c := m.newChannel(msg.ChanType, channelInbound, msg.TypeSpecificData, false)
	c.remoteId = msg.PeersID
	c.maxRemotePayload = msg.MaxPacketSize
	c.remoteWin.add(msg.PeersWindow)
	m.arrivals++
	c.arrival = m.arrivals  // hostgate: change 28
	m.chanList.addRemote(c) // hostgate: early data finds it (earlydata.go)
	m.incomingChannels <- c
	return nil
}

func (m *mux) OpenChannel(chanType string, extra []byte) (Channel, <-chan *Request, error) {
	ch, err := m.openChannel(chanType, extra)
	if err != nil {
		return nil, nil, err
	}

	return ch, ch.incomingRequests, nil
}

func (m *mux) openChannel(chanType string, extra []byte) (*channel, error) {
	return m.openChannelWindow(chanType, extra, channelInitialWindow)
}

// openChannelWindow is openChannel granting the peer window bytes at
// first instead of channelInitialWindow (hostgate, change 18).
func (m *mux) openChannelWindow(chanType string, extra []byte, window uint32) (*channel, error) {
	ch := m.newChannel(chanType, channelOutbound, extra, false)
	if m.chanList.isClosed() {
		return nil, io.EOF
	}
	ch.windowMu.Lock()
	ch.myWindow, ch.myLimit = window, window
	ch.windowMu.Unlock()

	open := channelOpenMsg{
		ChanType:         chanType,
		PeersWindow:      ch.myWindow,
		MaxPacketSize:    channelMaxPacket,
		TypeSpecificData: extra,
		PeersID:          ch.localId,
	}
	if err := m.sendMessage(open); err != nil {
		return nil, err
	}

	msg, ok := <-ch.msg
	if !ok {
		return nil, io.EOF
	}
	switch msg := msg.(type) {
	case *channelOpenConfirmMsg:
		return ch, nil
	case *channelOpenFailureMsg:
		return nil, &OpenChannelError{msg.Reason, msg.Message}
	default:
		return nil, fmt.Errorf("ssh: unexpected packet in response to channel open: %T", msg)
	}
}

func (m *mux) handleUnknownChannelPacket(id uint32, packet []byte) error {
	msg, err := decode(packet)
	if err != nil {
		return err
	}

	switch msg := msg.(type) {
	// RFC 4254 section 5.4 says unrecognized channel requests should
	// receive a failure response.
	case *channelRequestMsg:
		if msg.WantReply {
			return m.sendMessage(channelRequestFailureMsg{
				PeersID: msg.PeersID,
			})
		}
		return nil
	default:
		return fmt.Errorf("ssh: invalid channel %d", id)
	}
}
