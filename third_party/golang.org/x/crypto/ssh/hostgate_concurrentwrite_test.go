package ssh

import (
	"bytes"
	"sync"
	"testing"
)

// TestHostgateConcurrentWrites: Writes from several goroutines at once (a
// net.Conn allows them) each send their own bytes. They shared the
// channel's one packet buffer, so a packet could carry another Write's
// bytes, or a mix (x/net's nettest.TestConn found it under the race
// detector, which fails this test too).
func TestHostgateConcurrentWrites(t *testing.T) {
	ch, peer, _ := deadlineChannel(t, 1<<30)
	const writers, writes, size = 4, 200, 1000
	got := make(chan error, 1)
	go func() {
		for range writers * writes {
			p, err := peer.readPacket()
			if err != nil {
				got <- err
				return
			}
			var msg channelDataMsg
			if err := Unmarshal(p, &msg); err != nil {
				got <- err
				return
			}
			if len(msg.Rest) != size || bytes.Count(msg.Rest, msg.Rest[:1]) != size {
				t.Errorf("a packet of %d bytes mixes Writes: %q…", len(msg.Rest), msg.Rest[:min(len(msg.Rest), 40)])
			}
		}
		got <- nil
	}()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			data := bytes.Repeat([]byte{'a' + byte(w)}, size)
			for range writes {
				if _, err := ch.Write(data); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// TestHostgateConcurrentWritesWhole: Writes from several goroutines at
// once each reach the peer whole, one after another, as a TCP conn's do
// (its Write holds the socket until all its bytes are sent): a Write
// bigger than the peer's window goes in several packets, and another
// Write's packets must not come between them. The peer here grants its
// window a little at a time, so every Write waits for window between its
// packets. Which Write takes a grant is the scheduler's choice: 20 rounds
// make a mix all but certain where Writes can mix (each round alone
// showed one about half the time, and every time under -race).
func TestHostgateConcurrentWritesWhole(t *testing.T) {
	for range 20 {
		concurrentWritesRound(t)
		if t.Failed() {
			return
		}
	}
}

func concurrentWritesRound(t *testing.T) {
	const writers, size, grant = 4, 1000, 100
	ch, peer, _ := deadlineChannel(t, grant)
	defer ch.Close()
	got := make(chan []byte, 1)
	go func() {
		var data []byte
		for len(data) < writers*size {
			p, err := peer.readPacket()
			if err != nil {
				t.Error(err)
				break
			}
			var msg channelDataMsg
			if err := Unmarshal(p, &msg); err != nil {
				t.Errorf("peer got %v, want channel data", p)
				break
			}
			data = append(data, msg.Rest...)
			if err := peer.writePacket(Marshal(windowAdjustMsg{PeersID: ch.localId, AdditionalBytes: msg.Length})); err != nil {
				t.Error(err)
				break
			}
		}
		got <- data
	}()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			if _, err := ch.Write(bytes.Repeat([]byte{'a' + byte(w)}, size)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	data := <-got
	for i := 0; i < len(data); i += size {
		if run := data[i:min(i+size, len(data))]; bytes.Count(run, run[:1]) != size {
			t.Errorf("bytes %d to %d mix Writes: %q", i, i+len(run), run)
			return
		}
	}
}
