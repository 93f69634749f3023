package ssh

import (
	"bytes"
	"testing"
	"time"
)

// TestHostgateSendLimit: under a send limit (ServerConn.SetSendLimit) a
// channel never has more than the limit sent and not given back, though
// the peer's window is 2 MiB and grows by 1 MiB more, and every byte
// arrives once the peer gives the window back; without the limit the
// whole write is sent before the peer gives any back. OpenSSH's ssh held
// everything it was sent beyond what its reader had taken, and paid for
// it in memmove and page faults.
func TestHostgateSendLimit(t *testing.T) {
	const (
		limit = 256 << 10
		total = 1 << 20
	)
	for _, limited := range []bool{true, false} {
		local, peer := packetPipe()
		m := newMux(local)
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
			PeersID: open.PeersID, MyID: 7, MyWindow: 2 << 20, MaxPacketSize: channelMaxPacket,
		})); err != nil {
			t.Fatal(err)
		}
		ch := <-opened
		if ch == nil {
			t.FailNow()
		}
		if limited {
			m.setSendLimit(limit)
		}
		// The peer's window grows, while nothing is outstanding: the
		// limit holds against the largest. (A request's answer behind it
		// says the mux has taken it before anything is written.)
		if err := peer.writePacket(Marshal(windowAdjustMsg{PeersID: open.PeersID, AdditionalBytes: 1 << 20})); err != nil {
			t.Fatal(err)
		}
		if err := peer.writePacket(Marshal(channelRequestMsg{PeersID: 1 << 30, Request: "x", WantReply: true})); err != nil {
			t.Fatal(err)
		}
		if p, err := peer.readPacket(); err != nil || p[0] != msgChannelFailure {
			t.Fatalf("the peer got message %v (%v), want the answer to its request", p, err)
		}
		want := bytes.Repeat([]byte("hostgate"), total/8)
		wrote := make(chan error, 1)
		go func() {
			_, err := ch.Write(want)
			wrote <- err
		}()
		var got []byte
		given, most := 0, 0 // bytes given back; the most ever outstanding
		for len(got) < total {
			p, err := peer.readPacket()
			if err != nil {
				t.Fatal(err)
			}
			var data channelDataMsg
			if p[0] != msgChannelData || Unmarshal(p, &data) != nil {
				continue
			}
			got = append(got, data.Rest...)
			most = max(most, len(got)-given)
			if limited && len(got)-given > limit {
				t.Fatalf("%d bytes outstanding, over the limit of %d", len(got)-given, limit)
			}
			// A limited sender stops at the limit: what comes next is the
			// answer to a request sent after a pause, not data. Only then
			// is the window given back.
			if limited && len(got)-given == limit {
				time.Sleep(20 * time.Millisecond) // a sender that goes on sends now
				if err := peer.writePacket(Marshal(channelRequestMsg{PeersID: 1 << 30, Request: "x", WantReply: true})); err != nil {
					t.Fatal(err)
				}
				if p, err := peer.readPacket(); err != nil || p[0] != msgChannelFailure {
					t.Fatalf("after %d bytes outstanding the peer got message %v (%v), want the sender stopped at the limit", limit, p[0], err)
				}
				if err := peer.writePacket(Marshal(windowAdjustMsg{PeersID: open.PeersID, AdditionalBytes: uint32(len(got) - given)})); err != nil {
					t.Fatal(err)
				}
				given = len(got)
			}
		}
		if err := <-wrote; err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("limited %v: the bytes that arrived differ from those written", limited)
		}
		if wantMost := map[bool]int{true: limit, false: total}[limited]; most != wantMost {
			t.Fatalf("limited %v: at most %d bytes outstanding, want %d", limited, most, wantMost)
		}
		m.Close()
	}
}
