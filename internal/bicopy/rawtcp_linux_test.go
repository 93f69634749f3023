//go:build linux

package bicopy

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net"
	"testing"
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
