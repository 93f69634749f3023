package ssh

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// deadlineChannel opens a channel over an in-memory packet pipe; the test
// plays the peer, which grants window bytes. It returns the channel, the
// peer's end and the channel's id as the peer addresses it.
func deadlineChannel(t *testing.T, window uint32) (*channel, *pipePackets, uint32) {
	t.Helper()
	local, peer := packetPipe()
	m := newMux(local)
	t.Cleanup(func() { _ = m.Close() })
	opened := make(chan *channel, 1)
	go func() {
		ch, err := m.openChannel("direct-tcpip", nil)
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
		PeersID: open.PeersID, MyID: 7, MyWindow: window, MaxPacketSize: channelMaxPacket,
	})); err != nil {
		t.Fatal(err)
	}
	ch := <-opened
	if ch == nil {
		t.FailNow()
	}
	return ch, peer, open.PeersID
}

// result is what a Read or Write returned.
type result struct {
	n   int
	err error
}

// await waits for an operation that must end; a deadline that never wakes
// it fails the test instead of hanging it.
func await(t *testing.T, what string, c <-chan result) result {
	t.Helper()
	select {
	case r := <-c:
		return r
	case <-time.After(10 * time.Second):
		t.Fatalf("%s still blocked 10 s after its deadline", what)
		return result{}
	}
}

// checkTimeout asserts err is a deadline's, as net.Conn documents it.
func checkTimeout(t *testing.T, what string, err error) {
	t.Helper()
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("%s: %v, want os.ErrDeadlineExceeded with Timeout() true", what, err)
	}
}

// TestHostgateReadDeadline: a Read blocked on a channel returns
// os.ErrDeadlineExceeded when its deadline passes, or at once when a
// deadline in the past is set while it waits; what arrives meanwhile is
// kept for the next Read once the deadline is moved on or cleared. An
// http.Server sets a past read deadline after every response and waits
// for its background Read to return: with upstream's "deadline not
// supported" it waited forever.
func TestHostgateReadDeadline(t *testing.T) {
	ch, peer, id := deadlineChannel(t, channelInitialWindow)
	conn := &chanConn{Channel: ch}
	send := func(s string) {
		t.Helper()
		if err := peer.writePacket(Marshal(channelDataMsg{PeersID: id, Length: uint32(len(s)), Rest: []byte(s)})); err != nil {
			t.Fatal(err)
		}
	}
	read := func() <-chan result {
		c := make(chan result, 1)
		go func() {
			buf := make([]byte, 64)
			n, err := conn.Read(buf)
			if n > 0 {
				err = errors.Join(err, errors.New(string(buf[:n])))
			}
			c <- result{n, err}
		}()
		return c
	}

	// A deadline that passes while the Read waits.
	if err := conn.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	r := await(t, "Read with a deadline 20 ms ahead", read())
	checkTimeout(t, "Read past its deadline", r.err)

	// A deadline in the past, set while a Read waits with none.
	if err := conn.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	blocked := read()
	time.Sleep(20 * time.Millisecond) // most likely waiting by now; either way it must end
	if err := conn.SetReadDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	checkTimeout(t, "Read blocked when a past deadline was set", await(t, "Read blocked when a past deadline was set", blocked).err)

	// Past the deadline, data that has come is not read, nor lost.
	send("hello")
	roundTrip(t, peer)
	r = await(t, "Read past its deadline with data buffered", read())
	if r.n != 0 {
		t.Fatalf("Read past its deadline read %d bytes, want 0", r.n)
	}
	checkTimeout(t, "Read past its deadline with data buffered", r.err)

	// Moved on, the deadline lets Reads through again.
	if err := conn.SetReadDeadline(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if r := await(t, "Read with a deadline an hour ahead", read()); r.n != 5 || r.err.Error() != "hello" {
		t.Fatalf("Read after the deadline moved on: %d, %v; want the 5 bytes that came", r.n, r.err)
	}
	// Cleared, it lets a Read wait as long as it takes.
	if err := conn.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	waiting := read()
	send("world")
	if r := await(t, "Read with no deadline", waiting); r.n != 5 || r.err.Error() != "world" {
		t.Fatalf("Read with the deadline cleared: %d, %v; want the 5 bytes sent", r.n, r.err)
	}
}

// TestHostgateWriteDeadline: a Write waiting on the peer's window returns
// os.ErrDeadlineExceeded when its deadline passes, with the count of the
// bytes it sent; past a deadline nothing more is sent even with window
// left; moved on or cleared, the deadline lets writes through again and
// the peer gets every byte once, in order.
func TestHostgateWriteDeadline(t *testing.T) {
	ch, peer, _ := deadlineChannel(t, 10)
	conn := &chanConn{Channel: ch}
	write := func(p []byte) <-chan result {
		c := make(chan result, 1)
		go func() {
			n, err := conn.Write(p)
			c <- result{n, err}
		}()
		return c
	}
	data := []byte("0123456789abcdefghijklmnopqrstuvwxyz")

	// The window takes 10 bytes; the Write waits for more until its
	// deadline passes.
	first := write(data)
	ch.remoteWin.waitWriterBlocked()
	if err := conn.SetWriteDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	r := await(t, "Write on a full window", first)
	checkTimeout(t, "Write past its deadline", r.err)
	if r.n != 10 {
		t.Fatalf("Write past its deadline says it wrote %d bytes, want the 10 the window took", r.n)
	}
	sent := r.n

	// A deadline in the past, set while a Write waits with none.
	if err := conn.SetWriteDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	blocked := write(data[sent:])
	ch.remoteWin.waitWriterBlocked()
	if err := conn.SetWriteDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	r = await(t, "Write blocked when a past deadline was set", blocked)
	checkTimeout(t, "Write blocked when a past deadline was set", r.err)
	if r.n != 0 {
		t.Fatalf("Write blocked on a full window says it wrote %d bytes, want 0", r.n)
	}

	// Past the deadline nothing is sent, though the window has room.
	if err := peer.writePacket(Marshal(windowAdjustMsg{PeersID: ch.localId, AdditionalBytes: 5})); err != nil {
		t.Fatal(err)
	}
	got := roundTrip(t, peer)
	r = await(t, "Write past its deadline", write(data[sent:]))
	checkTimeout(t, "Write past its deadline with window", r.err)
	if r.n != 0 {
		t.Fatalf("Write past its deadline wrote %d bytes, want 0", r.n)
	}

	// Cleared, the deadline lets the rest through as window comes.
	if err := conn.SetWriteDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	rest := write(data[sent:])
	if err := peer.writePacket(Marshal(windowAdjustMsg{PeersID: ch.localId, AdditionalBytes: 1 << 20})); err != nil {
		t.Fatal(err)
	}
	if r := await(t, "Write with no deadline", rest); r.err != nil || r.n != len(data)-sent {
		t.Fatalf("Write with the deadline cleared: %d, %v; want %d bytes", r.n, r.err, len(data)-sent)
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

// TestHostgateDeadlineTimerReused: a connection whose deadline is moved on
// every request (an http.Server's) keeps one timer per direction, and a
// Read with no deadline set arms none.
func TestHostgateDeadlineTimerReused(t *testing.T) {
	ch, peer, id := deadlineChannel(t, channelInitialWindow)
	if err := peer.writePacket(Marshal(channelDataMsg{PeersID: id, Length: 1, Rest: []byte{'x'}})); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(ch, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if ch.readDeadline.timer != nil || ch.writeDeadline.timer != nil {
		t.Fatal("a channel with no deadline set has a timer")
	}
	_ = ch.SetDeadline(time.Now().Add(time.Hour))
	rt, wt := ch.readDeadline.timer, ch.writeDeadline.timer
	for i := range 100 {
		_ = ch.SetDeadline(time.Now().Add(time.Duration(i+1) * time.Minute))
		_ = ch.SetDeadline(time.Time{})
	}
	if ch.readDeadline.timer != rt || ch.writeDeadline.timer != wt {
		t.Fatal("moving a deadline made a new timer")
	}
}

// roundTrip waits until the mux has handled every packet the peer sent:
// its answer to a request for a channel that does not exist comes after
// them. It returns the channel data the peer got meanwhile.
func roundTrip(t *testing.T, peer *pipePackets) []byte {
	t.Helper()
	if err := peer.writePacket(Marshal(channelRequestMsg{PeersID: 1 << 30, Request: "x", WantReply: true})); err != nil {
		t.Fatal(err)
	}
	var data []byte
	for {
		p, err := peer.readPacket()
		if err != nil {
			t.Fatal(err)
		}
		switch p[0] {
		case msgChannelFailure:
			return data
		case msgChannelData:
			var msg channelDataMsg
			if err := Unmarshal(p, &msg); err != nil {
				t.Fatal(err)
			}
			data = append(data, msg.Rest...)
		default:
			t.Fatalf("peer got %v; want channel data or a channel failure", p)
		}
	}
}

// BenchmarkHostgateChannelEcho: 32 KiB written on a channel and read back
// from a peer that echoes it, over the in-memory packet pipe: the
// channel's own cost (window reserve, buffer Read) with no deadline set,
// which change 9 must leave as it was.
func BenchmarkHostgateChannelEcho(b *testing.B) {
	local, peer := packetPipe()
	m := newMux(local)
	defer m.Close()
	opened := make(chan *channel, 1)
	go func() {
		ch, _ := m.openChannel("direct-tcpip", nil)
		opened <- ch
	}()
	p, err := peer.readPacket()
	if err != nil {
		b.Fatal(err)
	}
	var open channelOpenMsg
	if err := Unmarshal(p, &open); err != nil {
		b.Fatal(err)
	}
	if err := peer.writePacket(Marshal(channelOpenConfirmMsg{PeersID: open.PeersID, MyID: 7, MyWindow: 1 << 31, MaxPacketSize: channelMaxPacket})); err != nil {
		b.Fatal(err)
	}
	ch := <-opened
	if ch == nil {
		b.FailNow()
	}
	go func() {
		for {
			p, err := peer.readPacket()
			if err != nil {
				return
			}
			if p[0] == msgChannelData {
				binary.BigEndian.PutUint32(p[1:], open.PeersID)
				if peer.writePacket(p) != nil {
					return
				}
			}
		}
	}()
	buf := make([]byte, channelMaxPacket)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ch.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(ch, buf); err != nil {
			b.Fatal(err)
		}
	}
}
