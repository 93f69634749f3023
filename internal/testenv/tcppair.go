package testenv

import (
	"net"
	"testing"
)

// TCPPair returns the two ends of a loopback TCP connection, closed when
// the test ends: unlike net.Pipe's, each end's writes are buffered, as
// SSH, whose two sides both write first, needs.
func TCPPair(t testing.TB) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := ln.Accept()
	if err != nil {
		_ = a.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	return a, b
}
