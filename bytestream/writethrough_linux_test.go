//go:build linux

package bytestream

import (
	"bytes"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestWriteThrough: a conn dialed with WriteThrough carries a stream
// whole and in order, over ws:// (this package's client frames) and
// wss:// (frames sealed by TLS), and a Write to a peer that has gone
// fails itself: its frames were sent before it returned, where a conn
// writing behind answers it with success and leaves the failure to a
// later Write.
func TestWriteThrough(t *testing.T) {
	opts := &WebSocketOptions{WriteThrough: true}
	for _, tc := range []struct {
		name  string
		serve func(testing.TB) (string, <-chan net.Conn)
	}{
		{"ws", func(t testing.TB) (string, <-chan net.Conn) { return wsServer(t, nil) }},
		{"wss", tlsWSServer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, ch := tc.serve(t)
			a, err := WebSocket(testCtx(t), url, opts)
			if err != nil {
				t.Fatal(err)
			}
			b := acceptedConn(t, ch)
			defer closeBoth(a, b)
			data := randomData(11, 3<<20)
			got := make(chan []byte, 1)
			go func() { buf, _ := readRandomly(b, len(data), 12); got <- buf }()
			if err := writeRandomly(a, data, 13); err != nil {
				t.Fatal(err)
			}
			if buf := <-got; !bytes.Equal(buf, data) {
				t.Fatalf("peer got %d bytes, not the %d sent", len(buf), len(data))
			}
		})
	}

	t.Run("reset", func(t *testing.T) {
		for _, through := range []bool{true, false} {
			a, b := wsPairOpts(t, &WebSocketOptions{WriteThrough: through}, nil)
			// The peer resets its TCP conn, as a gateway killed does.
			tcp := b.(*wsConn).cork.Conn.(*net.TCPConn)
			if err := tcp.SetLinger(0); err != nil {
				t.Fatal(err)
			}
			_ = tcp.Close()
			waitTCPClosed(t, a.(*wsConn).cork.Conn.(*net.TCPConn))
			_, err := a.Write([]byte("after the reset"))
			if through && err == nil {
				t.Fatal("a WriteThrough Write to a peer that reset its conn returned no error")
			}
			if !through && err != nil {
				// The test's premise: writing behind, that Write succeeds.
				t.Fatalf("a Write held behind failed at once: %v", err)
			}
		}
	})
}

// waitTCPClosed waits until c's socket has taken its peer's reset (the
// kernel's TCP state is CLOSE), so the next write meets it.
func waitTCPClosed(t *testing.T, c *net.TCPConn) {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		var state uint8
		if err := raw.Control(func(fd uintptr) {
			if info, err := unix.GetsockoptTCPInfo(int(fd), unix.SOL_TCP, unix.TCP_INFO); err == nil {
				state = info.State
			}
		}); err != nil {
			t.Fatal(err)
		}
		if state == unix.BPF_TCP_CLOSE {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the socket is in TCP state %d 10 s after its peer's reset", state)
		}
	}
}
