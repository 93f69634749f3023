//go:build unix

package sshlayer

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/internal/testenv"
)

// breakableListener is a forward's listener that a test breaks: closed
// from under its accept loop, its Accept fails with an error that is not
// net.ErrClosed, so the loop takes it for a listener that failed for good
// (as accept.Next returns at once any failure it does not wait out).
type breakableListener struct {
	net.Listener
	broken atomic.Bool
}

var errListenerBroken = errors.New("listener broken by the test")

func (l *breakableListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil && l.broken.Load() {
		return nil, errListenerBroken
	}
	return c, err
}

func (l *breakableListener) breakNow() {
	l.broken.Store(true)
	_ = l.Listener.Close()
}

// A remote forward (ssh -R) whose listener failed for good is closed and
// logged, and is gone from the connection's forwards: the same forward
// asked again on that connection is granted and carries connections. It
// stayed in the table, so the new request was refused as a duplicate
// until the client cancelled the dead one or disconnected.
func TestRemoteForwardListenerFailureFreesItsKey(t *testing.T) {
	t.Parallel()
	var (
		logs testenv.LogBuffer
		mu   sync.Mutex
		lns  []*breakableListener
	)
	addr, hk, ck := srvStartTweakedConfig(t, ServerConfig{Logger: slog.New(slog.NewTextHandler(&logs, nil))}, func(s *Server) {
		s.wrapForwardListener = func(ln net.Listener) net.Listener {
			bl := &breakableListener{Listener: ln}
			mu.Lock()
			lns = append(lns, bl)
			mu.Unlock()
			return bl
		}
	})
	c, err := srvDialWith(addr, hk, ssh.PublicKeys(ck))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ln, err := c.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	mu.Lock()
	if len(lns) != 1 {
		mu.Unlock()
		t.Fatalf("%d forward listeners made, want 1", len(lns))
	}
	first := lns[0]
	mu.Unlock()
	first.breakNow()
	// The log line comes once the forward is gone from the table.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && !strings.Contains(logs.String(), "forward listener failed"); {
		time.Sleep(5 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), errListenerBroken.Error()) {
		t.Fatalf("no log of the failed listener naming its error; logs:\n%s", logs.String())
	}

	// Asked again with the same address and port, as ssh -R would: the
	// client's listener above is still the one its forwarded
	// connections go to.
	ok, _, err := c.SendRequest("tcpip-forward", true, ssh.Marshal(&tcpipForwardMsg{Addr: "127.0.0.1", Port: uint32(port)}))
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatalf("tcpip-forward of 127.0.0.1:%d again, after its listener failed: refused, want granted", port)
	}
	conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), srvTestWait)
	if err != nil {
		t.Fatalf("dial the forward granted again: %v", err)
	}
	defer conn.Close()
	fc, err := ln.Accept()
	if err != nil {
		t.Fatalf("accept a connection of the forward granted again: %v", err)
	}
	defer fc.Close()
	if _, err := conn.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(fc, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("forwarded bytes: %q, %v; want \"ping\"", buf, err)
	}
}
