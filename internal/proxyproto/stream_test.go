package proxyproto

import (
	"bytes"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/testenv"
	"github.com/hostgate/hostgate/internal/yamux"
)

// framesConn counts the writes of the gateway's end of a yamux session:
// yamux writes a data frame as its header, then its body.
type framesConn struct {
	net.Conn
	mu     sync.Mutex
	writes [][]byte
}

func (c *framesConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writes = append(c.writes, bytes.Clone(p))
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *framesConn) bodies() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out [][]byte
	for _, w := range c.writes {
		if len(w) != 12 { // headers are 12 bytes; bodies here are longer
			out = append(out, w)
		}
	}
	return out
}

func yamuxPair(t *testing.T) (gw *yamux.Session, fc *framesConn, host *yamux.Session) {
	t.Helper()
	a, b := testenv.TCPPair(t)
	var err error
	fc = &framesConn{Conn: a}
	cfg := yamux.DefaultConfig()
	cfg.LogOutput = io.Discard
	gw, err = yamux.Client(fc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	host, err = yamux.Server(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gw.Close(); _ = host.Close() })
	return gw, fc, host
}

// TestStreamLineRidesFirstWrite: the line and the stream's first bytes
// leave in one frame (one body write), and the host reads both in order.
func TestStreamLineRidesFirstWrite(t *testing.T) {
	gw, fc, host := yamuxPair(t)
	st, err := gw.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	h := Header{Src: netip.MustParseAddrPort("127.0.0.1:40000"), Dst: netip.MustParseAddrPort("127.0.0.1:8080")}
	s := NewStream(st, h)
	const first = "SSH-2.0-Go\r\n"
	if n, err := s.Write([]byte(first)); n != len(first) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if n, err := s.Write([]byte("more")); n != 4 || err != nil {
		t.Fatalf("second Write = %d, %v", n, err)
	}
	line := string(h.Append(nil))
	bodies := fc.bodies()
	if len(bodies) != 2 || string(bodies[0]) != line+first || string(bodies[1]) != "more" {
		t.Fatalf("bodies written %q, want the line with the first bytes, then the rest", bodies)
	}
	hs, err := host.AcceptStream()
	if err != nil {
		t.Fatal(err)
	}
	c, got, err := Accept(hs)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got.Src != h.Src {
		t.Errorf("Src = %v, want %v", got.Src, h.Src)
	}
	b := make([]byte, len(first)+4)
	if _, err := io.ReadFull(c, b); err != nil || string(b) != first+"more" {
		t.Errorf("after the line: %q, %v", b, err)
	}
	_ = s.Close()
}

// TestStreamReadFirstFlushes: a stream whose opener reads before it writes
// (an SSH client that waits for the server's version, which waits for the
// line) still gets the line to the host, alone; the Write after it goes
// as it is.
func TestStreamReadFirstFlushes(t *testing.T) {
	gw, _, host := yamuxPair(t)
	st, err := gw.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	s := NewStream(st, Header{})
	defer s.Close()
	read := make(chan string, 1)
	go func() {
		b := make([]byte, 64)
		n, _ := s.Read(b)
		read <- string(b[:n])
	}()
	hs, err := host.AcceptStream()
	if err != nil {
		t.Fatal(err)
	}
	_ = hs.SetReadDeadline(time.Now().Add(10 * time.Second))
	c, h, err := Accept(hs)
	if err != nil {
		t.Fatalf("no line while the opener only reads: %v", err)
	}
	defer c.Close()
	if h.Known() {
		t.Errorf("caller %v, want UNKNOWN", h)
	}
	if _, err := c.Write([]byte("SSH-2.0-host\r\n")); err != nil {
		t.Fatal(err)
	}
	if got := <-read; got != "SSH-2.0-host\r\n" {
		t.Errorf("opener read %q", got)
	}
	if _, err := s.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := io.ReadFull(c, b); err != nil || b[0] != 'x' {
		t.Errorf("after the flushed line: %q, %v", b, err)
	}
}
