package bytestream

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

func tcpConnPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			c = nil
		}
		ch <- c
	}()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b := <-ch
	if b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	return a, b
}

// TestReadAheadSmallReads: 4 KiB reads (what the bufio layers above ask)
// see every byte in order, the leftover of a hijack first, and the
// read-ahead buffer is given back once drained.
func TestReadAheadSmallReads(t *testing.T) {
	a, b := tcpConnPair(t)
	r := newReadAhead(b, []byte("early"))
	data := randomData(7, 1<<20)
	go func() { _, _ = a.Write(data); _ = a.Close() }()

	var got bytes.Buffer
	p := make([]byte, 4096)
	sawAhead := false
	for {
		n, err := r.Read(p)
		got.Write(p[:n])
		if r.buf != nil {
			sawAhead = true
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if want := append([]byte("early"), data...); !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("got %d bytes, want %d in order", got.Len(), len(want))
	}
	if !sawAhead {
		t.Fatal("no read ever kept bytes ahead: every small read was a syscall")
	}
	if r.buf != nil {
		t.Fatal("the read-ahead buffer is still held after the stream drained")
	}
}

// TestReadAheadErrors: a read deadline and a closed conn fail as net.Conn
// reads do, and no buffer stays held.
func TestReadAheadErrors(t *testing.T) {
	_, b := tcpConnPair(t)
	r := newReadAhead(b, nil)
	if err := b.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	_, err := r.Read(make([]byte, 10))
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read past the deadline: %v, want a timeout net.Error", err)
	}
	if r.buf != nil {
		t.Fatal("a buffer is held after a read that got nothing")
	}
	_ = b.SetReadDeadline(time.Time{})
	done := make(chan error, 1)
	go func() { _, err := r.Read(make([]byte, 10)); done <- err }()
	time.AfterFunc(20*time.Millisecond, func() { _ = b.Close() })
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read on a closed conn: %v, want net.ErrClosed", err)
	}
}

// TestReadAheadReadsAllocateNothing: a read that takes its bytes from the
// kernel, the path every read-ahead syscall takes on the client, the
// gateway and the agent, allocates nothing (it made four allocations).
func TestReadAheadReadsAllocateNothing(t *testing.T) {
	a, b := tcpConnPair(t)
	r := newReadAhead(b, nil)
	if r.raw == nil {
		t.Skip("no raw reads on this platform")
	}
	msg := make([]byte, 1000)
	p := make([]byte, 4096)
	syscalls := 0
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := a.Write(msg); err != nil {
			t.Fatal(err)
		}
		for got := 0; got < len(msg); {
			if r.buf == nil {
				syscalls++
			}
			n, err := r.Read(p)
			if err != nil {
				t.Fatal(err)
			}
			got += n
		}
	})
	if syscalls < 200 {
		t.Fatalf("%d reads went to the kernel in 201 rounds: the test no longer measures them", syscalls)
	}
	if allocs != 0 {
		t.Fatalf("a read from the kernel allocated %v times", allocs)
	}
}
