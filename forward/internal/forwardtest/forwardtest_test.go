package forwardtest

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	return c
}

// Echo returns what was written and then EOF; Sink answers with the count.
func TestEchoAndSink(t *testing.T) {
	c := dial(t, Serve(t, Echo))
	if _, err := io.WriteString(c, "hello"); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).CloseWrite()
	if got, err := io.ReadAll(c); err != nil || string(got) != "hello" {
		t.Fatalf("echo = %q, %v", got, err)
	}

	s := dial(t, Serve(t, Sink))
	if _, err := s.Write(make([]byte, 100_000)); err != nil {
		t.Fatal(err)
	}
	_ = s.(*net.TCPConn).CloseWrite()
	var n int64
	if err := binary.Read(s, binary.BigEndian, &n); err != nil || n != 100_000 {
		t.Fatalf("sink count = %d, %v", n, err)
	}
}

// A connection still open at cleanup is closed by it: the client stays
// open past the subtest, whose cleanup returns only if Serve closed the
// server side (a handler blocked in Read would hang wg.Wait), and the
// client then reads EOF.
func TestCleanupClosesOpenConnections(t *testing.T) {
	var c net.Conn
	t.Run("inner", func(t *testing.T) {
		var err error
		if c, err = net.Dial("tcp", Serve(t, Echo)); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, "x"); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1)
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
	})
	if c == nil {
		t.FailNow()
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("read after cleanup = %d, %v; want EOF", n, err)
	}
}
