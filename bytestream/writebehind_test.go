package bytestream

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// slowSink records writes, each taking a while, so writes collect behind
// the one in progress.
type slowSink struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
	delay  time.Duration
	fail   error
	gate   chan struct{} // when set, writes wait until it is closed
}

func (s *slowSink) write(p []byte) (int, error) {
	if s.gate != nil {
		<-s.gate
	}
	time.Sleep(s.delay)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return 0, s.fail
	}
	s.writes++
	s.buf.Write(p)
	return len(p), nil
}

func (s *slowSink) snapshot() ([]byte, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.buf.Bytes()), s.writes
}

// TestWriteBehindCoalescesInOrder: SSH-packet-sized writes, a write larger
// than the bound and more small ones arrive in order, in fewer writes than
// were made, and nothing is held once drained. Every third write comes in
// two parts (writeJoined, as muxConn hands a frame header and its body).
func TestWriteBehindCoalescesInOrder(t *testing.T) {
	// The sink takes nothing until four writes were made, so at least
	// two of them are held together whatever the scheduling (with a
	// delay alone, a starved writer on a loaded machine let the flusher
	// write each one alone).
	sink := &slowSink{delay: time.Millisecond, gate: make(chan struct{})}
	w := newWriteBehind(sink.write, func() error { return nil })
	var want bytes.Buffer
	for i := range 40 {
		if i == 4 {
			close(sink.gate)
		}
		p := randomData(uint64(i), 32<<10+52)
		if i == 20 || i == 30 {
			p = randomData(99, wbMax+1) // written in place, after what is held
		}
		want.Write(p)
		var n int
		var err error
		if i%3 == 1 {
			n, err = w.writeJoined(p[:hdrSize], p[hdrSize:])
		} else {
			n, err = w.Write(p)
		}
		if err != nil || n != len(p) {
			t.Fatalf("write %d: %d, %v", i, n, err)
		}
	}
	w.drain()
	got, writes := sink.snapshot()
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("got %d bytes, want %d in order", len(got), want.Len())
	}
	if writes >= 40 {
		t.Fatalf("%d writes reached the conn for 40 writes: nothing was coalesced", writes)
	}
	w.mu.Lock()
	held, flushing := w.buf, w.flushing
	w.mu.Unlock()
	if held != nil || flushing {
		t.Fatal("a buffer or a flusher is still held after draining")
	}
	if _, err := w.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after close: %v, want net.ErrClosed", err)
	}
}

// TestWriteBehindErrorIsSticky: a failed write comes back from the next
// Write, and every one after it.
func TestWriteBehindErrorIsSticky(t *testing.T) {
	boom := errors.New("boom")
	sink := &slowSink{fail: boom}
	w := newWriteBehind(sink.write, func() error { return nil })
	var err error
	for i := 0; i < 1000 && err == nil; i++ {
		_, err = w.Write(make([]byte, 1000))
	}
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if _, err := w.Write([]byte("x")); !errors.Is(err, boom) {
		t.Fatalf("later write: %v, want boom", err)
	}
	w.drain()
}

// TestWriteBehindWebSocket: a dialed WebSocket writing behind delivers
// everything written before Close, and a peer that stops reading still
// ends a writer with a write deadline (the bound on held bytes makes Write
// wait, and the flusher's write times out).
func TestWriteBehindWebSocket(t *testing.T) {
	a, b := wsPair(t)
	if a.(*wsConn).wb == nil {
		t.Fatal("a dialed WebSocket does not write behind")
	}
	data := randomData(8, 3<<20)
	got := make(chan []byte, 1)
	go func() { buf, _ := io.ReadAll(b); got <- buf }()
	for p := data; len(p) > 0; {
		n := min(len(p), 32<<10+52)
		if _, err := a.Write(p[:n]); err != nil {
			t.Fatal(err)
		}
		p = p[n:]
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if buf := <-got; !bytes.Equal(buf, data) {
		t.Fatalf("peer got %d of %d bytes before close", len(buf), len(data))
	}

	// Large writes go in place; small ones are held, then wait for room.
	for _, size := range []int{1 << 20, 32 << 10} {
		c, _ := wsPair(t) // its peer never reads
		if err := c.SetWriteDeadline(time.Now().Add(200 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		var err error
		chunk := randomData(9, size)
		for i := 0; i < (256<<20)/size && err == nil; i++ { // bounded: 256 MiB at most
			_, err = c.Write(chunk)
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("%d-byte writes to a peer that does not read: %v, want os.ErrDeadlineExceeded", size, err)
		}
	}
}

// goroutineID reads the calling goroutine's id from its stack header.
func goroutineID() string {
	var b [64]byte
	f := bytes.Fields(b[:runtime.Stack(b[:], false)])
	return string(f[1]) // "goroutine 42 [running]:"
}

// TestWriteBehindOneFlusherAcrossBursts: bursts with the writer idle in
// between are all written by one goroutine, which is gone after Close.
func TestWriteBehindOneFlusherAcrossBursts(t *testing.T) {
	var (
		mu   sync.Mutex
		ids  = map[string]int{}
		done = make(chan struct{}, 1)
	)
	w := newWriteBehind(func(p []byte) (int, error) {
		mu.Lock()
		ids[goroutineID()]++
		mu.Unlock()
		done <- struct{}{}
		return len(p), nil
	}, func() error { return nil })
	w.idle = time.Minute // no gap between bursts below may end it
	for i := range 50 {
		if _, err := w.Write([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done: // written; the flusher is idle again before the next
		case <-time.After(10 * time.Second):
			t.Fatalf("burst %d was never written", i)
		}
	}
	w.drain()
	if len(ids) != 1 {
		t.Fatalf("50 bursts were written by %d goroutines, want 1: %v", len(ids), ids)
	}
}

// TestWriteBehindHeldDuringLargeWrite: a small write that arrives while
// another caller writes a large one in place reaches the conn without a
// further write to push it out.
func TestWriteBehindHeldDuringLargeWrite(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	var (
		mu  sync.Mutex
		got int
	)
	w := newWriteBehind(func(p []byte) (int, error) {
		if len(p) >= wbMax {
			close(started)
			<-release
		}
		mu.Lock()
		got += len(p)
		mu.Unlock()
		return len(p), nil
	}, func() error { return nil })
	large := make([]byte, wbMax)
	errc := make(chan error, 1)
	go func() { _, err := w.Write(large); errc <- err }()
	<-started
	if _, err := w.Write([]byte("small")); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	want := len(large) + len("small")
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := got
		mu.Unlock()
		if n == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d bytes reached the conn: the small write is stuck", n, want)
		}
		time.Sleep(time.Millisecond)
	}
	w.drain()
}

// TestWriteBehindIdleFlusherExits: a conn that is written to and then
// dropped without Close keeps no goroutine.
func TestWriteBehindIdleFlusherExits(t *testing.T) {
	var (
		mu  sync.Mutex
		got []byte
	)
	w := newWriteBehind(func(p []byte) (int, error) {
		mu.Lock()
		got = append(got, p...)
		mu.Unlock()
		return len(p), nil
	}, func() error { return nil })
	w.idle = time.Millisecond
	wait := func(what string, done func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			mu.Lock()
			w.mu.Lock()
			ok := done()
			w.mu.Unlock()
			mu.Unlock()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal(what)
			}
			time.Sleep(time.Millisecond)
		}
	}
	if _, err := w.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	wait("an idle flusher did not exit", func() bool { return !w.running && string(got) == "x" })
	// A write after it exited starts another, which writes it.
	if _, err := w.Write([]byte("y")); err != nil {
		t.Fatal(err)
	}
	wait("a write after the flusher exited was never written", func() bool { return string(got) == "xy" })
	w.drain()
}

// TestAbortEndsStuckWrite: a mux timeout (or a drain that ran out of
// time) aborts a dialed conn whose peer stopped reading; the write stuck
// on it, and abort itself, end at once, over ws:// and wss://.
func TestAbortEndsStuckWrite(t *testing.T) {
	for _, tc := range []struct {
		name string
		pair func(testing.TB) (net.Conn, net.Conn)
	}{{"ws", wsPair}, {"wss", wssPair}} {
		t.Run(tc.name, func(t *testing.T) {
			a, _ := tc.pair(t) // the server end never reads
			var written atomic.Int64
			stuck := make(chan error, 1)
			go func() {
				buf := make([]byte, 64<<10)
				for {
					n, err := a.Write(buf)
					written.Add(int64(n))
					if err != nil {
						stuck <- err
						return
					}
				}
			}()
			// Wait until the writes stop getting anywhere: the socket
			// buffers on both sides and the write-behind are full.
			for last := int64(-1); ; {
				time.Sleep(100 * time.Millisecond)
				n := written.Load()
				if n == last {
					break
				}
				last = n
			}
			start := time.Now()
			if err := a.(*wsConn).abort(); err != nil && !errors.Is(err, net.ErrClosed) {
				t.Logf("abort: %v", err)
			}
			select {
			case err := <-stuck:
				// Told by what ended it, not how soon (a 900 ms bound
				// could pass on a loaded machine): an abort that closes
				// the TCP conn ends the write with net.ErrClosed. Before
				// it did, the stuck write ended only at corkConn.Close's
				// 1 s flush deadline, and under TLS at crypto/tls's 5 s
				// close_notify deadline: a timeout.
				t.Logf("the stuck write ended %v after abort: %v", time.Since(start), err)
				if !errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatalf("the stuck write ended with %v, want it ended by the abort's close (net.ErrClosed), not a deadline", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the stuck write did not end within 10 s of abort")
			}
		})
	}
}
