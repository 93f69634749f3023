//go:build unix

package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/proxyproto"
	"github.com/hostgate/hostgate/sshlayer"
)

// stalledConn is a caller's path that stops delivering with its socket
// open: once stall is set, a Read waits until release is closed.
type stalledConn struct {
	net.Conn
	stall   atomic.Bool
	release chan struct{}
}

func (c *stalledConn) Read(p []byte) (int, error) {
	if c.stall.Load() {
		<-c.release
		return 0, net.ErrClosed
	}
	return c.Conn.Read(p)
}

// stallWait bounds how long the agent may take to end a stalled
// connection: well under yamux's 5-minute StreamCloseTimeout, which ended
// it before.
const stallWait = 60 * time.Second

// TestServeMuxStalledCallerEndsItsConnection: a gateway (an older one, or
// a dead path) that stops reading one stream while its command floods
// stdout, and never closes it. The agent's SSH keepalive gives up; the
// connection must then end on the agent at once (the command gone, the
// log's "ssh connection closed"), not when yamux resets the half-closed
// stream 5 minutes later, and the tunnel must keep serving its other
// streams. It took the 5 minutes: the stream's Close was a half-close, so
// x/crypto's transport Close waited for a read that only the gateway's FIN
// would end.
func TestServeMuxStalledCallerEndsItsConnection(t *testing.T) {
	logs := &syncBuffer{}
	srv, hostKey, client := serveNewServer(t, func(c *ServeConfig) {
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
		c.Server = func(sc *sshlayer.ServerConfig) {
			sc.KeepaliveInterval = 500 * time.Millisecond
			sc.KeepaliveMaxMissed = 2
		}
	})
	a, b := serveTCPPair(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		// As connect.go serves a tunnel: the default mux config, callers named.
		wait, err := serveMux(ctx, b, srv, nil, tunnel{callers: true})
		wait()
		done <- err
	}()
	sess, err := bytestream.MuxClient(a, nil)
	if err != nil {
		t.Fatal(err)
	}
	open := func() net.Conn {
		t.Helper()
		st, err := sess.OpenStream()
		if err != nil {
			t.Fatal(err)
		}
		h := proxyproto.Header{Src: netip.MustParseAddrPort("192.0.2.7:40000")}
		if _, err := st.Write(h.Append(nil)); err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := &stalledConn{Conn: open(), release: make(chan struct{})}
	defer func() {
		close(st.release)
		cancel()
		_ = sess.Close()
		if err := <-done; err != nil {
			t.Errorf("serveMux: %v", err)
		}
	}()
	cl := serveSSHClient(t, st, hostKey, client)
	s, err := cl.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	s.Stdout = io.Discard
	pidFile := filepath.Join(t.TempDir(), "pid")
	if err := s.Start("echo $$ > " + pidFile + ".tmp && mv " + pidFile + ".tmp " + pidFile + " && exec cat /dev/zero"); err != nil {
		t.Fatal(err)
	}
	var pid int
	for deadline := time.Now().Add(serveWait); pid == 0; time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
				t.Fatal(err)
			}
		} else if time.Now().After(deadline) {
			t.Fatalf("the command never wrote its pid: %v", err)
		}
	}
	st.stall.Store(true)
	gaveUp := logs.has("ssh client stopped answering keepalives")
	select {
	case <-gaveUp:
	case <-time.After(stallWait):
		t.Fatalf("the agent's keepalive never gave up on the stalled caller; log:\n%s", logs)
	}
	start := time.Now()
	select {
	case <-logs.has("ssh connection closed"):
	case <-time.After(stallWait):
		t.Fatalf("the stalled connection did not end on the agent within %v of its keepalive giving up; log:\n%s", stallWait, logs)
	}
	closed := time.Since(start)
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the flooding command (pid %d) outlived its connection: kill 0: %v", pid, err)
	}
	t.Logf("connection ended %v after the keepalive gave up", closed)

	// The tunnel is unharmed: another stream still serves.
	if out := serveSSHExec(t, open(), hostKey, client, "echo still"); out != "still\n" {
		t.Fatalf("a new stream after the stall: %q, want %q", out, "still\n")
	}
}
