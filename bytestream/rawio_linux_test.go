//go:build linux

package bytestream

import (
	"bytes"
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// rawTCPPair returns the two ends of a loopback TCP connection, both
// *net.TCPConn, closed at cleanup.
func rawTCPPair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := ln.Accept()
	if err != nil {
		a.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a.(*net.TCPConn), b.(*net.TCPConn)
}

// TestRawWriterPartialWrites: with socket buffers far smaller than the
// flush and a reader that takes its time, writev is cut short inside a
// vector and between vectors and the socket fills (EAGAIN) again and
// again; every byte still arrives once, in order, and writev reports them
// all.
func TestRawWriterPartialWrites(t *testing.T) {
	a, b := rawTCPPair(t)
	if err := a.SetWriteBuffer(8 << 10); err != nil {
		t.Fatal(err)
	}
	if err := b.SetReadBuffer(8 << 10); err != nil {
		t.Fatal(err)
	}
	w := newRawWriter(a)
	if w == nil {
		t.Fatal("no raw writer for a TCP conn")
	}
	data := randomData(7, 2<<20)
	var v net.Buffers
	for rest, i := data, 0; len(rest) > 0; i++ {
		n := min(len(rest), []int{1, 100, 4093, 65536, 0, 200000}[i%6])
		v = append(v, rest[:n])
		rest = rest[n:]
	}
	if len(v) > maxCorkPieces {
		t.Fatalf("%d pieces, more than a flush holds", len(v))
	}
	got := make(chan []byte, 1)
	go func() {
		var buf bytes.Buffer
		p := make([]byte, 3000)
		for buf.Len() < len(data) {
			n, err := b.Read(p)
			buf.Write(p[:n])
			if err != nil {
				break
			}
			if buf.Len()%16 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		got <- buf.Bytes()
	}()
	n, err := w.writev(v)
	if err != nil || n != int64(len(data)) {
		t.Fatalf("writev wrote %d of %d bytes: %v", n, len(data), err)
	}
	if r := <-got; !bytes.Equal(r, data) {
		t.Fatalf("the reader got %d bytes, not the %d written", len(r), len(data))
	}
}

// TestRawWriterDeadline: a flush to a peer that reads nothing ends at the
// conn's write deadline with a timeout error, as the conn's own Write
// does, having written what fit.
func TestRawWriterDeadline(t *testing.T) {
	a, _ := rawTCPPair(t)
	w := newRawWriter(a)
	big := make([]byte, 64<<20) // before the deadline: zeroing it may take the 100 ms under -race and load
	if err := a.SetWriteDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	n, err := w.writev(net.Buffers{big})
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("writev to a peer that reads nothing: %v, want the deadline", err)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("writev's error %v is no net.Error timeout", err)
	}
	if n <= 0 || n >= 64<<20 {
		t.Fatalf("writev reported %d bytes written, want what the buffers took", n)
	}
}

// TestRawWriterPeerGone: a flush to a peer that has closed fails with the
// kernel's error (EPIPE or ECONNRESET) in a *net.OpError naming the
// conn, not a panic or a hang; a flush on a closed conn says
// net.ErrClosed.
func TestRawWriterPeerGone(t *testing.T) {
	a, b := rawTCPPair(t)
	w := newRawWriter(a)
	b.Close()
	var err error
	for range 100 { // the first writes may land before the reset
		if _, err = w.writev(net.Buffers{make([]byte, 64<<10)}); err != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "write" || !(errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)) {
		t.Fatalf("writev to a closed peer: %v, want a write OpError with EPIPE or ECONNRESET", err)
	}
	a.Close()
	if _, err := w.writev(net.Buffers{[]byte("x")}); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("writev on a closed conn: %v, want net.ErrClosed", err)
	}
}

// TestReadFDRaw: readFD reads what is there, says wait (EAGAIN) on an
// empty non-blocking descriptor, and 0 at the peer's EOF.
func TestReadFDRaw(t *testing.T) {
	a, b := rawTCPPair(t)
	raw, err := b.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	read := func() (n int, wait bool, err error) {
		p := make([]byte, 10)
		if cerr := raw.Read(func(fd uintptr) bool {
			n, wait, err = readFD(fd, p)
			return true // one try: the test wants to see wait
		}); cerr != nil {
			t.Fatal(cerr)
		}
		return n, wait, err
	}
	if n, wait, err := read(); !wait || n != -1 || !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("read of an empty socket: %d, wait %v, %v; want -1, wait, EAGAIN", n, wait, err)
	}
	if _, err := a.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, wait, err := read()
		if wait && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
			continue
		}
		if n != 5 || err != nil {
			t.Fatalf("read after 5 bytes: %d, %v", n, err)
		}
		break
	}
	a.Close()
	for {
		n, wait, err := read()
		if wait && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
			continue
		}
		if n != 0 || err != nil {
			t.Fatalf("read at EOF: %d, %v; want 0, nil", n, err)
		}
		break
	}
	if n, _, err := readFD(0, nil); n != 0 || err != nil {
		t.Fatalf("an empty read: %d, %v", n, err)
	}
}
