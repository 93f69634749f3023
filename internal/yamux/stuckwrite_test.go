package yamux

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"
)

// waitBlockedN waits until n goroutines' stacks show them in fn.
func waitBlockedN(t *testing.T, fn string, n int) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for {
		k := runtime.Stack(buf, true)
		if strings.Count(string(buf[:k]), fn) >= n {
			return
		}
		runtime.Gosched()
	}
}

// stuckWrite is a WriteInCaller client whose connection takes no more
// bytes (a peer that stopped reading), stream a's Write stuck on it
// holding the session's write lock, and another stream, b, of the same
// session; sa and sb are their server ends.
type stuckWrite struct {
	client       *Session
	a, b, sa, sb *Stream
	aDone        chan error
	unblock      func()
	waitDone     func(t *testing.T, what string, done <-chan error) error
}

func newStuckWrite(t *testing.T, opts ...func(*Config)) *stuckWrite {
	c1, c2 := testConnPipe(t)
	conf := testConfNoKeepAlive()
	conf.WriteInCaller = true
	conf.LogOutput = io.Discard
	for _, o := range opts {
		o(conf)
	}
	client, server := testClientServerConfig(t, c1, c2, conf, conf.Clone())
	w := &stuckWrite{client: client, aDone: make(chan error, 1)}
	var err error
	for _, p := range []struct{ c, s **Stream }{{&w.a, &w.sa}, {&w.b, &w.sb}} {
		if *p.c, err = client.OpenStream(); err != nil {
			t.Fatal(err)
		}
		if *p.s, err = server.AcceptStream(); err != nil {
			t.Fatal(err)
		}
	}
	w.unblock = c1.(*pipeConn).blockWrites(t)
	go func() {
		_, err := w.a.Write([]byte("stuck"))
		w.aDone <- err
	}()
	waitBlockedIn(t, "yamux.(*pipeConn).Write(")
	// A failing test leaves nothing waiting: the connection moves again.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	w.waitDone = func(t *testing.T, what string, done <-chan error) error {
		t.Helper()
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			t.Fatalf("%s still waits, 10 s after, behind another stream's write stuck on the connection", what)
			return nil
		}
	}
	return w
}

// finish lets the connection move again: a's frame, started before
// everything else, goes out whole.
func (w *stuckWrite) finish(t *testing.T) {
	t.Helper()
	w.unblock()
	if err := <-w.aDone; err != nil {
		t.Fatalf("the stuck Write, once the connection moved: %v", err)
	}
	got := make([]byte, 5)
	if _, err := io.ReadFull(w.sa, got); err != nil || string(got) != "stuck" {
		t.Fatalf("the peer read %q, %v on the stuck stream; want %q", got, err, "stuck")
	}
}

// While one stream's write is stuck on a connection the peer does not
// read, the session's other streams keep their deadlines and Close, and
// the session its Close: a sync.Mutex write lock held them all until the
// connection's own write bound (bytestream's 30 s watchdog) ended the
// session. And nothing given up on is written, in part or late.
func TestStuckWriteHoldsNoOtherStream(t *testing.T) {
	t.Run("WriteDeadline", func(t *testing.T) {
		w := newStuckWrite(t)
		_ = w.b.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		done := make(chan error, 1)
		go func() {
			_, err := w.b.Write([]byte("given up"))
			done <- err
		}()
		err := w.waitDone(t, "a Write with a 100 ms deadline", done)
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("Write past its deadline: %v, want a timeout", err)
		}

		// A deadline set while the Write waits counts too.
		_ = w.b.SetWriteDeadline(time.Time{})
		go func() {
			_, err := w.b.Write([]byte("given up too"))
			done <- err
		}()
		waitBlockedN(t, "yamux.(*Stream).write(", 2)
		_ = w.b.SetWriteDeadline(time.Now())
		err = w.waitDone(t, "a Write whose deadline was set while it waited", done)
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("Write past a deadline set while it waited: %v, want a timeout", err)
		}

		w.finish(t)
		_ = w.b.SetWriteDeadline(time.Time{})
		if _, err := w.b.Write([]byte("after")); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 5)
		if _, err := io.ReadFull(w.sb, got); err != nil || string(got) != "after" {
			t.Fatalf("the peer read %q, %v; want %q only: the writes given up on were sent", got, err, "after")
		}
	})

	t.Run("Close", func(t *testing.T) {
		w := newStuckWrite(t)
		done := make(chan error, 1)
		go func() {
			_, err := w.b.Write([]byte("given up"))
			done <- err
		}()
		waitBlockedN(t, "yamux.(*Stream).write(", 2)
		closed := make(chan error, 1)
		go func() { closed <- w.b.Close() }()
		if err := w.waitDone(t, "Close", closed); err != nil {
			t.Fatal(err)
		}
		if err := w.waitDone(t, "a Write on a closed stream", done); !errors.Is(err, ErrStreamClosed) {
			t.Fatalf("Write on a stream closed while it waited: %v, want %v", err, ErrStreamClosed)
		}
		w.finish(t)
		// The FIN went out once the connection moved, and no data.
		if got, err := io.ReadAll(w.sb); err != nil || len(got) != 0 {
			t.Fatalf("the peer read %q, %v; want EOF and nothing", got, err)
		}
	})

	t.Run("Read", func(t *testing.T) {
		w := newStuckWrite(t)
		// More than half a window: reading it owes the peer an update.
		payload := bytes.Repeat([]byte("0123456789abcdef"), 200<<10/16)
		if _, err := w.sb.Write(payload); err != nil { // the other way: not stuck
			t.Fatal(err)
		}
		done := make(chan error, 1)
		got := make([]byte, len(payload))
		go func() {
			_, err := io.ReadFull(w.b, got)
			done <- err
		}()
		if err := w.waitDone(t, "a Read of bytes already here", done); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, payload) {
			t.Fatal("the bytes read are not those sent")
		}
		w.finish(t)
		// The update went out once the connection moved, and the stream
		// goes on.
		more := bytes.Repeat([]byte{'x'}, int(testConfNoKeepAlive().MaxStreamWindowSize))
		sent := make(chan error, 1)
		go func() {
			_, err := w.sb.Write(more)
			sent <- err
		}()
		if _, err := io.ReadFull(w.b, more); err != nil {
			t.Fatal(err)
		}
		if err := w.waitDone(t, "the peer's Write of a window", sent); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("SessionClose", func(t *testing.T) {
		w := newStuckWrite(t)
		done := make(chan error, 1)
		go func() {
			_, err := w.b.Write([]byte("given up"))
			done <- err
		}()
		pinged := make(chan error, 1)
		go func() {
			_, err := w.client.Ping() // the send loop waits behind a's write
			pinged <- err
		}()
		waitBlockedN(t, "yamux.(*Stream).write(", 2)
		waitBlockedIn(t, "yamux.(*Session).sendFrames(")
		closed := make(chan error, 1)
		go func() { closed <- w.client.Close() }()
		if err := w.waitDone(t, "the session's Close", closed); err != nil {
			t.Fatal(err)
		}
		if err := w.waitDone(t, "a Write on a closed session", done); !errors.Is(err, ErrSessionShutdown) {
			t.Fatalf("Write on a session closed while it waited: %v, want %v", err, ErrSessionShutdown)
		}
		if err := w.waitDone(t, "a Ping on a closed session", pinged); err == nil {
			t.Fatal("Ping on a session closed while it waited: no error")
		}
		w.unblock()
		<-w.aDone // the connection was closed under it: any error
	})
}

// BenchmarkWriteInCaller is the data path as bytestream runs it (streams
// writing their own frames, no yamux keepalive): the upstream benchmarks
// above run the send loop.
func BenchmarkWriteInCaller(b *testing.B) {
	writeInCallerForTest, noKeepAliveForTest = true, true
	defer func() { writeInCallerForTest, noKeepAliveForTest = false, false }()
	for _, size := range []int{32, 4096} {
		b.Run(fmt.Sprintf("SendRecv%d", size), func(b *testing.B) { benchmarkSendRecv(b, size, size) })
		b.Run(fmt.Sprintf("SendRecvParallel%d", size), func(b *testing.B) { benchmarkSendRecvParallel(b, size) })
	}
}

// While one stream's write is stuck on a connection the peer does not
// read, OpenStreamContext gives up when its ctx ends: the SYN waited for
// the session's write lock with nothing to end the wait but the session,
// so the gateway's relay open, whose ctx is its caller's, waited out the
// connection's write watchdog (bytestream's 30 s). Nothing of the open
// reaches the peer, and the session goes on.
func TestStuckWriteOpenStreamContext(t *testing.T) {
	w := newStuckWrite(t)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		st, err := w.client.OpenStreamContext(ctx)
		if err == nil {
			_ = st.Close()
		}
		done <- err
	}()
	if err := w.waitDone(t, "OpenStreamContext past its ctx's deadline", done); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("OpenStreamContext past its ctx's deadline: %v, want %v", err, context.DeadlineExceeded)
	}
	if n := w.client.NumStreams(); n != 2 {
		t.Errorf("the session counts %d streams after the open given up, want the 2 it had", n)
	}
	w.finish(t)

	// The next open is the one the peer sees, and the open given up
	// holds no place among the unacknowledged ones.
	st, err := w.client.OpenStreamContext(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Write([]byte("next")); err != nil {
		t.Fatal(err)
	}
	server := w.sa.Session()
	acc, err := server.AcceptStream()
	if err != nil {
		t.Fatal(err)
	}
	defer acc.Close()
	if acc.StreamID() != st.StreamID() {
		t.Fatalf("the peer accepted stream %d, want %d: the open given up reached it", acc.StreamID(), st.StreamID())
	}
	// The peer's acknowledgement precedes its data.
	if _, err := acc.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(st, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if got := len(w.client.synCh); got != 0 {
		t.Errorf("%d opens wait for their acknowledgement, want none", got)
	}
}

// While one stream's write is stuck on the connection and the send loop's
// queue is full behind it, the receive loop waits to queue its refusal of
// a stream past the accept backlog; it did so holding the session's
// stream table, so every open (OpenStreamContext's ctx too), every
// stream's end and NumStreams waited with it, as long as the stuck write.
func TestStuckWriteRefusalHoldsNoStreamTable(t *testing.T) {
	w := newStuckWrite(t, func(c *Config) {
		c.AcceptBacklog = 1
		c.OpenBacklog = 256 // bytestream's: the peer opens two at once
		// As bytestream runs it: no yamux write timeout (the connection
		// bounds its writes), so the refusal waits for room.
		c.ConnectionWriteTimeout = time.Hour
	})
	// Session frames fill the send loop's queue behind the stuck write.
	for range cap(w.client.sendCh) + 1 {
		go func() { _, _ = w.client.Ping() }()
	}
	for len(w.client.sendCh) < cap(w.client.sendCh) {
		runtime.Gosched()
	}
	// The peer opens two streams: one fills the backlog, the other is
	// refused.
	server := w.sa.Session()
	var opened []*Stream
	for range 2 {
		st, err := server.OpenStream()
		if err != nil {
			t.Fatal(err)
		}
		opened = append(opened, st)
	}
	waitBlockedIn(t, "yamux.(*Session).sendNoWait(")

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		st, err := w.client.OpenStreamContext(ctx)
		if err == nil {
			_ = st.Close()
		}
		done <- err
	}()
	if err := w.waitDone(t, "OpenStreamContext past its ctx's deadline", done); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("OpenStreamContext past its ctx's deadline: %v, want %v", err, context.DeadlineExceeded)
	}
	counted := make(chan error, 1)
	go func() {
		if n := w.client.NumStreams(); n != 3 {
			counted <- fmt.Errorf("NumStreams %d, want 3 (two opened, one the peer's, waiting)", n)
		}
		counted <- nil
	}()
	if err := w.waitDone(t, "NumStreams", counted); err != nil {
		t.Error(err)
	}

	w.finish(t)
	// The refusal goes out once the connection moves.
	reset := make(chan error, 1)
	go func() {
		_, err := opened[1].Read(make([]byte, 1))
		reset <- err
	}()
	if err := w.waitDone(t, "the refused stream's Read", reset); !errors.Is(err, ErrConnectionReset) {
		t.Fatalf("the stream past the backlog: Read %v, want %v", err, ErrConnectionReset)
	}
}

// While one stream's write is stuck on the connection, an
// AcceptStreamWithContext whose ctx ends while the stream's acknowledgement
// waits for the connection gives up, and the peer's open is refused: its
// ctx bounded only the wait for a stream, and the acknowledgement waited
// as long as the stuck write.
func TestStuckWriteAcceptStreamWithContext(t *testing.T) {
	w := newStuckWrite(t)
	peer, err := w.sa.Session().OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		st, err := w.client.AcceptStreamWithContext(ctx)
		if err == nil {
			_ = st.Close()
		}
		done <- err
	}()
	if err := w.waitDone(t, "AcceptStreamWithContext past its ctx's deadline", done); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("AcceptStreamWithContext past its ctx's deadline: %v, want %v", err, context.DeadlineExceeded)
	}
	if n := w.client.NumStreams(); n != 2 {
		t.Errorf("the session counts %d streams after the accept given up, want the 2 it had", n)
	}
	w.finish(t)
	// The peer hears its open refused once the connection moves.
	reset := make(chan error, 1)
	go func() {
		_, err := peer.Read(make([]byte, 1))
		reset <- err
	}()
	if err := w.waitDone(t, "the refused stream's Read", reset); !errors.Is(err, ErrConnectionReset) {
		t.Fatalf("the stream whose accept was given up: Read %v, want %v", err, ErrConnectionReset)
	}
}
