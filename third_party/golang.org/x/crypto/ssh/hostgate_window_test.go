package ssh

import (
	"bytes"
	"io"
	"testing"
	"time"
)

// TestHostgateSlowReaderAdjustsBatched: a program that reads slower than
// its peer sends (its buffer never empties) gets window adjusts in steps
// of a quarter of the window, not one per read. With the window full, the
// "less than half left" rule sent an adjust for every 32 KiB read (16 while
// reading half the first window: each a message that crosses every
// process of a gateway path); it now holds until a Read empties the
// buffer, when the program would otherwise wait. Reading everything still
// gives the whole window back, and grows it.
func TestHostgateSlowReaderAdjustsBatched(t *testing.T) {
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
	if open.PeersWindow != channelInitialWindow {
		t.Fatalf("window offered %d, want %d", open.PeersWindow, channelInitialWindow)
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
	// The peer fills the whole window.
	for range channelInitialWindow / channelMaxPacket {
		if err := peer.writePacket(Marshal(channelDataMsg{PeersID: open.PeersID, Length: channelMaxPacket, Rest: bytes.Repeat([]byte{'x'}, channelMaxPacket)})); err != nil {
			t.Fatal(err)
		}
	}
	// Wait until the mux has taken every packet in: the round trip of a
	// request for another channel comes back after them.
	if err := peer.writePacket(Marshal(channelRequestMsg{PeersID: 1 << 30, Request: "x", WantReply: true})); err != nil {
		t.Fatal(err)
	}
	if p, err := peer.readPacket(); err != nil || p[0] != msgChannelFailure {
		t.Fatalf("peer got %v, %v; want a channel failure", p, err)
	}
	adjusts := func() (n int, bytes uint32) {
		for {
			select {
			case p := <-peer.in:
				var adj windowAdjustMsg
				if err := Unmarshal(p, &adj); err != nil {
					t.Fatalf("peer got %v, want window adjusts only", p)
				}
				n, bytes = n+1, bytes+adj.AdditionalBytes
			case <-time.After(100 * time.Millisecond):
				return n, bytes
			}
		}
	}
	buf := make([]byte, channelMaxPacket)
	for range channelInitialWindow / 2 / channelMaxPacket {
		if _, err := io.ReadFull(ch, buf); err != nil {
			t.Fatal(err)
		}
	}
	n, first := adjusts()
	if n > 2 {
		t.Fatalf("%d window adjusts while a slow reader read half its window in %d KiB reads, want at most 2", n, channelMaxPacket>>10)
	}
	for range channelInitialWindow / 2 / channelMaxPacket {
		if _, err := io.ReadFull(ch, buf); err != nil {
			t.Fatal(err)
		}
	}
	// Everything read, the buffer empty: the whole window is given back,
	// doubled, since the program waits on it.
	_, rest := adjusts()
	if got := first + rest; got != 2*channelInitialWindow {
		t.Fatalf("window adjusts gave back %d bytes once all %d were read, want %d", got, channelInitialWindow, 2*channelInitialWindow)
	}
}
