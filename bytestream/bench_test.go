package bytestream

import (
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/yamux"
)

// BenchmarkThroughput: bulk transfer, one direction, 32 KiB writes
// (bicopy's buffer size), over loopback. Read ratios within one run: TCP
// is the peer every layer is measured against; yamux's 256 KiB default
// window against our 4 MiB, also with an emulated 4 ms round trip (the
// window caps one stream at window/RTT).
func BenchmarkThroughput(b *testing.B) {
	raw := func(p pairFunc) func(*testing.B) (net.Conn, net.Conn) {
		return func(b *testing.B) (net.Conn, net.Conn) { return p(b) }
	}
	muxed := func(p pairFunc, window uint32, rtt time.Duration) func(*testing.B) (net.Conn, net.Conn) {
		return func(b *testing.B) (net.Conn, net.Conn) {
			x, y := p(b)
			if rtt > 0 {
				x, y = newDelayConn(b, x, rtt/2), newDelayConn(b, y, rtt/2)
			}
			return benchMux(b, x, y, &MuxConfig{StreamWindow: window})
		}
	}
	// The receiver's window granted out of a budget, as on a gateway
	// (gateway.Config.RelayMemory): against window=4M, the cost of the
	// accounting on the fast path.
	budgeted := func(p pairFunc) func(*testing.B) (net.Conn, net.Conn) {
		return func(b *testing.B) (net.Conn, net.Conn) {
			x, y := p(b)
			return benchMux(b, x, y, &MuxConfig{StreamWindow: 4 << 20, RecvBudget: NewRecvBudget(256 << 20)})
		}
	}
	for _, bc := range []struct {
		name  string
		setup func(*testing.B) (net.Conn, net.Conn)
	}{
		{"tcp", raw(tcpPair)},
		{"websocket", raw(wsPair)},
		{"websocket/server-to-client", func(b *testing.B) (net.Conn, net.Conn) { x, y := wsPair(b); return y, x }},
		{"websocket+tls", raw(wssPair)},
		{"tcp+yamux/window=256K", muxed(tcpPair, 256<<10, 0)},
		{"tcp+yamux/window=4M", muxed(tcpPair, 4<<20, 0)},
		{"websocket+yamux/window=256K", muxed(wsPair, 256<<10, 0)},
		{"websocket+yamux/window=4M", muxed(wsPair, 4<<20, 0)},
		{"websocket+yamux/window=4M/budget", budgeted(wsPair)},
		// The writer on the accepted side, as a gateway writing to an agent.
		{"websocket+yamux/server-to-client/window=4M", muxed(func(t testing.TB) (net.Conn, net.Conn) { x, y := wsPair(t); return y, x }, 4<<20, 0)},
		{"tcp+rtt4ms/raw", func(b *testing.B) (net.Conn, net.Conn) {
			x, y := tcpPair(b)
			return newDelayConn(b, x, 2*time.Millisecond), newDelayConn(b, y, 2*time.Millisecond)
		}},
		{"tcp+rtt4ms+yamux/window=256K", muxed(tcpPair, 256<<10, 4*time.Millisecond)},
		{"tcp+rtt4ms+yamux/window=4M", muxed(tcpPair, 4<<20, 4*time.Millisecond)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			w, r := bc.setup(b)
			bulk(b, w, r)
		})
	}
}

// benchMux starts a session pair over x, y and returns one open stream's
// two ends.
// Neither side may see a frame OnMisuse reports: a bulk transfer must never
// look like a flood (the window update bound would close it).
func benchMux(b *testing.B, x, y net.Conn, cfg *MuxConfig) (net.Conn, net.Conn) {
	var misused atomic.Int64
	c := *cfg
	c.OnMisuse = func(MuxMisuse) { misused.Add(1) }
	cli, err := MuxClient(x, &c)
	if err != nil {
		b.Fatal(err)
	}
	srv, err := MuxServer(y, &c)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); cli.Close() }()
		go func() { defer wg.Done(); srv.Close() }()
		wg.Wait()
		if n := misused.Load(); n > 0 {
			b.Errorf("a bulk transfer sent %d frames OnMisuse reports", n)
		}
	})
	acc := make(chan *yamux.Stream, 1)
	go func() { s, _ := srv.AcceptStream(); acc <- s }()
	s, err := cli.OpenStream()
	if err != nil {
		b.Fatal(err)
	}
	s2 := <-acc
	if s2 == nil {
		b.Fatal("accept failed")
	}
	return s, s2
}

// bulk writes b.N 32 KiB chunks to w and reads them from r.
func bulk(b *testing.B, w, r net.Conn) {
	const chunk = 32 << 10
	buf := make([]byte, chunk)
	b.SetBytes(chunk)
	b.ResetTimer()
	done := make(chan error, 1)
	go func() {
		for range b.N {
			if _, err := w.Write(buf); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	rbuf := make([]byte, chunk)
	for left := int64(b.N) * chunk; left > 0; {
		n, err := r.Read(rbuf[:min(int64(len(rbuf)), left)])
		left -= int64(n)
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
}

// delayConn emulates one-way latency: each write reaches the underlying
// conn delay later, in order, with no bandwidth limit. Writes are copied
// into a bounded queue; a full queue blocks the writer.
type delayConn struct {
	net.Conn
	delay time.Duration
	q     chan delayed
	done  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
}

type delayed struct {
	at time.Time
	b  []byte
}

func newDelayConn(tb testing.TB, c net.Conn, delay time.Duration) *delayConn {
	d := &delayConn{Conn: c, delay: delay, q: make(chan delayed, 8192), done: make(chan struct{})}
	d.wg.Add(1)
	go d.pump()
	tb.Cleanup(func() { d.Close() })
	return d
}

func (d *delayConn) pump() {
	defer d.wg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		var m delayed
		select {
		case m = <-d.q:
		case <-d.done:
			return
		}
		if wait := time.Until(m.at); wait > 0 {
			t.Reset(wait)
			select {
			case <-t.C:
			case <-d.done:
				return
			}
		}
		if _, err := d.Conn.Write(m.b); err != nil {
			return
		}
	}
}

func (d *delayConn) Write(p []byte) (int, error) {
	m := delayed{at: time.Now().Add(d.delay), b: append([]byte(nil), p...)}
	select {
	case d.q <- m:
		return len(p), nil
	case <-d.done:
		return 0, net.ErrClosed
	}
}

func (d *delayConn) Close() error {
	err := d.Conn.Close()
	d.once.Do(func() { close(d.done); d.wg.Wait() })
	return err
}

// BenchmarkIdleTunnelMemory reports what idle tunnels hold: 200 WebSocket
// + yamux sessions, each an agent's end (dialed, the yamux server) and a
// gateway's (accepted, the yamux client), doing nothing. Per pair, both
// ends together: live heap after a GC, and goroutine stacks. A gateway
// multiplies its end by its agents (hgbench's scale rows measure that end
// alone, as the gateway process's RSS).
func BenchmarkIdleTunnelMemory(b *testing.B) {
	const pairs = 200
	url, ch := wsServer(b, nil)
	var heap, stack float64
	for range b.N {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var sessions []*yamux.Session
		for range pairs {
			a, err := WebSocket(testCtx(b), url, nil)
			if err != nil {
				b.Fatal(err)
			}
			gw, err := MuxClient(acceptedConn(b, ch), nil)
			if err != nil {
				b.Fatal(err)
			}
			ag, err := MuxServer(a, nil)
			if err != nil {
				b.Fatal(err)
			}
			sessions = append(sessions, gw, ag)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap += float64(after.HeapAlloc) - float64(before.HeapAlloc)
		stack += float64(after.StackInuse) - float64(before.StackInuse)
		var wg sync.WaitGroup
		for _, s := range sessions {
			wg.Go(func() { _ = s.Close() })
		}
		wg.Wait()
	}
	b.ReportMetric(heap/float64(b.N*pairs), "heap-B/pair")
	b.ReportMetric(stack/float64(b.N*pairs), "stack-B/pair")
}
