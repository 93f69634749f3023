//go:build linux

package bicopy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestCopyTCPRaw: a TCP conn on one side of Copy and an in-memory pipe on
// the other (so no splice) moves 8 MiB each way intact through the raw
// reads and writes, with socket buffers small enough that the writes fill
// them again and again.
func TestCopyTCPRaw(t *testing.T) {
	tcpNear, tcpFar := tcpPair(t)
	t.Cleanup(func() { tcpNear.Close(); tcpFar.Close() })
	for _, c := range []*net.TCPConn{tcpNear, tcpFar} {
		if err := c.SetWriteBuffer(16 << 10); err != nil {
			t.Fatal(err)
		}
		if err := c.SetReadBuffer(16 << 10); err != nil {
			t.Fatal(err)
		}
	}
	pipeNear, pipeFar := net.Pipe()
	up := bytes.Repeat([]byte("hostgate"), 1<<20)
	down := make([]byte, 8<<20)
	for i := range down {
		down[i] = byte(rand.Uint32())
	}
	copied := make(chan error, 1)
	go func() {
		_, err := Copy(context.Background(), tcpNear, pipeNear)
		copied <- err
	}()
	wrote := make(chan error, 1)
	go func() { _, err := pipeFar.Write(up); wrote <- err }()
	gotUp := make([]byte, len(up))
	if _, err := io.ReadFull(tcpFar, gotUp); err != nil {
		t.Fatal(err)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gotUp, up) {
		t.Fatal("the TCP peer got other bytes than the pipe sent")
	}
	gotDown := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(pipeFar); gotDown <- b }()
	if _, err := tcpFar.Write(down); err != nil {
		t.Fatal(err)
	}
	if err := tcpFar.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	// The pipe cannot half-close: Copy closes both ends once the TCP
	// side said EOF, which ends the pipe's reader.
	if b := <-gotDown; !bytes.Equal(b, down) {
		t.Fatalf("the pipe got %d bytes, not the %d the TCP peer sent", len(b), len(down))
	}
	if err := <-copied; err != nil {
		t.Fatalf("Copy: %v", err)
	}
}

// TestRawTCPErrors: the raw reads and writes fail as net's own do: EOF at
// the peer's end, a timeout at a deadline, the kernel's errno in a
// *net.OpError naming the conn, net.ErrClosed on a closed conn.
func TestRawTCPErrors(t *testing.T) {
	a, b := tcpPair(t)
	t.Cleanup(func() { a.Close(); b.Close() })
	ra := newRawTCP(a)
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
