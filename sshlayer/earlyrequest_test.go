//go:build unix

package sshlayer

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
)

// pausedReads is a client's conn whose reads, while paused, hand nothing
// over: what the server sends reaches the client only once resumed.
type pausedReads struct {
	net.Conn
	mu   sync.Mutex
	gate chan struct{} // non-nil while paused; closed to resume
}

func (p *pausedReads) pause() {
	p.mu.Lock()
	p.gate = make(chan struct{})
	p.mu.Unlock()
}

func (p *pausedReads) resume() {
	p.mu.Lock()
	if p.gate != nil {
		close(p.gate)
		p.gate = nil
	}
	p.mu.Unlock()
}

func (p *pausedReads) Read(b []byte) (int, error) {
	n, err := p.Conn.Read(b) // one already waiting here when paused is held after
	p.mu.Lock()
	g := p.gate
	p.mu.Unlock()
	if g != nil {
		<-g
	}
	return n, err
}

// TestFirstCommandGoesWithItsOpen: against a server that takes early
// requests, the first command on a connection (no spare session yet)
// sends its channel's open and its request at once: the command runs
// while nothing the server sent has reached the client. Plain, the
// request waits for the open's answer: a round trip more to a far host
// (BenchmarkOpLatency, exec-first; and stat-first, whose SFTP start goes
// with its open too but waits for the server's version before its call).
func TestFirstCommandGoesWithItsOpen(t *testing.T) {
	t.Parallel()
	ts := srvStartServer(t, nil)
	ctx := testCtx(t)
	var d netDialer
	raw, err := d.dial(ctx, ts.Addr)
	if err != nil {
		t.Fatal(err)
	}
	conn := &pausedReads{Conn: raw}
	c, err := Connect(ctx, conn, Auth{Signer: ts.ClientSigner, HostKey: ts.HostKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.resume(); _ = c.Close() })
	if !c.earlyReqs {
		t.Fatal("the test server does not announce early requests")
	}
	h := hostgate.New(hostgate.Info{}, func(context.Context) (*hostgate.Connection, error) { return c.Connection(nil), nil })
	marker := filepath.Join(t.TempDir(), "ran")
	conn.pause()
	done := make(chan error, 1)
	go func() {
		_, err := h.Exec(ctx, []string{"touch", marker}, hostgate.ExecOptions{})
		done <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		if time.Now().After(deadline) {
			conn.resume()
			t.Fatalf("the command did not run in 10 s while the server's answers were held: its request waited for the open's answer (Exec: %v)", <-done)
		}
	}
	conn.resume()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestTakesEarlyRequests(t *testing.T) {
	for v, want := range map[string]bool{
		serverVersion:                          true,
		"SSH-2.0-hostgate early-data@hostgate": false, // before early requests
		"SSH-2.0-hostgate early-data@hostgate early-requests@hostgate": true,
		"SSH-2.0-hostgate early-requests@hostgate":                     false, // they ride on early opens
		"SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3":                       false,
		"":                                                             false,
	} {
		if got := takesEarlyRequests([]byte(v)); got != want {
			t.Errorf("takesEarlyRequests(%q) = %v, want %v", v, got, want)
		}
	}
}
