package ssh

import (
	"bytes"
	"io"
	"testing"
)

// TestHostgateWindowLimit: a channel whose window is limited
// (Session.SetWindowLimit) after it opened with the initial window gives
// back only the limit once its program has read everything, and does not
// grow past it however fast the program reads; without the limit the same
// reads double the window (to 2 MiB here, up to 8 MiB): a web terminal's
// output then waited at the gateway, up to 8 MiB of it ahead of the page,
// all of which a Ctrl-C had to wait for.
func TestHostgateWindowLimit(t *testing.T) {
	const limit = 256 << 10
	local, peer := packetPipe()
	m := newMux(local)
	defer m.Close()

	opened := make(chan *channel, 1)
	go func() {
		ch, err := m.openChannel("session", nil)
		if err != nil {
			t.Error(err)
		}
		opened <- ch
	}()
	p, err := peer.readPacket()
	if err != nil {
		t.Fatal(err)
	}
	var open channelOpenMsg
	if err := Unmarshal(p, &open); err != nil {
		t.Fatal(err)
	}
	if err := peer.writePacket(Marshal(channelOpenConfirmMsg{
		PeersID: open.PeersID, MyID: 7, MyWindow: 1 << 20, MaxPacketSize: channelMaxPacket,
	})); err != nil {
		t.Fatal(err)
	}
	ch := <-opened
	if ch == nil {
		t.FailNow()
	}
	sess := &Session{ch: ch}
	sess.SetWindowLimit(limit)

	credit := open.PeersWindow // what the peer may send now
	buf := make([]byte, channelMaxPacket)
	// send writes what the peer may, the program reads all of it, and
	// the peer takes the adjusts: they come in the packets after the
	// data, before the answer to a request the peer sends behind it.
	send := func() (sent uint32) {
		for credit >= channelMaxPacket {
			if err := peer.writePacket(Marshal(channelDataMsg{PeersID: open.PeersID, Length: channelMaxPacket, Rest: bytes.Repeat([]byte{'x'}, channelMaxPacket)})); err != nil {
				t.Fatal(err)
			}
			credit -= channelMaxPacket
			sent += channelMaxPacket
		}
		for range sent / channelMaxPacket {
			if _, err := io.ReadFull(ch, buf); err != nil {
				t.Fatal(err)
			}
		}
		if err := peer.writePacket(Marshal(channelRequestMsg{PeersID: 1 << 30, Request: "x", WantReply: true})); err != nil {
			t.Fatal(err)
		}
		for {
			p, err := peer.readPacket()
			if err != nil {
				t.Fatal(err)
			}
			if p[0] == msgChannelFailure {
				return sent
			}
			var adj windowAdjustMsg
			if err := Unmarshal(p, &adj); err != nil {
				t.Fatalf("peer got %v, want window adjusts", p)
			}
			credit += adj.AdditionalBytes
		}
	}
	if sent := send(); sent != channelInitialWindow {
		t.Fatalf("the peer sent %d bytes of the initial window, want %d", sent, channelInitialWindow)
	}
	for round := range 4 {
		if credit != limit {
			t.Fatalf("round %d: the peer may send %d bytes ahead of the program, want the limit, %d", round, credit, limit)
		}
		send()
	}
}

// TestHostgateOpenChannelWindow: a channel opened with a window of its
// own (Client.NewSessionWindow) grants the peer that much at first, not
// channelInitialWindow, and grows from there as its program reads: a
// window once granted cannot be taken back, so a terminal's host could
// fill the initial 1 MiB before its reader limited it.
func TestHostgateOpenChannelWindow(t *testing.T) {
	const window = 64 << 10
	local, peer := packetPipe()
	m := newMux(local)
	defer m.Close()
	opened := make(chan *channel, 1)
	go func() {
		ch, err := m.openChannelWindow("session", nil, window)
		if err != nil {
			t.Error(err)
		}
		opened <- ch
	}()
	p, err := peer.readPacket()
	if err != nil {
		t.Fatal(err)
	}
	var open channelOpenMsg
	if err := Unmarshal(p, &open); err != nil {
		t.Fatal(err)
	}
	if open.PeersWindow != window {
		t.Fatalf("the channel opened granting %d bytes, want %d", open.PeersWindow, window)
	}
	if err := peer.writePacket(Marshal(channelOpenConfirmMsg{
		PeersID: open.PeersID, MyID: 7, MyWindow: 1 << 20, MaxPacketSize: channelMaxPacket,
	})); err != nil {
		t.Fatal(err)
	}
	ch := <-opened
	if ch == nil {
		t.FailNow()
	}
	// The peer sends the window; the program reads it all, and the peer
	// gets it back, doubled: the window grows as it is read.
	for range window / channelMaxPacket {
		if err := peer.writePacket(Marshal(channelDataMsg{PeersID: open.PeersID, Length: channelMaxPacket, Rest: bytes.Repeat([]byte{'x'}, channelMaxPacket)})); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := io.ReadFull(ch, make([]byte, window)); err != nil {
		t.Fatal(err)
	}
	var credit uint32
	for credit < 2*window {
		p, err := peer.readPacket()
		if err != nil {
			t.Fatal(err)
		}
		var adj windowAdjustMsg
		if err := Unmarshal(p, &adj); err != nil {
			t.Fatalf("peer got %v, want window adjusts", p)
		}
		credit += adj.AdditionalBytes
	}
	if credit != 2*window {
		t.Fatalf("the peer got %d bytes back after the program read %d, want %d", credit, window, 2*window)
	}
}
