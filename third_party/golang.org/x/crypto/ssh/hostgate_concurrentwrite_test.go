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
