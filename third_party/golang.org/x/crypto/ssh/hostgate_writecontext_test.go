package ssh

import (
	"bytes"
	"context"
	"errors"
	"testing"
)

// TestHostgateWriteContext: a WriteContext waiting for window the peer
// does not grant returns, when its ctx ends, the bytes it sent and ctx's
// cause, and the channel goes on: a plain Write then sends the rest as
// window comes, and the peer gets every byte once, in order (change 16).
// A ctx ended before the call sends nothing. Without the change the write
// waits for window for as long as the peer withholds it.
func TestHostgateWriteContext(t *testing.T) {
	ch, peer, _ := deadlineChannel(t, 10)
	data := []byte("0123456789abcdefghijklmnopqrstuvwxyz")
	stuck := errors.New("the host stopped reading")

	ctx, cancel := context.WithCancelCause(context.Background())
	first := make(chan result, 1)
	go func() {
		n, err := ch.WriteContext(ctx, data)
		first <- result{n, err}
	}()
	ch.remoteWin.waitWriterBlocked()
	cancel(stuck)
	r := await(t, "WriteContext on a full window", first)
	if !errors.Is(r.err, stuck) || r.n != 10 {
		t.Fatalf("WriteContext whose ctx ended: %d, %v; want the 10 bytes the window took and ctx's cause", r.n, r.err)
	}
	sent := r.n

	// An ended ctx sends nothing, window or not.
	if err := peer.writePacket(Marshal(windowAdjustMsg{PeersID: ch.localId, AdditionalBytes: 5})); err != nil {
		t.Fatal(err)
	}
	got := roundTrip(t, peer)
	if n, err := ch.WriteContext(ctx, data[sent:]); n != 0 || !errors.Is(err, stuck) {
		t.Fatalf("WriteContext with its ctx ended: %d, %v; want nothing sent and ctx's cause", n, err)
	}

	// The channel is not hurt: a Write (and a WriteContext whose ctx
	// lives) sends the rest as window comes.
	rest := make(chan result, 1)
	go func() {
		n, err := ch.WriteContext(context.Background(), data[sent:sent+10])
		if err == nil {
			var m int
			m, err = ch.Write(data[sent+10:])
			n += m
		}
		rest <- result{n, err}
	}()
	if err := peer.writePacket(Marshal(windowAdjustMsg{PeersID: ch.localId, AdditionalBytes: 1 << 20})); err != nil {
		t.Fatal(err)
	}
	if r := await(t, "Write after a WriteContext gave up", rest); r.err != nil || r.n != len(data)-sent {
		t.Fatalf("Write after a WriteContext gave up: %d, %v; want %d bytes", r.n, r.err, len(data)-sent)
	}
	for len(got) < len(data) {
		p, err := peer.readPacket()
		if err != nil {
			t.Fatal(err)
		}
		var msg channelDataMsg
		if err := Unmarshal(p, &msg); err != nil {
			t.Fatalf("peer got %v, want channel data", p)
		}
		got = append(got, msg.Rest...)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("peer got %q, want %q", got, data)
	}
}

// TestHostgateWriteContextSessionStdin: a session's StdinPipe writes with
// the channel's WriteContext, which pkg/sftp's client finds on it.
func TestHostgateWriteContextSessionStdin(t *testing.T) {
	ch, _, _ := deadlineChannel(t, 4)
	stdin := &sessionStdin{ch, ch}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan result, 1)
	go func() {
		n, err := stdin.WriteContext(ctx, []byte("0123456789"))
		done <- result{n, err}
	}()
	ch.remoteWin.waitWriterBlocked()
	cancel()
	if r := await(t, "a session stdin's WriteContext", done); r.n != 4 || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("a session stdin's WriteContext whose ctx ended: %d, %v; want 4 and context.Canceled", r.n, r.err)
	}
}
