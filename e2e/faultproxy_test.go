package e2e

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// faultProxy is a TCP proxy on loopback that misbehaves as a network
// does: it stalls (stops forwarding, keeping both sockets open, as a NAT
// that lost its state or a laptop's dead Wi-Fi does), stalls one
// direction only (a half-open path), or hands bytes on one at a time
// (a slow link). What it holds back stays in the kernel's buffers, so
// the peers' writes block as they would on a real path.
type faultProxy struct {
	t      testing.TB
	ln     net.Listener
	target string

	mu        sync.Mutex
	cond      *sync.Cond
	upHeld    bool          // client→target bytes are held
	downHeld  bool          // target→client bytes are held
	slowEvery int           // > 0: bytes go one per write, with slowPause after each slowEvery
	slowPause time.Duration //
	closed    bool
	conns     map[net.Conn]struct{}
	accepted  int
	wg        sync.WaitGroup
}

// newFaultProxy listens on a loopback port and forwards each connection
// to target; it is closed at the test's end.
func newFaultProxy(t testing.TB, target string) *faultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{t: t, ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's host:port.
func (p *faultProxy) Addr() string { return p.ln.Addr().String() }

// URL is the proxy's address as an http:// URL.
func (p *faultProxy) URL() string { return "http://" + p.Addr() }

// Stall stops forwarding both ways on every connection, old and new,
// until Heal.
func (p *faultProxy) Stall() { p.set(func() { p.upHeld, p.downHeld = true, true }) }

// HoldUp stops forwarding client→target only: the target still
// sends, and the client still reads it, but hears nothing of its own
// writes arriving.
func (p *faultProxy) HoldUp() { p.set(func() { p.upHeld = true }) }

// Slow hands bytes on one at a time, pausing pause after every n of them.
func (p *faultProxy) Slow(n int, pause time.Duration) {
	p.set(func() { p.slowEvery, p.slowPause = n, pause })
}

// Heal forwards everything again, at full speed.
func (p *faultProxy) Heal() {
	p.set(func() { p.upHeld, p.downHeld, p.slowEvery = false, false, 0 })
}

// Accepted is how many connections the proxy has taken.
func (p *faultProxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

func (p *faultProxy) set(f func()) {
	p.mu.Lock()
	f()
	p.mu.Unlock()
	p.cond.Broadcast()
}

// Close stops the proxy, closes every connection and waits for its
// goroutines.
func (p *faultProxy) Close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.cond.Broadcast()
	_ = p.ln.Close()
	p.wg.Wait()
}

func (p *faultProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = c.Close()
			_ = u.Close()
			return
		}
		p.accepted++
		p.conns[c], p.conns[u] = struct{}{}, struct{}{}
		p.mu.Unlock()
		var pumps sync.WaitGroup
		pumps.Add(2)
		p.wg.Add(1)
		go p.pump(u, c, true, &pumps)
		go p.pump(c, u, false, &pumps)
		go func() {
			defer p.wg.Done()
			pumps.Wait()
			p.mu.Lock()
			delete(p.conns, c)
			delete(p.conns, u)
			p.mu.Unlock()
			_ = c.Close()
			_ = u.Close()
		}()
	}
}

// wait blocks while the direction is held; it reports the slow setting,
// or false once the proxy is closed.
func (p *faultProxy) wait(up bool) (every int, pause time.Duration, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.closed && ((up && p.upHeld) || (!up && p.downHeld)) {
		p.cond.Wait()
	}
	return p.slowEvery, p.slowPause, !p.closed
}

// reset ends both sides of a connection whose write failed: the peer
// that closed its socket answers a real path's next segment with a RST,
// which ends the other side too.
func (p *faultProxy) reset(a, b net.Conn) {
	_ = a.Close()
	_ = b.Close()
}

// pump copies src to dst, obeying the proxy's faults; at src's end it
// half-closes dst, so a peer's FIN goes on as a FIN.
func (p *faultProxy) pump(dst, src net.Conn, up bool, done *sync.WaitGroup) {
	defer done.Done()
	buf := make([]byte, 32<<10)
	sent := 0
	for {
		if _, _, ok := p.wait(up); !ok {
			return
		}
		n, err := src.Read(buf)
		for i := 0; i < n; {
			every, pause, ok := p.wait(up)
			if !ok {
				return
			}
			if every <= 0 {
				if _, werr := dst.Write(buf[i:n]); werr != nil {
					p.reset(dst, src)
					return
				}
				break
			}
			if _, werr := dst.Write(buf[i : i+1]); werr != nil {
				p.reset(dst, src)
				return
			}
			i++
			if sent++; sent%every == 0 {
				time.Sleep(pause)
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
					return
				}
			}
			_ = dst.Close()
			return
		}
	}
}
