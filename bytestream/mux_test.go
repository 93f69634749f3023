package bytestream

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/yamux"
)

// muxPair runs a client session on a and a server session on b.
func muxPair(t *testing.T, a, b net.Conn, ccfg, scfg *MuxConfig) (cli, srv *yamux.Session) {
	t.Helper()
	cli, err := MuxClient(a, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err = MuxServer(b, scfg)
	if err != nil {
		cli.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); cli.Close() }()
		go func() { defer wg.Done(); srv.Close() }()
		wg.Wait()
	})
	return cli, srv
}

// waitClosed waits for the session to end, failing the test on the
// context deadline.
func waitClosed(t *testing.T, s *yamux.Session) {
	t.Helper()
	select {
	case <-s.CloseChan():
	case <-testCtx(t).Done():
		t.Fatal("session did not close")
	}
}

// Many concurrent streams over one WebSocket, each a bidirectional
// exchange of random chunks.
func TestMuxOverWebSocketManyStreams(t *testing.T) {
	a, b := wsPair(t)
	cli, srv := muxPair(t, a, b, nil, nil)
	const streams, size = 32, 128 << 10
	var wg sync.WaitGroup
	// Server: echo every stream.
	wg.Add(1)
	go func() {
		defer wg.Done()
		var echo sync.WaitGroup
		defer echo.Wait()
		for range streams {
			s, err := srv.Accept()
			if err != nil {
				t.Errorf("accept: %v", err)
				return
			}
			echo.Add(1)
			go func() {
				defer echo.Done()
				defer s.Close()
				if _, err := io.Copy(s, s); err != nil {
					t.Errorf("echo: %v", err)
				}
			}()
		}
	}()
	for i := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := cli.Open()
			if err != nil {
				t.Errorf("open: %v", err)
				return
			}
			defer s.Close()
			data := randomData(uint64(100+i), size)
			werr := make(chan error, 1)
			go func() {
				err := writeRandomly(s, data, uint64(i))
				if err == nil {
					err = s.(*yamux.Stream).Close() // FIN: the echo's io.Copy ends
				}
				werr <- err
			}()
			got, err := io.ReadAll(s)
			if e := <-werr; e != nil {
				t.Errorf("stream %d write: %v", i, e)
			}
			if err != nil || string(got) != string(data) {
				t.Errorf("stream %d: echo %d bytes, %v; want %d bytes intact", i, len(got), err, size)
			}
		}()
	}
	wg.Wait()
}

func TestMuxRoundTripOverEachStream(t *testing.T) {
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) {
			a, b := p.pair(t)
			cli, srv := muxPair(t, a, b, nil, nil)
			acc := make(chan net.Conn, 1)
			go func() {
				s, err := srv.Accept()
				if err != nil {
					t.Errorf("accept: %v", err)
				}
				acc <- s
			}()
			s1, err := cli.Open()
			if err != nil {
				t.Fatal(err)
			}
			s2 := <-acc
			if s2 == nil {
				t.FailNow()
			}
			exchange(t, s1, s2, 1<<20)
		})
	}
}

// TestMuxWriteTimeoutClosesSession is yamux#142: a peer that stops reading
// must not leave a half-alive session. The peer reads the first frame and
// then nothing; the blocked stream write, a pending Open and Accept must
// all fail once WriteTimeout passes, and the reason is ErrWriteTimeout.
func TestMuxWriteTimeoutClosesSession(t *testing.T) {
	a, b := net.Pipe() // unbuffered: a write blocks until the peer reads
	t.Cleanup(func() { a.Close(); b.Close() })
	// Generous: the first frame must get through on a loaded machine.
	cfg := &MuxConfig{WriteTimeout: 2 * time.Second, KeepAliveInterval: -1}
	cli, err := MuxClient(a, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	// Drain exactly the stream-open frame, then stop reading.
	opened := make(chan error, 1)
	go func() {
		_, err := io.ReadFull(b, make([]byte, hdrSize))
		opened <- err
	}()
	s, err := cli.Open()
	if err != nil {
		t.Fatal(err)
	}
	if err := <-opened; err != nil {
		t.Fatal(err)
	}
	writeErr := make(chan error, 1)
	go func() { _, err := s.Write(make([]byte, 64<<10)); writeErr <- err }()
	openErr := make(chan error, 1)
	go func() { _, err := cli.Open(); openErr <- err }()

	waitClosed(t, cli)
	if err := <-writeErr; err == nil {
		t.Error("stream write succeeded on a stuck session")
	}
	if err := <-openErr; err == nil {
		t.Error("open succeeded on a stuck session")
	}
	if _, err := cli.Accept(); !errors.Is(err, ErrWriteTimeout) {
		t.Errorf("session ended with %v, want ErrWriteTimeout", err)
	}
}

// A peer that stops answering (its end still accepts bytes) is detected by
// the keepalive, which closes the session.
func TestMuxKeepAliveDeadPeer(t *testing.T) {
	a, b := tcpPair(t)
	drained := make(chan struct{})
	go func() { defer close(drained); _, _ = io.Copy(io.Discard, b) }()
	cli, err := MuxClient(a, &MuxConfig{KeepAliveInterval: 20 * time.Millisecond, WriteTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	waitClosed(t, cli)
	if _, err := cli.Accept(); !errors.Is(err, ErrKeepAliveTimeout) {
		t.Errorf("session ended with %v, want ErrKeepAliveTimeout", err)
	}
	var ne net.Error
	if !errors.As(ErrKeepAliveTimeout, &ne) || !ne.Timeout() {
		t.Error("ErrKeepAliveTimeout is not a net.Error timeout")
	}
	b.Close()
	<-drained
}

// Over a WebSocket whose peer is silent (never reads, so never answers a
// ping or a close frame), the keepalive closes the session, and Close does
// not wait for the close handshake.
func TestMuxKeepAliveDeadPeerWebSocket(t *testing.T) {
	a, _ := wsPair(t)
	cli, err := MuxClient(a, &MuxConfig{KeepAliveInterval: 20 * time.Millisecond, WriteTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	waitClosed(t, cli)
	done := make(chan struct{})
	go func() { cli.Close(); close(done) }()
	select {
	case <-done:
	case <-testCtx(t).Done():
		t.Fatal("Close hung")
	}
	if _, err := cli.Accept(); !errors.Is(err, ErrKeepAliveTimeout) {
		t.Errorf("session ended with %v, want ErrKeepAliveTimeout", err)
	}
}

// With a live peer the keepalive keeps the session up.
func TestMuxKeepAliveLivePeer(t *testing.T) {
	a, b := tcpPair(t)
	cfg := &MuxConfig{KeepAliveInterval: 10 * time.Millisecond, WriteTimeout: 10 * time.Second}
	cli, srv := muxPair(t, a, b, cfg, cfg)
	// Let several pings run, then check both ends still carry a stream.
	for range 20 {
		if _, err := cli.Ping(); err != nil {
			t.Fatal(err)
		}
	}
	acc := make(chan net.Conn, 1)
	go func() { s, _ := srv.Accept(); acc <- s }()
	s, err := cli.Open()
	if err != nil {
		t.Fatal(err)
	}
	s2 := <-acc
	if s2 == nil {
		t.Fatal("accept failed")
	}
	exchange(t, s, s2, 64<<10)
}

// The peer may hold MaxStreams open at once; one more is reset, and
// closing one makes room again.
func TestMuxMaxStreams(t *testing.T) {
	a, b := tcpPair(t)
	cli, srv := muxPair(t, a, b, nil, &MuxConfig{MaxStreams: 3})
	open := func() (net.Conn, error) {
		s, err := cli.Open()
		if err != nil {
			return nil, err
		}
		_, err = s.Write([]byte("x"))
		return s, err
	}
	var accepted []net.Conn
	var client []net.Conn
	for range 3 {
		c, err := open()
		if err != nil {
			t.Fatal(err)
		}
		client = append(client, c)
		s, err := srv.Accept()
		if err != nil {
			t.Fatal(err)
		}
		accepted = append(accepted, s)
	}
	extra, err := cli.Open()
	if err != nil {
		t.Fatal(err)
	}
	// The RST may beat this write.
	if _, err := extra.Write([]byte("x")); err != nil && !errors.Is(err, yamux.ErrConnectionReset) {
		t.Fatal(err)
	}
	// The refused stream is reset: its read fails rather than hanging.
	if _, err := extra.Read(make([]byte, 1)); !errors.Is(err, yamux.ErrConnectionReset) {
		t.Fatalf("read on refused stream: %v, want connection reset", err)
	}
	// Close one stream both ways; a new one fits again.
	client[0].Close()
	if _, err := io.ReadAll(accepted[0]); err != nil {
		t.Fatal(err)
	}
	accepted[0].Close()
	if _, err := io.ReadAll(client[0]); err != nil {
		t.Fatal(err)
	}
	c, err := open()
	if err != nil {
		t.Fatal(err)
	}
	s, err := srv.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(s, make([]byte, 1)); err != nil {
		t.Fatalf("stream after a close was not delivered: %v", err)
	}
	_ = c
	// The accepted streams still work: refusing did not break the session.
	if _, err := accepted[1].Write([]byte("y")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(client[1], make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
}

func TestMuxConfigValidation(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	for _, cfg := range []*MuxConfig{
		{StreamWindow: 64 << 10},
		{AcceptBacklog: -1},
		{WriteTimeout: -1}, // keepalive on, nothing bounds the ping
	} {
		if s, err := MuxClient(a, cfg); err == nil {
			s.Close()
			t.Errorf("config %+v accepted", *cfg)
		}
	}
}

// countingConn records each Write's bytes so tests can check framing.
type countingConn struct {
	net.Conn
	mu     sync.Mutex
	writes [][]byte
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writes = append(c.writes, append([]byte(nil), p...))
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// No data frame header reaches the conn as a write of its own (over a
// WebSocket that would be a 12-byte message per frame), and the frames are
// intact.
func TestMuxCoalescesFrames(t *testing.T) {
	a, b := tcpPair(t)
	cc := &countingConn{Conn: a}
	exchangeOverMux(t, cc, b)
	cc.mu.Lock()
	defer cc.mu.Unlock()
	checkNoLoneHeaders(t, cc.writes)
}

// exchangeOverMux runs a mux session over a (its client side) and b, and
// exchanges 512 KiB each way on one stream.
func exchangeOverMux(t *testing.T, a, b net.Conn) {
	t.Helper()
	cli, srv := muxPair(t, a, b, &MuxConfig{KeepAliveInterval: -1}, nil)
	acc := make(chan net.Conn, 1)
	go func() { s, _ := srv.Accept(); acc <- s }()
	s, err := cli.Open()
	if err != nil {
		t.Fatal(err)
	}
	s2 := <-acc
	if s2 == nil {
		t.Fatal("accept failed")
	}
	exchange(t, s, s2, 512<<10)
}

// checkNoLoneHeaders fails if a data frame's header is a write of its own,
// or if writes holds no data frame or ends inside one.
func checkNoLoneHeaders(t *testing.T, writes [][]byte) {
	t.Helper()
	var sc frameScanner
	data := 0
	for i, w := range writes {
		if sc.atBoundary() && len(w) == hdrSize && w[1] == typeData {
			t.Fatalf("write %d is a lone data header", i)
		}
		if sc.atBoundary() && w[1] == typeData && len(w) > hdrSize {
			data++
		}
		sc.scan(w, nil)
	}
	if data == 0 || !sc.atBoundary() {
		t.Fatalf("saw %d data frames, boundary %v", data, sc.atBoundary())
	}
}

// joinRecorder is a conn that joins writes itself, as a write-behind
// WebSocket does; it records each joined pair as one write.
type joinRecorder struct {
	countingConn
	joined int // writeJoined calls with a data header and its whole body
}

func (c *joinRecorder) joinsWrites() bool     { return true }
func (c *joinRecorder) joinRange() (int, int) { return 0, wbMax - hdrSize - 1 }

func (c *joinRecorder) writeJoined(a, b []byte) (int, error) {
	c.mu.Lock()
	h := frameHeader(a)
	if len(a) == hdrSize && h.typ() == typeData && int(h.length()) == len(b) {
		c.joined++
	}
	c.writes = append(c.writes, append(append([]byte(nil), a...), b...))
	c.mu.Unlock()
	if _, err := c.Conn.Write(a); err != nil {
		return 0, err
	}
	n, err := c.Conn.Write(b)
	return len(a) + n, err
}

// Over a conn that joins writes itself (an agent's write-behind
// WebSocket), a data frame's header is handed over with its body, which
// muxConn does not copy to join them; the frames are intact.
func TestMuxJoinsFramesInConn(t *testing.T) {
	a, b := tcpPair(t)
	jc := &joinRecorder{countingConn: countingConn{Conn: a}}
	exchangeOverMux(t, jc, b)
	jc.mu.Lock()
	defer jc.mu.Unlock()
	checkNoLoneHeaders(t, jc.writes)
	if jc.joined == 0 {
		t.Fatal("no data frame was handed to writeJoined")
	}
}

// Both ends of a WebSocket join writes: a dialed one holds them behind, an
// accepted one sends a header as a message of its own in its body's writev.
func TestWebSocketJoinsWrites(t *testing.T) {
	a, b := wsPair(t)
	for _, c := range []net.Conn{a, b} {
		j, ok := c.(joiner)
		if !ok || !j.joinsWrites() {
			t.Errorf("%T does not join writes", c)
		}
	}
	if lo, _ := a.(*wsConn).joinRange(); lo != 0 {
		t.Error("a write-behind conn should take every body")
	}
	if lo, hi := b.(*wsConn).joinRange(); lo == 0 || hi > MaxMessageSize {
		t.Errorf("a corked conn takes bodies of %d to %d bytes, want large ones up to a message", lo, hi)
	}
}

// TestMuxOverAcceptedWebSocketOneWritePerFrame: a gateway relaying a
// caller's 64 KiB messages into yamux frames sends each frame, header and
// whole body, in one TCP write without copying the body into a joined
// message (which left 12 bytes over for a write of their own), and small
// frames still go out joined by a copy; the peer reads every frame intact,
// a frame larger than a message too.
func TestMuxOverAcceptedWebSocketOneWritePerFrame(t *testing.T) {
	a, b := wsPair(t)
	wc := b.(*wsConn)
	cc := &countConn{Conn: wc.cork.Conn}
	wc.cork.mu.Lock()
	wc.cork.Conn = cc
	wc.cork.mu.Unlock()
	mc := newMuxConn(b, 0, time.Minute)
	defer mc.Close()

	var want bytes.Buffer
	for i, size := range []int{MaxMessageSize, 100, MaxMessageSize, 5000, 200 << 10} {
		body := randomData(uint64(i), size)
		f := frame(typeData, 0, 1, body, uint32(size))
		want.Write(f)
		got := make(chan []byte, 1)
		go func() {
			buf := make([]byte, len(f))
			if _, err := io.ReadFull(a, buf); err != nil {
				buf = nil
			}
			got <- buf
		}()
		before := cc.count()
		if _, err := mc.Write(f[:hdrSize]); err != nil {
			t.Fatal(err)
		}
		if _, err := mc.Write(f[hdrSize:]); err != nil {
			t.Fatal(err)
		}
		if buf := <-got; !bytes.Equal(buf, f) {
			t.Fatalf("frame with a %d-byte body: lost or changed", size)
		}
		// A frame beyond a message goes out a message per watchdog arming.
		if n := cc.count() - before; size <= MaxMessageSize && n != 1 {
			t.Fatalf("frame with a %d-byte body took %d writes, want one", size, n)
		}
		if lo, hi := wc.joinRange(); size >= lo && size <= hi && cap(mc.buf) > 8<<10 {
			t.Fatalf("frame with a %d-byte body: muxConn copied it (%d bytes of join buffer)", size, cap(mc.buf))
		}
	}
}

// With a write timeout the watchdog is re-armed per message-sized piece, so
// a big frame on a slow but moving link is not a stall: no single write to
// the conn is larger than MaxMessageSize.
func TestMuxWatchdogWritesInPieces(t *testing.T) {
	fc := &fuzzConn{r: strings.NewReader("")}
	c := newMuxConn(fc, 0, time.Minute)
	defer c.Close()
	big := frame(typeData, 0, 1, make([]byte, 300<<10), 300<<10)
	var sizes maxWriteConn
	c.conn = &sizes
	if _, err := c.Write(big[:hdrSize]); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(big[hdrSize:]); err != nil {
		t.Fatal(err)
	}
	if sizes.total != len(big) || sizes.max > MaxMessageSize {
		t.Fatalf("wrote %d bytes in writes up to %d; want %d in writes up to %d", sizes.total, sizes.max, len(big), MaxMessageSize)
	}
}

type maxWriteConn struct {
	net.Conn
	max, total int
}

func (c *maxWriteConn) Write(p []byte) (int, error) {
	c.max = max(c.max, len(p))
	c.total += len(p)
	return len(p), nil
}
func (c *maxWriteConn) Close() error { return nil }

// A refused stream's first frame cannot exceed the initial window; a peer
// claiming more is cut off instead of being read through.
func TestMuxRefusedFrameTooBig(t *testing.T) {
	in := append(frame(typeWindowUpdate, flagSYN, 1, nil, 0), frame(typeData, flagSYN, 3, nil, 300<<10)...)
	c := newMuxConn(&fuzzConn{r: strings.NewReader(string(in))}, 1, 0)
	defer c.Close()
	if _, err := io.ReadFull(c, make([]byte, hdrSize)); err != nil {
		t.Fatal(err) // stream 1 admitted
	}
	if _, err := c.Read(make([]byte, 64)); !errors.Is(err, errFrameTooBig) {
		t.Fatalf("read = %v, want errFrameTooBig", err)
	}
}

// TestIdleSessionGoroutines: an idle session (an agent tunnel waiting for
// streams) costs yamux's two loops per side and nothing more: keepalive
// and RST flushing run only when there is work. A gateway holds 10,000 of
// these; every parked goroutine is a stack.
func TestIdleSessionGoroutines(t *testing.T) {
	const n = 16
	before := runtime.NumGoroutine()
	for range n {
		a, b := net.Pipe()
		muxPair(t, a, b, &MuxConfig{KeepAliveInterval: time.Hour}, &MuxConfig{KeepAliveInterval: time.Hour})
	}
	per := float64(runtime.NumGoroutine()-before) / n
	if per > 4 {
		t.Fatalf("%.1f goroutines per idle session pair, want at most 4 (recv and send on each side)", per)
	}
}

// A keepalive ping whose write fails (here: the peer never reads, so the
// write watchdog closes the connection) must not leave Close waiting for
// the keepalive tick that is itself closing the session.
func TestMuxCloseAfterPingWriteFails(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	cli, err := MuxClient(a, &MuxConfig{KeepAliveInterval: 20 * time.Millisecond, WriteTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-cli.CloseChan():
	case <-time.After(10 * time.Second):
		t.Fatal("session still open with a peer that never reads")
	}
	done := make(chan struct{})
	go func() { cli.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hung after the keepalive's failed write")
	}
}

// A peer whose frames keep coming is alive though it does not answer a
// ping in time (its answer queued behind data on a slow uplink): the
// keepalive waits. Once nothing arrives, it closes the session.
func TestMuxKeepAliveBusyPeer(t *testing.T) {
	a, b := tcpPair(t)
	drained := make(chan struct{})
	go func() { defer close(drained); _, _ = io.Copy(io.Discard, b) }()
	// The timeout is far above the peer's 5 ms pace: a goroutine stalled
	// for 100 ms on a loaded machine (a CI run beside other work) once
	// made a gap that looked like a silent peer.
	const timeout = 500 * time.Millisecond
	cli, err := MuxClient(a, &MuxConfig{KeepAliveInterval: 20 * time.Millisecond, WriteTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	// The peer sends pings of its own (frames the client reads and
	// answers) and never answers the client's.
	stop := make(chan struct{})
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		var id uint32
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			id++
			frame := []byte{0, 2, 0, 1, 0, 0, 0, 0, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)} // ping, SYN
			if _, err := b.Write(frame); err != nil {
				return
			}
		}
	}()
	select {
	case <-cli.CloseChan():
		t.Fatalf("a peer still sending was taken for dead: %v", sessionErr(cli))
	case <-time.After(4 * timeout):
	}
	close(stop)
	<-sent
	waitClosed(t, cli)
	if _, err := cli.Accept(); !errors.Is(err, ErrKeepAliveTimeout) {
		t.Errorf("session ended with %v, want ErrKeepAliveTimeout once the peer fell silent", err)
	}
	b.Close()
	<-drained
}

func sessionErr(s interface{ Accept() (net.Conn, error) }) error {
	_, err := s.Accept()
	return err
}

// A peer flooding window updates that grant nothing (5.5 million in 3 s
// cost the gateway 0.82 CPU-s) loses its session after maxEmptyUpdates;
// each is reported, and so is a refused stream; an update that grants
// a real window is not.
func TestMuxWindowUpdateFlood(t *testing.T) {
	in := frame(typeWindowUpdate, flagSYN, 1, nil, 0)
	in = append(in, frame(typeWindowUpdate, flagSYN, 3, nil, 0)...) // beyond MaxStreams 1
	in = append(in, frame(typeWindowUpdate, 0, 1, nil, 1<<20)...)   // a real grant
	for range maxEmptyUpdates + 1 {
		in = append(in, frame(typeWindowUpdate, 0, 1, nil, 0)...)
	}
	c := newMuxConn(&fuzzConn{r: bytes.NewReader(in)}, 1, 0)
	defer c.Close()
	seen := map[MuxMisuse]int{}
	c.onMisuse = func(m MuxMisuse) { seen[m]++ }
	var err error
	delivered := 0
	buf := make([]byte, hdrSize)
	for err == nil {
		var n int
		n, err = io.ReadFull(c, buf)
		delivered += n / hdrSize
	}
	if !errors.Is(err, ErrWindowUpdateFlood) {
		t.Fatalf("after %d frames delivered: %v, want ErrWindowUpdateFlood", delivered, err)
	}
	if want := 2 + maxEmptyUpdates; delivered != want {
		t.Errorf("%d frames delivered before the session ended, want %d (the SYN, the grant and %d empty updates)", delivered, want, maxEmptyUpdates)
	}
	if seen[MisuseStreamRefused] != 1 || seen[MisuseEmptyWindowUpdate] != maxEmptyUpdates+1 {
		t.Errorf("reported %v, want 1 refused stream and %d empty updates", seen, maxEmptyUpdates+1)
	}
}

// A bulk transfer never sends what OnMisuse reports, also where the
// receiver's window comes out of a spent or small budget and its reader
// takes what has come in reads of every size.
func TestMuxBulkNoMisuse(t *testing.T) {
	var misused atomic.Int64
	on := func(MuxMisuse) { misused.Add(1) }
	for _, budget := range []int64{1, 1 << 20, 256 << 20} {
		a, b := wsPair(t)
		cfg := &MuxConfig{RecvBudget: NewRecvBudget(budget), OnMisuse: on}
		cli, srv := muxPair(t, a, b, cfg, cfg)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := srv.Accept()
			if err != nil {
				t.Error(err)
				return
			}
			// Echo in reads of every size.
			buf := make([]byte, 200<<10)
			for i := 1; ; i++ {
				n, err := s.Read(buf[:1+(i*7919)%len(buf)])
				if _, werr := s.Write(buf[:n]); werr != nil {
					t.Error(werr)
					return
				}
				if err != nil {
					_ = s.Close()
					return
				}
			}
		}()
		s, err := cli.Open()
		if err != nil {
			t.Fatal(err)
		}
		if err := echoCheckSizes(s, 24<<20); err != nil {
			t.Fatalf("budget %d: %v", budget, err)
		}
		_ = s.Close()
		wg.Wait()
	}
	if n := misused.Load(); n != 0 {
		t.Fatalf("bulk transfers sent %d frames OnMisuse reports, want none", n)
	}
}

// echoCheckSizes writes size bytes to c, an echoing stream, and reads them
// back, in writes and reads of varying size.
func echoCheckSizes(c net.Conn, size int) error {
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 31 / 7)
	}
	werr := make(chan error, 1)
	go func() {
		for off, i := 0, 1; off < size; i++ {
			n := min(size-off, 1+int(int64(i)*104729%(300<<10))) // int64: no overflow where int is 32 bits
			if _, err := c.Write(data[off : off+n]); err != nil {
				werr <- err
				return
			}
			off += n
		}
		werr <- nil
	}()
	got := make([]byte, size)
	for off, i := 0, 1; off < size; i++ {
		n, err := c.Read(got[off:min(size, off+1+int(int64(i)*15485863%(150<<10)))])
		off += n
		if err != nil {
			return fmt.Errorf("read after %d bytes: %w", off, err)
		}
	}
	if err := <-werr; err != nil {
		return err
	}
	if !bytes.Equal(got, data) {
		return errors.New("the echo differs from what was sent")
	}
	return nil
}
