//go:build linux

package rawio

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/testenv"
	"golang.org/x/net/nettest"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	a, b := testenv.TCPPair(t)
	return a.(*net.TCPConn), b.(*net.TCPConn)
}

// TestTCPConnConformance: a TCPConn behaves as a net.Conn must (x/net's
// conformance suite: deadlines, Close unblocking reads and writes,
// concurrent reads and writes, data in order), so it can stand wherever
// the conn it wraps stood.
func TestTCPConnConformance(t *testing.T) {
	nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
		a, b := tcpPair(t)
		ra, rb := NewTCPConn(a), NewTCPConn(b)
		if _, ok := ra.(*TCPConn); !ok {
			t.Fatalf("NewTCPConn(%T) = %T, want *TCPConn", a, ra)
		}
		return ra, rb, func() { a.Close(); b.Close() }, nil
	})
}

// TestTCPConnErrors: a TCPConn's raw reads and writes fail as net's own do: EOF at
// the peer's end, a timeout at a deadline, the kernel's errno in a
// *net.OpError naming the conn, net.ErrClosed on a closed conn.
func TestTCPConnErrors(t *testing.T) {
	a, b := tcpPair(t) // closed at the test's end
	ra := Raw(a)
	if ra == nil {
		t.Fatal("no raw reader for a TCP conn")
	}
	if n, err := ra.Read(nil); n != 0 || err != nil {
		t.Fatalf("an empty read: %d, %v", n, err)
	}
	if err := a.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := ra.Read(make([]byte, 10)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a read past its deadline: %v", err)
	}
	_ = a.SetReadDeadline(time.Time{})
	if _, err := b.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 10)
	if n, err := ra.Read(p); n != 5 || err != nil || string(p[:5]) != "hello" {
		t.Fatalf("read %q, %v", p[:n], err)
	}
	if err := b.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if n, err := ra.Read(p); n != 0 || err != io.EOF {
		t.Fatalf("read at the peer's EOF: %d, %v; want io.EOF", n, err)
	}

	big := make([]byte, 64<<20) // before the deadline: zeroing it took the 100 ms under -race and load
	if err := a.SetWriteDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	n, err := ra.Write(big) // b reads nothing
	if !errors.Is(err, os.ErrDeadlineExceeded) || n <= 0 || n >= 64<<20 {
		t.Fatalf("a write to a peer that reads nothing: %d bytes, %v; want some, then the deadline", n, err)
	}
	_ = a.SetWriteDeadline(time.Time{})
	b.Close()
	for range 100 { // the first writes may land before the reset
		if _, err = ra.Write(make([]byte, 64<<10)); err != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "write" || !(errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)) {
		t.Fatalf("a write to a closed peer: %v, want a write OpError with EPIPE or ECONNRESET", err)
	}
	a.Close()
	if _, err := ra.Read(p); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("a read on a closed conn: %v, want net.ErrClosed", err)
	}
	if _, err := ra.Write(p); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("a write on a closed conn: %v, want net.ErrClosed", err)
	}
}
