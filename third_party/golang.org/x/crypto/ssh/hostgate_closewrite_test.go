package ssh

import (
	"errors"
	"io"
	"testing"
)

// TestHostgateCloseWriteRacingWrite: a CloseWrite while another goroutine
// writes (a copy loop's, or an http.Server's, on a forwarded net.Conn).
// No data may follow the EOF on the wire (RFC 4254 5.3: none is sent after
// it, and OpenSSH may end the connection for it); the peer gets exactly the
// bytes the Writes said they sent; a Write that loses the race fails with
// ErrWriteAfterCloseWrite, not io.EOF, which would pass for success in
// io.Copy's caller. sentEOF was a plain bool read by Write and set by
// CloseWrite: -race failed on it, and a Write that had checked it went on
// to send its packet after the EOF.
func TestHostgateCloseWriteRacingWrite(t *testing.T) {
	for range 50 {
		closeWriteRound(t)
		if t.Failed() {
			return
		}
	}
}

func closeWriteRound(t *testing.T) {
	ch, peer, _ := deadlineChannel(t, 1<<30)
	defer ch.Close()
	type peerResult struct {
		data int
		err  error
	}
	got := make(chan peerResult, 1)
	go func() {
		var r peerResult
		eof := false
		for {
			p, err := peer.readPacket()
			if err != nil {
				r.err = err
				break
			}
			if p[0] == msgChannelClose {
				break
			}
			if p[0] == msgChannelEOF {
				eof = true
				continue
			}
			var msg channelDataMsg
			if err := Unmarshal(p, &msg); err != nil {
				r.err = err
				break
			}
			if eof {
				r.err = errors.New("channel data after the EOF")
				break
			}
			r.data += len(msg.Rest)
		}
		got <- r
	}()

	wrote := make(chan result, 1)
	start := make(chan struct{})
	go func() {
		var r result
		buf := make([]byte, 100)
		close(start)
		for r.err == nil {
			var n int
			n, r.err = ch.Write(buf)
			r.n += n
		}
		wrote <- r
	}()
	<-start
	if err := ch.CloseWrite(); err != nil {
		t.Errorf("CloseWrite: %v", err)
	}
	w := <-wrote
	if !errors.Is(w.err, ErrWriteAfterCloseWrite) {
		t.Errorf("Write after CloseWrite: %v, want ErrWriteAfterCloseWrite", w.err)
	}
	if errors.Is(w.err, io.EOF) {
		t.Errorf("Write after CloseWrite: %v, which passes for io.EOF", w.err)
	}
	_ = ch.Close()
	r := <-got
	if r.err != nil {
		t.Errorf("peer: %v", r.err)
	}
	if r.data != w.n {
		t.Errorf("peer got %d bytes, the Writes said they sent %d", r.data, w.n)
	}
}

// TestHostgateCloseWriteEndsBlockedWrite: a Write waiting for window the
// peer does not grant ends when CloseWrite sends the EOF (as a blocked
// write to a TCP socket fails when it is shut down), with the bytes it
// sent, and nothing follows the EOF once window comes.
func TestHostgateCloseWriteEndsBlockedWrite(t *testing.T) {
	ch, peer, _ := deadlineChannel(t, 10)
	defer ch.Close()
	wrote := make(chan result, 1)
	go func() {
		n, err := ch.Write(make([]byte, 100))
		wrote <- result{n, err}
	}()
	ch.remoteWin.waitWriterBlocked()
	if err := ch.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	r := await(t, "Write blocked on window at CloseWrite", wrote)
	if r.n != 10 || !errors.Is(r.err, ErrWriteAfterCloseWrite) {
		t.Fatalf("Write blocked at CloseWrite: %d, %v; want the 10 bytes the window took and ErrWriteAfterCloseWrite", r.n, r.err)
	}
	if err := peer.writePacket(Marshal(windowAdjustMsg{PeersID: ch.localId, AdditionalBytes: 1000})); err != nil {
		t.Fatal(err)
	}
	if n, err := ch.Write([]byte("late")); n != 0 || !errors.Is(err, ErrWriteAfterCloseWrite) {
		t.Fatalf("Write after CloseWrite: %d, %v; want 0 and ErrWriteAfterCloseWrite", n, err)
	}
	var kinds []byte
	for {
		p, err := peer.readPacket()
		if err != nil {
			t.Fatal(err)
		}
		if p[0] == msgChannelData && len(kinds) > 0 {
			t.Fatalf("peer got channel data after %v", kinds)
		}
		if p[0] == msgChannelEOF {
			break
		}
		kinds = append(kinds, p[0])
	}
	// Nothing after the EOF: the next packet the peer gets is the answer
	// to a request sent after everything above.
	if got := roundTrip(t, peer); len(got) != 0 {
		t.Fatalf("peer got %d bytes of channel data after the EOF", len(got))
	}
}

// TestHostgateCloseWriteTwiceOneEOF: a second CloseWrite is a no-op, as a
// second shutdown(SHUT_WR) is; it sent a second EOF, as upstream does.
func TestHostgateCloseWriteTwiceOneEOF(t *testing.T) {
	ch, peer, _ := deadlineChannel(t, 1<<20)
	for range 3 {
		if err := ch.CloseWrite(); err != nil {
			t.Fatal(err)
		}
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	eofs := 0
	for {
		p, err := peer.readPacket()
		if err != nil {
			t.Fatal(err)
		}
		if p[0] == msgChannelEOF {
			eofs++
		}
		if p[0] == msgChannelClose {
			break
		}
	}
	if eofs != 1 {
		t.Fatalf("three CloseWrites sent %d EOFs, want 1", eofs)
	}
}
