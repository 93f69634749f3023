// Copyright 2026 The hostgate Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package ssh

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// hostgate: this file is not in upstream x/crypto. See HOSTGATE.md,
// change 5.
//
// Early data lets an opener write to a channel before the peer has
// answered the open, as TCP Fast Open lets a client send with its SYN. A
// forwarded connection's first bytes (an HTTP request) then travel right
// behind the open instead of a round trip later; through the gateway that
// round trip crosses three processes each way. The opener sends them as
// msgChannelEarlyData, addressed by its own channel id, since the peer's
// id comes with the answer; the peer buffers them in the channel as data,
// counted against its window, until the channel is accepted, and drops
// them with a rejected one. The opener may send at most earlyDataMax bytes
// before the answer, which is also the window it starts with; the answer
// advertises the peer's whole initial window, of which the opener has used
// what it sent early.
//
// A peer that does not know the message would take it for a packet of
// some other channel of its own, so it is sent only to a peer that said
// it handles it (the caller of DialEarly decides).

// earlyDataMax bounds the early data of one channel: one packet at our
// maximum payload, enough for a request's first bytes.
const earlyDataMax = channelMaxPacket

// defaultConfirmHold bounds how long an accepted channel that got early
// data holds its confirmation back for its first packet
// (ServerConfig.EarlyConfirmHold). The opener needs the confirmation only
// to send more than its allowance, or an EOF or CLOSE, so holding it costs
// nothing while the target answers (an HTTP response then carries it: one
// message fewer across every process of the path); the bound is the wait
// of an opener that half-closes for a target that answers only then. An
// opener blocked on its allowance is answered at once (handleEarlyData).
const defaultConfirmHold = 2 * time.Millisecond

// ErrOpenUnanswered is what an early channel's Read and Write return when
// the connection ended before the peer answered the open: unlike io.EOF,
// it does not pass for the end of the stream.
var ErrOpenUnanswered = errors.New("ssh: connection ended before the channel open was answered")

// awaitOpen waits until an early channel's open is answered, and returns
// why it failed. For other channels it returns at once.
func (ch *channel) awaitOpen() error {
	if !ch.early || ch.established.Load() {
		return nil
	}
	ch.sendHeldOpen()
	<-ch.opened
	if ch.established.Load() {
		return nil
	}
	return ch.openErr
}

// markOpened records the answer to an early open (err nil for a confirm,
// ErrOpenUnanswered for a connection that ended first) and wakes its
// waiters; only the first call counts.
func (ch *channel) markOpened(err error) {
	if !ch.early {
		return
	}
	ch.openOnce.Do(func() {
		ch.openErr = err
		close(ch.opened)
	})
}

// openFailure returns the error of an early open the peer refused in place
// of err, which is what the channel's end looks like to its reader and
// writer (io.EOF); otherwise err.
func (ch *channel) openFailure(err error) error {
	if err == nil || !ch.early {
		return err
	}
	select {
	case <-ch.opened:
		if ch.openErr != nil {
			return ch.openErr
		}
	default:
	}
	return err
}

// earlyConfirmed takes the peer's confirmation of an early open. The
// fields writers read once they see established are set before it.
func (ch *channel) earlyConfirmed(msg *channelOpenConfirmMsg) error {
	if msg.MyWindow < earlyDataMax || msg.MaxPacketSize < earlyDataMax {
		return fmt.Errorf("ssh: peer confirmed an early-data channel with window %d and packet size %d, less than the %d bytes it may have been sent", msg.MyWindow, msg.MaxPacketSize, earlyDataMax)
	}
	ch.remoteId = msg.MyID
	ch.maxRemotePayload = msg.MaxPacketSize
	ch.earlyMu.Lock()
	closeWanted, eofWanted := ch.closeWanted, ch.eofWanted
	ch.earlyMu.Unlock()
	ch.established.Store(true)
	ch.remoteWin.add(msg.MyWindow - earlyDataMax)
	ch.markOpened(nil)
	switch {
	case closeWanted:
		return ch.sendIgnoringClosed(channelCloseMsg{PeersID: ch.remoteId})
	case eofWanted:
		return ch.sendIgnoringClosed(channelEOFMsg{PeersID: ch.remoteId})
	}
	return nil
}

// sendIgnoringClosed sends msg from the mux goroutine; a channel that has
// sent its CLOSE meanwhile is not an error of the connection.
func (ch *channel) sendIgnoringClosed(msg interface{}) error {
	if err := ch.sendMessage(msg); err != nil && err != io.EOF {
		return err
	}
	return nil
}

// earlyAnswered records that the open was answered, on the mux goroutine
// when the answer arrives; false if it was already. From then on a Close
// or CloseWrite waits for the answer's fields instead of leaving its
// message for earlyConfirmed.
func (ch *channel) earlyAnswered() bool {
	ch.earlyMu.Lock()
	defer ch.earlyMu.Unlock()
	first := !ch.answered
	ch.answered = true
	return first
}

// deferEarly reports whether ch is an early channel still waiting for its
// answer, and if so records what set sets for the mux goroutine to act on
// when the answer comes (earlyConfirmed). Otherwise the caller goes on as
// for any channel.
func (ch *channel) deferEarly(set func()) bool {
	if !ch.early || ch.established.Load() {
		return false
	}
	ch.sendHeldOpen() // nothing this side sends will take it along
	ch.earlyMu.Lock()
	defer ch.earlyMu.Unlock()
	if ch.answered {
		return false
	}
	set()
	return true
}

// handleEarlyData takes early data for an inbound channel; the peer names
// it by its own id. Data for a channel no longer there (rejected, or
// closed) is dropped, as its opener learns from the answer.
func (m *mux) handleEarlyData(packet []byte) error {
	if len(packet) < 9 {
		return parseError(packet[0])
	}
	ch := m.chanList.getRemote(binary.BigEndian.Uint32(packet[1:]))
	if ch == nil {
		return nil
	}
	length := binary.BigEndian.Uint32(packet[5:9])
	ch.earlyMu.Lock()
	if uint64(ch.earlyIn)+uint64(length) > earlyDataMax {
		ch.earlyMu.Unlock()
		return errors.New("ssh: peer sent more early data than allowed")
	}
	ch.earlyIn += length
	if ch.confirmTimer != nil && ch.earlyIn == earlyDataMax {
		// The opener has used its whole allowance and may be waiting for
		// the window the confirmation brings: send it now. Reset, not a
		// write here: the mux goroutine must not block on a writer.
		ch.confirmTimer.Reset(0)
	}
	ch.earlyMu.Unlock()
	return ch.handleData(packet)
}

// holdConfirm holds an accepted inbound channel's confirmation back for
// its first packet (or the hold's end) if the opener sent early data and has
// allowance left; false means the caller sends it now. An opener without
// early data (OpenSSH, or one with nothing to say first) may be waiting
// for the confirmation before it writes.
func (ch *channel) holdConfirm(confirm channelOpenConfirmMsg) bool {
	ch.earlyMu.Lock()
	defer ch.earlyMu.Unlock()
	hold := ch.mux.confirmHold
	if hold == 0 {
		hold = defaultConfirmHold
	}
	if hold < 0 || ch.earlyIn == 0 || ch.earlyIn >= earlyDataMax {
		return false
	}
	ch.writeMu.Lock()
	if ch.sentClose {
		// The connection ended first: Accept's send says so (io.EOF).
		ch.writeMu.Unlock()
		return false
	}
	ch.heldConfirm = Marshal(confirm)
	ch.confirmTimer = time.AfterFunc(hold, ch.sendHeldConfirm)
	ch.writeMu.Unlock()
	return true
}

// sendHeldConfirm sends a held confirmation that no packet took along.
func (ch *channel) sendHeldConfirm() {
	ch.writeMu.Lock()
	defer ch.writeMu.Unlock()
	if ch.sentClose {
		return
	}
	// An error is the connection's; its reader sees it too.
	_ = ch.sendHeldConfirmLocked()
}

// sendHeldConfirmLocked sends a held confirmation, if any, ahead of the
// packet the caller (holding writeMu) is about to send.
func (ch *channel) sendHeldConfirmLocked() error {
	if ch.heldConfirm == nil {
		return nil
	}
	p := ch.heldConfirm
	ch.dropHeldConfirmLocked()
	return ch.mux.conn.writePacket(p)
}

// dropHeldConfirmLocked forgets a held confirmation (sent, or the
// channel closed); writeMu is held.
func (ch *channel) dropHeldConfirmLocked() {
	if ch.heldConfirm == nil {
		return
	}
	ch.heldConfirm = nil
	ch.confirmTimer.Stop()
}

// openChannelEarly sends an open and returns the channel without waiting
// for the answer: see the top of this file.
func (m *mux) openChannelEarly(chanType string, extra []byte) (*channel, error) {
	return m.openChannelEarlyWindow(chanType, extra, 0)
}

// openChannelEarlyWindow is openChannelEarly granting the peer window
// bytes, not channelInitialWindow, when window is set (NewSessionWindow's,
// change 18).
func (m *mux) openChannelEarlyWindow(chanType string, extra []byte, window uint32) (*channel, error) {
	ch := m.newChannel(chanType, channelOutbound, extra, true)
	if m.chanList.isClosed() {
		return nil, io.EOF
	}
	if window != 0 {
		ch.windowMu.Lock()
		ch.myWindow, ch.myLimit = window, window
		ch.windowMu.Unlock()
	}
	open := channelOpenMsg{
		ChanType:         chanType,
		PeersWindow:      ch.myWindow,
		MaxPacketSize:    channelMaxPacket,
		TypeSpecificData: extra,
		PeersID:          ch.localId,
	}
	// m.sendMessage: the channel's own would wait for the answer. The
	// open is held for the early data that usually follows at once (a
	// forward's first bytes): both then go out in one write, one message
	// fewer across every process of the path (held.go). Whatever
	// waits on the peer instead (a read, a close, the answer) sends it.
	ch.openHeld.Store(true)
	if err := m.sendMessageAs(open, true); err != nil {
		ch.close()
		m.chanList.remove(ch.localId)
		return nil, err
	}
	return ch, nil
}

// sendHeldOpen sends an early open still held back (openChannelEarly) by
// flushing the connection's held packets.
func (ch *channel) sendHeldOpen() {
	if ch.openHeld.Load() && ch.openHeld.Swap(false) {
		if lc, ok := ch.mux.conn.(lazyConn); ok {
			lc.sendHeld()
		}
	}
}

// DialEarly is Dial for TCP that returns before the remote host has
// connected: the connection's first writes (up to 32 KiB) go out as early
// data, and a failed connect shows as the error of its Read or Write (an
// *OpenChannelError) instead of DialEarly's; a connection that ends before
// the answer, as ErrOpenUnanswered. Close and CloseWrite before the answer
// return at once (the CLOSE or EOF goes with it). Use it only with a
// server that handles early data; a hostgate server says so in its
// version.
func (c *Client) DialEarly(n, addr string) (net.Conn, error) {
	conn, ok := c.Conn.(*connection)
	switch n {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, fmt.Errorf("ssh: unsupported protocol for early dial: %s", n)
	}
	if !ok {
		return c.Dial(n, addr)
	}
	host, portString, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portString, 10, 16)
	if err != nil {
		return nil, err
	}
	msg := channelOpenDirectMsg{raddr: host, rport: uint32(port), laddr: net.IPv4zero.String(), lport: 0}
	ch, err := conn.mux.openChannelEarly("direct-tcpip", Marshal(&msg))
	if err != nil {
		return nil, err
	}
	DiscardLazily(ch, ch.incomingRequests) // hostgate: change 13
	zero := &net.TCPAddr{IP: net.IPv4zero}
	return &chanConn{Channel: ch, laddr: zero, raddr: zero}, nil
}
