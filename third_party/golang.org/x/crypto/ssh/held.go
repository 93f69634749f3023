// hostgate: packets nothing waits for go with the next one (HOSTGATE.md,
// change 25).

package ssh

import "time"

// holdDelay bounds how long a held packet waits for another to go out
// with. On a busy connection the next packet takes it along within a
// fraction of this; an idle one sends it on its own after it.
var holdDelay = 2 * time.Millisecond // tests change it

// A held packet is encrypted at once, in its turn, and left in the
// transport's write buffer: the next packet's write carries it, so the
// peer, and every process of a path between (the gateway, yamux), is
// woken once for both. Held are:
//   - a forwarded connection's CLOSE that nothing waits for (lazyClose);
//   - an early open (openChannelEarly): its early data follows at once.

// lazyConn is a packetConn that can hold a packet (*handshakeTransport).
type lazyConn interface {
	writePacketAs(p []byte, lazy bool) error
	sendHeld() // sends held packets now
}

// heldWriter is a transport that can encrypt a packet into its write
// buffer and leave it there (*transport).
type heldWriter interface {
	writePacketHeld(packet []byte) error
	flushHeld() error
}

// holdPacket writes p into the transport's buffer without flushing it,
// and makes sure the buffer is flushed within holdDelay if no other packet
// flushes it first. t.mu held.
func (t *handshakeTransport) holdPacket(p []byte) error {
	hw, ok := t.conn.(heldWriter)
	if !ok {
		return t.pushPacket(p)
	}
	if debugHandshake {
		t.printPacket(p, true)
	}
	if err := hw.writePacketHeld(p); err != nil {
		return err
	}
	if !t.held {
		t.held = true
		if t.heldTimer == nil {
			t.heldTimer = time.AfterFunc(holdDelay, t.sendHeld)
		} else {
			t.heldTimer.Reset(holdDelay)
		}
	}
	return nil
}

// sendHeld writes what holdPacket left in the buffer, unless a write has
// taken it out since: at holdDelay, or when something waits on the peer.
func (t *handshakeTransport) sendHeld() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.held || t.writeError != nil {
		return
	}
	t.held = false
	t.heldTimer.Stop()
	if err := t.conn.(heldWriter).flushHeld(); err != nil {
		t.writeError = err
		t.writeCond.Broadcast()
	}
}

// lazyClose says whether a CLOSE of a channel of this type may be held:
// nothing waits for it, once both sides' EOFs have passed or when it
// answers the peer's CLOSE, but the peer's bookkeeping. A session's is
// never held: a client's Wait returns on the server's CLOSE, and a server
// counts a session (MaxSessions) until the client's.
func lazyClose(chanType string) bool {
	switch chanType {
	case "direct-tcpip", "forwarded-tcpip", "direct-streamlocal@openssh.com", "forwarded-streamlocal@openssh.com":
		return true
	}
	return false
}
