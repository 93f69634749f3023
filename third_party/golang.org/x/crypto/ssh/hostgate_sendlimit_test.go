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
	// The peer here gives window back 20 ms after the sender stops, which
	// a slow machine must not take for a stall.
	defer func(d time.Duration) { sendStall = d }(sendStall)
	sendStall = time.Minute
	const (
		limit = 256 << 10
		total = 1 << 20
	)
	for _, limited := range []bool{true, false} {
		m, ch, peer, peersID := openForLimit(t, 2<<20)
		if limited {
			m.setSendLimit(limit)
		}
		// The peer's window grows, while nothing is outstanding: the
		// limit holds against the largest. (A request's answer behind it
		// says the mux has taken it before anything is written.)
		if err := peer.writePacket(Marshal(windowAdjustMsg{PeersID: peersID, AdditionalBytes: 1 << 20})); err != nil {
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
				if err := peer.writePacket(Marshal(windowAdjustMsg{PeersID: peersID, AdditionalBytes: uint32(len(got) - given)})); err != nil {
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

// openForLimit opens a channel of a new mux to a peer over a packet pipe,
// the peer confirming it with window win; peersID is what the peer's
// messages about the channel carry.
func openForLimit(t *testing.T, win uint32) (m *mux, ch *channel, peer *pipePackets, peersID uint32) {
	t.Helper()
	local, peer := packetPipe()
	m = newMux(local)
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
		PeersID: open.PeersID, MyID: 7, MyWindow: win, MaxPacketSize: channelMaxPacket,
	})); err != nil {
		t.Fatal(err)
	}
	if ch = <-opened; ch == nil {
		t.FailNow()
	}
	return m, ch, peer, open.PeersID
}

// TestHostgateSendLimitStall: a peer that gives window back only once
// half of it is out (PuTTY does so) would wait for good under a limit
// smaller than that, and so would the sender. The stall guard suspends
// the limit when the peer gave nothing back for sendStall, and a limit
// the connection sets meanwhile (its keepalives lower it) waits; the
// peer's next window adjust brings the limit back at no less than twice
// that adjust, which this peer needs: every byte arrives. Before the
// guard the limit was set for OpenSSH's clients alone, for this reason,
// and a client calling itself OpenSSH that gave window back so hung.
func TestHostgateSendLimitStall(t *testing.T) {
	defer func(d time.Duration) { sendStall = d }(sendStall)
	sendStall = 50 * time.Millisecond
	const (
		win   = 2 << 20
		limit = 256 << 10
		total = 4 << 20
	)
	m, ch, peer, peersID := openForLimit(t, win)
	defer m.Close()
	m.setSendLimit(limit)
	want := bytes.Repeat([]byte("hostgate"), total/8)
	wrote := make(chan error, 1)
	go func() {
		_, err := ch.Write(want)
		wrote <- err
	}()
	stop := time.AfterFunc(20*time.Second, func() { _ = m.Close() })
	defer stop.Stop()
	var got []byte
	given, most, relimited := 0, 0, false
	for len(got) < total {
		p, err := peer.readPacket()
		if err != nil {
			t.Fatalf("after %d bytes of %d (at most %d outstanding): %v; the sender waited for good", len(got), total, most, err)
		}
		var data channelDataMsg
		if p[0] != msgChannelData || Unmarshal(p, &data) != nil {
			continue
		}
		got = append(got, data.Rest...)
		most = max(most, len(got)-given)
		if most > limit && !relimited {
			// Lifted: a lower limit for the connection, as its keepalives
			// set, must not hold this channel again.
			m.setSendLimit(limit / 2)
			relimited = true
			ch.remoteWin.L.Lock()
			l := ch.remoteWin.limit
			ch.remoteWin.L.Unlock()
			if l != 0 {
				t.Fatalf("the connection's new limit set the lifted channel's to %d", l)
			}
		}
		if len(got)-given >= win/2 {
			if err := peer.writePacket(Marshal(windowAdjustMsg{PeersID: peersID, AdditionalBytes: uint32(len(got) - given)})); err != nil {
				t.Fatal(err)
			}
			given = len(got)
		}
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the bytes that arrived differ from those written")
	}
	if most < win/2 {
		t.Fatalf("at most %d bytes outstanding, want the limit lifted to the window (%d)", most, win)
	}
	ch.remoteWin.L.Lock()
	l := ch.remoteWin.limit
	ch.remoteWin.L.Unlock()
	if l < win {
		t.Fatalf("after the peer's first window adjust of half its window the limit is %d, want at least twice that adjust (%d)", l, win)
	}
}

// TestHostgateSendLimitResumes: a peer whose reader pauses gives nothing
// back, and after sendStall it is sent its whole window, as a server
// without a limit sends it; once it gives window back in small steps
// again, as OpenSSH does after consuming three packets, the limit holds
// again: the sender stops with the limit outstanding.
func TestHostgateSendLimitResumes(t *testing.T) {
	defer func(d time.Duration) { sendStall = d }(sendStall)
	sendStall = 200 * time.Millisecond
	const (
		win   = 2 << 20
		limit = 256 << 10
		step  = 96 << 10
		total = 4 << 20
	)
	m, ch, peer, peersID := openForLimit(t, win)
	defer m.Close()
	m.setSendLimit(limit)
	want := bytes.Repeat([]byte("hostgate"), total/8)
	wrote := make(chan error, 1)
	go func() {
		_, err := ch.Write(want)
		wrote <- err
	}()
	stop := time.AfterFunc(20*time.Second, func() { _ = m.Close() })
	defer stop.Stop()
	var got []byte
	given := 0
	// giveBack gives back what is out in steps, as a reader that has
	// caught up does.
	giveBack := func() {
		for given < len(got) {
			n := min(step, len(got)-given)
			if err := peer.writePacket(Marshal(windowAdjustMsg{PeersID: peersID, AdditionalBytes: uint32(n)})); err != nil {
				t.Fatal(err)
			}
			given += n
		}
	}
	for first := true; len(got) < total; first = false {
		// Read until the sender stops: the whole window the first time
		// (the reader paused, the stall guard suspended the limit), the
		// limit after (the peer gave window back).
		wantOut := limit
		if first {
			wantOut = win
		}
		for len(got)-given < wantOut && len(got) < total {
			p, err := peer.readPacket()
			if err != nil {
				t.Fatalf("after %d bytes of %d (%d outstanding): %v", len(got), total, len(got)-given, err)
			}
			var data channelDataMsg
			if p[0] != msgChannelData || Unmarshal(p, &data) != nil {
				continue
			}
			got = append(got, data.Rest...)
			if out := len(got) - given; !first && out > limit {
				t.Fatalf("%d bytes outstanding after the peer gave window back in steps, over the limit of %d", out, limit)
			}
		}
		if !first && len(got) < total {
			// What comes next is the answer to a request sent after a
			// pause, not data: the sender stopped at the limit.
			time.Sleep(20 * time.Millisecond)
			if err := peer.writePacket(Marshal(channelRequestMsg{PeersID: 1 << 30, Request: "x", WantReply: true})); err != nil {
				t.Fatal(err)
			}
			if p, err := peer.readPacket(); err != nil || p[0] != msgChannelFailure {
				t.Fatalf("with %d bytes outstanding the peer got message %v (%v), want the sender stopped at the limit", limit, p[0], err)
			}
		}
		giveBack()
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the bytes that arrived differ from those written")
	}
}
