package gateway

import (
	"context"
	"errors"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hostgate/hostgate/bytestream"
)

// pausedReads is a conn whose Reads wait while paused: a peer that
// stopped reading, so the other end's writes stall.
type pausedReads struct {
	net.Conn
	paused atomic.Bool
	resume chan struct{}
}

func (p *pausedReads) Read(b []byte) (int, error) {
	if p.paused.Load() {
		<-p.resume
	}
	return p.Conn.Read(b)
}

// TestOpenBoundedByCtxBehindStuckWrite: while a relay's write to an agent
// is stuck on its tunnel (the agent's side stopped reading), opening
// another stream to the host gives up at the caller's deadline. The SYN
// waited for the write under way with nothing but the session's end to
// stop it, and muxTunnel.Open looked at ctx only before it began: a caller
// waited out the tunnel's write watchdog (30 s) whatever its deadline.
func TestOpenBoundedByCtxBehindStuckWrite(t *testing.T) {
	a, b := net.Pipe()
	agentConn := &pausedReads{Conn: a, resume: make(chan struct{})}
	agentSide, err := bytestream.MuxServer(agentConn, &bytestream.MuxConfig{MaxStreams: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer agentSide.Close()
	gwSide, err := bytestream.MuxClient(b, DefaultTunnelMux())
	if err != nil {
		t.Fatal(err)
	}
	defer gwSide.Close()
	r := NewRegistry(0, nil)
	defer r.Close()
	if _, _, err := r.Register("h", MuxTunnel(gwSide)); err != nil {
		t.Fatal(err)
	}

	// The agent reads until the first stream is open, and then no more.
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			close(agentConn.resume)
		}
	}
	defer resume()
	first, err := r.Open(t.Context(), "h")
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	agentConn.paused.Store(true)
	stuck := make(chan error, 1)
	go func() {
		_, err := first.Write(make([]byte, 256<<10))
		stuck <- err
	}()
	waitStackHas(t, "net.(*pipe).write(")

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	opened := make(chan error, 1)
	go func() {
		c, err := r.Open(ctx, "h")
		if err == nil {
			_ = c.Close()
		}
		opened <- err
	}()
	guard := time.NewTimer(10 * time.Second) // a guard against a hang, not a timing
	defer guard.Stop()
	select {
	case err := <-opened:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Open past its deadline behind a stuck write: %v, want %v", err, context.DeadlineExceeded)
		}
	case <-guard.C:
		resume()
		<-opened
		t.Fatal("Open with a 100 ms deadline still waits 10 s on, behind another stream's write stuck on the tunnel")
	}
	resume()
	if err := <-stuck; err != nil {
		t.Fatalf("the stuck write, once the agent reads again: %v", err)
	}
	if gwSide.IsClosed() {
		t.Fatal("the tunnel closed with the open given up")
	}
}

// waitStackHas waits until some goroutine's stack shows fn.
func waitStackHas(t *testing.T, fn string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if strings.Contains(string(buf[:n]), fn) {
			return
		}
		runtime.Gosched()
	}
}
