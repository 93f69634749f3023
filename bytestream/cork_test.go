package bytestream

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// recConn records each Write call made on it.
type recConn struct {
	net.Conn
	mu     sync.Mutex
	writes [][]byte
	err    error
}

func (r *recConn) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return 0, r.err
	}
	r.writes = append(r.writes, bytes.Clone(p))
	return len(p), nil
}

func (r *recConn) SetWriteDeadline(time.Time) error { return nil }

func (r *recConn) got() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writes
}

// TestCorkOneWritePerMessage: what coder/websocket writes in 4 KiB pieces
// while corked reaches the conn as one write, in order; uncorked writes go
// straight through.
func TestCorkOneWritePerMessage(t *testing.T) {
	rc := &recConn{}
	c := &corkConn{Conn: rc}
	msg := randomData(1, 32<<10)
	c.corkOn(make([]byte, 100))
	for p := msg; len(p) > 0; {
		n := min(len(p), 4096)
		if _, err := c.Write(p[:n]); err != nil {
			t.Fatal(err)
		}
		p = p[n:]
	}
	if w := rc.got(); len(w) != 0 {
		t.Fatalf("%d writes reached the conn while corked", len(w))
	}
	if err := c.uncork(time.Time{}); err != nil {
		t.Fatal(err)
	}
	w := rc.got()
	if len(w) != 1 || !bytes.Equal(w[0], msg) {
		t.Fatalf("after uncork: %d writes, want 1 carrying the message", len(w))
	}
	if _, err := c.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	if w := rc.got(); len(w) != 2 || string(w[1]) != "pong" {
		t.Fatalf("uncorked write did not go straight through: %q", w)
	}
}

// TestCorkOverflowKeepsOrder: more than the cork holds flushes what
// is held first, so bytes stay in order.
func TestCorkOverflowKeepsOrder(t *testing.T) {
	rc := &recConn{}
	c := &corkConn{Conn: rc}
	first, big := randomData(2, 100), randomData(3, corkSmall)
	c.corkOn(make([]byte, 100))
	_, _ = c.Write(first)
	if _, err := c.Write(big); err != nil {
		t.Fatal(err)
	}
	if err := c.uncork(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if got := bytes.Join(rc.got(), nil); !bytes.Equal(got, append(bytes.Clone(first), big...)) {
		t.Fatalf("bytes out of order or lost (%d bytes)", len(got))
	}
}

// vecConn records vectored writes piece by piece.
type vecConn struct {
	recConn
	pieces [][]byte // as handed over, not copied
}

func (v *vecConn) writeVec(b net.Buffers) (int64, error) {
	v.mu.Lock()
	v.pieces = append(v.pieces, b...)
	v.mu.Unlock()
	var n int64
	for _, p := range b {
		m, err := v.recConn.Write(p)
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// TestCorkReferencesPayload: with refs (an accepted TCP conn), writes that
// are parts of the corked call's payload are held by reference, anything
// else (frame headers, coder/websocket's buffer) is copied, and uncork
// hands all of it over in one vectored write, in order.
func TestCorkReferencesPayload(t *testing.T) {
	vc := &vecConn{}
	c := &corkConn{Conn: vc, refs: true}
	payload := randomData(5, 3*MaxMessageSize)
	c.corkOn(payload)
	var want []byte
	scratch := make([]byte, 4)
	for i, part := range [][]byte{payload[:MaxMessageSize], payload[MaxMessageSize:]} {
		hdr := []byte{0x82, byte(i), 0, 0} // stands for a frame header in coder/websocket's buffer
		head, rest := part[:4000], part[4000:]
		copy(scratch, hdr)
		for _, w := range [][]byte{scratch, bytes.Clone(head), rest} {
			want = append(want, w...)
			if _, err := c.Write(w); err != nil {
				t.Fatal(err)
			}
		}
		scratch[0] = 0 // reused, as a buffer is: the copy must not see it
	}
	if w := vc.got(); len(w) != 0 {
		t.Fatalf("%d writes reached the conn while corked", len(w))
	}
	if err := c.uncork(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if got := bytes.Join(vc.got(), nil); !bytes.Equal(got, want) {
		t.Fatalf("bytes out of order, lost or changed (%d of %d)", len(got), len(want))
	}
	refs := 0
	for _, p := range vc.pieces {
		if inside(p, payload) {
			refs++
		}
	}
	// Each header and head meet in one copied piece; each rest is referenced.
	if len(vc.pieces) != 4 || refs != 2 {
		t.Fatalf("%d pieces, %d of them references into the payload; want 4 and 2", len(vc.pieces), refs)
	}
	if len(c.vec) != 0 || c.payload != nil {
		t.Fatal("the cork still holds pieces or the payload after uncork")
	}
}

// TestCorkFlushErrorClosesWebSocket: if the corked message cannot be sent,
// Write fails and the conn is closed (a half-sent frame cannot continue).
func TestCorkFlushErrorClosesWebSocket(t *testing.T) {
	a, _ := wsPair(t)
	wc := a.(*wsConn)
	if wc.cork == nil {
		t.Fatal("a dialed WebSocket is not corked")
	}
	boom := errors.New("boom")
	// Swap the conn under the cork for one that fails; the test owns the
	// only writer, and reads do not go through corkConn.Write.
	wc.cork.mu.Lock()
	wc.cork.Conn = &recConn{Conn: wc.cork.Conn, err: boom}
	wc.cork.mu.Unlock()
	// Writes go behind: the failure comes back from a later Write.
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		_, err = a.Write(randomData(4, 32<<10))
	}
	if !errors.Is(err, boom) {
		t.Fatalf("write = %v, want the flush error", err)
	}
	if _, err := a.Write([]byte("x")); err == nil {
		t.Fatal("write after a failed flush succeeded")
	}
}

// TestCorkedWebSocketBulk: a dialed (corked) WebSocket carries a bulk
// transfer intact both ways, and its write deadline still ends a write the
// peer does not read.
func TestCorkedWebSocketBulk(t *testing.T) {
	a, b := wsPair(t)
	if a.(*wsConn).cork == nil {
		t.Fatal("a dialed WebSocket is not corked")
	}
	exchange(t, a, b, 4<<20)

	writePastDeadline(t, a, 1<<20)
}

// writePastDeadline writes 256 MiB at most to c, whose peer does not read,
// in writes of size bytes, with a 200 ms write deadline, and returns the
// error, which must say the deadline passed.
func writePastDeadline(t *testing.T, c net.Conn, size int) error {
	t.Helper()
	if err := c.SetWriteDeadline(time.Now().Add(200 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	chunk := randomData(5, size)
	var err error
	for i := 0; i < 256<<20/size && err == nil; i++ {
		_, err = c.Write(chunk)
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write to a peer that does not read: %v, want os.ErrDeadlineExceeded", err)
	}
	return err
}

// TestCorkedWebSocketDeadlineSmallWrites: the write deadline also ends
// writes of SSH packet size, which write-behind batches into corked calls
// (there only the TCP deadline that uncork sets bounds the flush).
func TestCorkedWebSocketDeadlineSmallWrites(t *testing.T) {
	a, _ := wsPair(t)
	err := writePastDeadline(t, a, 32<<10)
	if strings.Count(err.Error(), "i/o timeout") > 1 {
		t.Fatalf("deadline error wrapped twice: %v", err)
	}
}

// TestAcceptKeepsEarlyBytes: a frame the client sends in the same packet
// as its upgrade request (already in net/http's reader at Hijack) is not
// lost when Accept swaps in the corked conn and its read-ahead.
func TestAcceptKeepsEarlyBytes(t *testing.T) {
	url, ch := wsServer(t, nil)
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	// One masked binary frame, "hello", with a zero mask key.
	frame := append([]byte{0x82, 0x80 | 5, 0, 0, 0, 0}, "hello"...)
	if _, err := conn.Write(append([]byte(req), frame...)); err != nil {
		t.Fatal(err)
	}
	srv := acceptedConn(t, ch)
	defer func() { conn.Close(); srv.Close() }() // conn first: srv.Close waits for its close frame otherwise
	_ = srv.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, 5)
	if _, err := io.ReadFull(srv, got); err != nil || string(got) != "hello" {
		t.Fatalf("server read %q, %v; want the early frame", got, err)
	}
}

// countConn counts the Write calls that reach a conn, passing them on.
type countConn struct {
	net.Conn
	mu     sync.Mutex
	writes int
}

func (c *countConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writes++
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// writeVec counts a vectored write as the one writev it is on TCP.
func (c *countConn) writeVec(v net.Buffers) (int64, error) {
	c.mu.Lock()
	c.writes++
	c.mu.Unlock()
	return v.WriteTo(c.Conn)
}

func (c *countConn) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes
}

// TestAcceptedWebSocketCorked: the server side of a WebSocket (a gateway's
// agent tunnel) writes each message in one call, not a 4 KiB piece and the
// rest, and the bytes arrive intact.
func TestAcceptedWebSocketCorked(t *testing.T) {
	a, b := wsPair(t)
	wc := b.(*wsConn)
	if wc.cork == nil {
		t.Fatal("an accepted WebSocket is not corked")
	}
	cc := &countConn{Conn: wc.cork.Conn}
	wc.cork.mu.Lock()
	wc.cork.Conn = cc
	wc.cork.mu.Unlock()

	const messages = 8
	msg := randomData(6, 48<<10)
	got := make(chan []byte, 1)
	go func() {
		buf := make([]byte, messages*len(msg))
		_, err := io.ReadFull(a, buf)
		if err != nil {
			buf = nil
		}
		got <- buf
	}()
	for range messages {
		if _, err := b.Write(msg); err != nil {
			t.Fatal(err)
		}
	}
	if buf := <-got; !bytes.Equal(buf, bytes.Repeat(msg, messages)) {
		t.Fatal("bytes lost or changed through the corked server side")
	}
	if n := cc.count(); n != messages {
		t.Fatalf("%d messages took %d writes, want one each", messages, n)
	}
	exchange(t, a, b, 4<<20)
}

// TestWebSocketOneWritePerCall: on both sides of a WebSocket, one call of
// four messages' worth (a write-behind batch, a gateway relay's 256 KiB
// copy) reaches the TCP conn as one write, and a longer one arrives
// intact.
func TestWebSocketOneWritePerCall(t *testing.T) {
	a, b := wsPair(t)
	for _, side := range []struct {
		name     string
		from, to net.Conn
	}{{"client", a, b}, {"server", b, a}} {
		wc := side.from.(*wsConn)
		cc := &countConn{Conn: wc.cork.Conn}
		wc.cork.mu.Lock()
		wc.cork.Conn = cc
		wc.cork.mu.Unlock()
		for _, size := range []int{wbMax, wbMax + MaxMessageSize + 1} {
			msg := randomData(uint64(size), size)
			got := make(chan []byte, 1)
			go func() {
				buf := make([]byte, len(msg))
				if _, err := io.ReadFull(side.to, buf); err != nil {
					buf = nil
				}
				got <- buf
			}()
			before := cc.count()
			// writeMessages directly: what the write-behind flusher calls,
			// without its timing.
			if _, err := wc.writeMessages(msg); err != nil {
				t.Fatal(err)
			}
			if buf := <-got; !bytes.Equal(buf, msg) {
				t.Fatalf("%s, %d bytes: lost or changed", side.name, size)
			}
			if n := cc.count() - before; size == wbMax && n != 1 {
				t.Fatalf("%s: a call of four messages took %d writes, want one", side.name, n)
			}
		}
	}
}

// TestCloseHandshakeWhileCorked closes one end while the other is busy
// writing: the close frame arrives while the writer's conn is corked, so
// coder/websocket's reply to it lands in the cork buffer just before it
// closes the conn. That reply must still reach the closing end, whose
// Close otherwise fails its close handshake.
// Both ends cork (the dialed one and the accepted one), so each takes
// both roles.
func TestCloseHandshakeWhileCorked(t *testing.T) {
	for i := range 10 {
		a, b := wsPair(t)
		if i%2 == 1 {
			a, b = b, a
		}
		go func() { _, _ = io.Copy(io.Discard, b) }()
		done := make(chan struct{})
		go func() {
			defer close(done)
			buf := make([]byte, 256<<10)
			for {
				if _, err := b.Write(buf); err != nil {
					return
				}
			}
		}()
		if _, err := io.ReadFull(a, make([]byte, 1<<20)); err != nil {
			t.Fatal(err)
		}
		if err := a.Close(); err != nil {
			t.Fatalf("close %d while the peer writes: %v", i, err)
		}
		<-done
	}
}

// TestInside: only a non-empty part of the payload counts; in particular a
// buffer longer than the payload, above it in memory (coder/websocket's
// 4 KiB buffer holding a small message's header and payload), must not.
func TestInside(t *testing.T) {
	arena := make([]byte, 8192)
	payload := arena[:100]
	for _, c := range []struct {
		name string
		p    []byte
		want bool
	}{
		{"all of it", payload, true},
		{"a middle part", payload[10:20], true},
		{"its last byte", payload[99:], true},
		{"empty", payload[10:10], false},
		{"running past its end", arena[50:150], false},
		{"longer, above it", arena[4096:4198], false},
		{"longer, at its start", arena[:200], false},
		{"after it", arena[100:101], false},
		{"elsewhere", make([]byte, 10), false},
	} {
		if got := inside(c.p, payload); got != c.want {
			t.Errorf("%s: inside = %v, want %v", c.name, got, c.want)
		}
	}
}
