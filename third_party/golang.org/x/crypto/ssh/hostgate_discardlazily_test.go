package ssh

import (
	"encoding/binary"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestHostgateDiscardLazily: a channel given to DiscardLazily starts no
// goroutine until a request or extended data arrives for it (upstream's
// forwarded connections started two each, woken again at their close);
// then its requests are answered no and its extended data is read, so
// its window comes back, as upstream's goroutines did.
func TestHostgateDiscardLazily(t *testing.T) {
	// Earlier tests' channels end with their mux, soon after them.
	for deadline := time.Now().Add(10 * time.Second); discardGoroutines() > 0; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatal("earlier tests' discarding goroutines still run after 10 s")
		}
	}
	ch, peer, id := deadlineChannel(t, 1<<20)
	DiscardLazily(ch, ch.incomingRequests)
	roundTrip(t, peer)
	if n := discardGoroutines(); n != 0 {
		t.Errorf("%d discarding goroutines before anything arrived, want 0", n)
	}
	peerRequest(t, peer, id, true)
	if got := peerAwait(t, peer); got != msgChannelFailure {
		t.Fatalf("peer got message %d for its request, want a failure (%d)", got, msgChannelFailure)
	}
	peerStderr(t, peer, id, channelInitialWindow)
	if got := peerAwait(t, peer); got != msgChannelWindowAdjust {
		t.Fatalf("peer got message %d after filling the window with stderr, want a window adjust (%d)", got, msgChannelWindowAdjust)
	}
}

// TestHostgateDiscardLazilyQueuedBefore: a request and extended data that
// arrived before DiscardLazily (between a client's open and its return)
// are discarded too, though nothing arrives after: the request is
// answered, and the stderr that filled the window is read, so the window
// comes back.
func TestHostgateDiscardLazilyQueuedBefore(t *testing.T) {
	ch, peer, id := deadlineChannel(t, 1<<20)
	peerRequest(t, peer, id, true)
	peerStderr(t, peer, id, channelInitialWindow)
	roundTrip(t, peer)
	DiscardLazily(ch, ch.incomingRequests)
	// The window may come back in more than one adjust.
	failed, adjusted := false, false
	for !failed || !adjusted {
		switch got := peerAwait(t, peer); got {
		case msgChannelFailure:
			failed = true
		case msgChannelWindowAdjust:
			adjusted = true
		default:
			t.Fatalf("peer got message %d, want a failure (%d) for its request and window adjusts (%d)", got, msgChannelFailure, msgChannelWindowAdjust)
		}
	}
}

// discardGoroutines counts the goroutines that answer requests or drop
// extended data, started or not yet (by what created them: one not yet
// run shows none of its own frames).
func discardGoroutines() int {
	buf := make([]byte, 1<<20)
	n := 0
	for g := range strings.SplitSeq(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "created by golang.org/x/crypto/ssh.DiscardLazily") ||
			strings.Contains(g, "created by golang.org/x/crypto/ssh.(*channel).startDiscards") {
			n++
		}
	}
	return n
}

func peerRequest(t *testing.T, peer *pipePackets, id uint32, wantReply bool) {
	t.Helper()
	if err := peer.writePacket(Marshal(channelRequestMsg{PeersID: id, Request: "x", WantReply: wantReply})); err != nil {
		t.Fatal(err)
	}
}

// peerStderr sends n bytes of stderr (extended data type 1) in packets of
// 16 KiB.
func peerStderr(t *testing.T, peer *pipePackets, id uint32, n int) {
	t.Helper()
	for n > 0 {
		size := min(n, 16<<10)
		p := make([]byte, 13+size)
		p[0] = msgChannelExtendedData
		binary.BigEndian.PutUint32(p[1:], id)
		binary.BigEndian.PutUint32(p[5:], 1)
		binary.BigEndian.PutUint32(p[9:], uint32(size))
		if err := peer.writePacket(p); err != nil {
			t.Fatal(err)
		}
		n -= size
	}
}

// peerAwait returns the type of the next packet the peer gets, failing
// the test if none comes in 10 s.
func peerAwait(t *testing.T, peer *pipePackets) byte {
	t.Helper()
	got := make(chan result, 1)
	go func() {
		p, err := peer.readPacket()
		if err != nil {
			got <- result{err: err}
			return
		}
		got <- result{n: int(p[0])}
	}()
	r := await(t, "the peer's read", got)
	if r.err != nil {
		t.Fatal(r.err)
	}
	return byte(r.n)
}
