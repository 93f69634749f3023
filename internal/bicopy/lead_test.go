package bicopy

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// readSpy counts the bytes read from its conn.
type readSpy struct {
	net.Conn
	read atomic.Int64
}

func (r *readSpy) Read(p []byte) (int, error) {
	n, err := r.Conn.Read(p)
	r.read.Add(int64(n))
	return n, err
}

// recordConn is a dialed conn that records what was written to it.
type recordConn struct {
	net.Conn // nil: only Write and Close are used
	mu       sync.Mutex
	writes   []string
	closed   bool
	err      error
}

func (c *recordConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	c.writes = append(c.writes, string(p))
	return len(p), nil
}

func (c *recordConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return nil
}

// dialLeadWithin runs DialLead and fails the test if it has not returned
// within a generous bound (a lead wait of an hour must not be waited out
// when the client has spoken).
func dialLeadWithin(t *testing.T, src net.Conn, wait time.Duration, dial func() (net.Conn, error)) (net.Conn, int64, error) {
	t.Helper()
	type result struct {
		c   net.Conn
		n   int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, n, err := DialLead(src, wait, dial)
		done <- result{c, n, err}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	select {
	case r := <-done:
		return r.c, r.n, r.err
	case <-ctx.Done():
		_ = src.Close()
		<-done
		t.Fatal("DialLead waited out its wait although the client had spoken")
		return nil, 0, nil
	}
}

// TestDialLeadSendsFirstBytes: what the client sent with its connect is
// written to the dialed conn before anything else, and DialLead does not
// wait for more.
func TestDialLeadSendsFirstBytes(t *testing.T) {
	client, src := tcpPair(t)
	defer client.Close()
	defer src.Close()
	if _, err := client.Write([]byte("GET / HTTP/1.1\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	rc := &recordConn{}
	// The read comes before the dial: that is what puts the request in
	// the open's burst.
	rs := &readSpy{Conn: src}
	c, n, err := dialLeadWithin(t, rs, time.Hour, func() (net.Conn, error) {
		if rs.read.Load() != 18 {
			t.Errorf("dialed after reading %d bytes; want the request read first", rs.read.Load())
		}
		return rc, nil
	})
	if err != nil || c != rc {
		t.Fatalf("DialLead: %v, %v", c, err)
	}
	if n != 18 || len(rc.writes) != 1 || rc.writes[0] != "GET / HTTP/1.1\r\n\r\n" {
		t.Fatalf("wrote %d bytes as %q; want the request in one write", n, rc.writes)
	}
	// The deadline is gone: a read waits for what comes later.
	go func() {
		time.Sleep(20 * time.Millisecond)
		_, _ = client.Write([]byte("more"))
	}()
	buf := make([]byte, 4)
	if _, err := io.ReadFull(src, buf); err != nil || string(buf) != "more" {
		t.Fatalf("later read: %q, %v", buf, err)
	}
}

// TestDialLeadServerFirst: a client that waits for its server to speak is
// dialed for after the wait, with nothing written, and its later bytes
// are read as ever.
func TestDialLeadServerFirst(t *testing.T) {
	client, src := tcpPair(t)
	defer client.Close()
	defer src.Close()
	rc := &recordConn{}
	dialed := false
	const wait = 5 * time.Millisecond
	start := time.Now()
	c, n, err := DialLead(src, wait, func() (net.Conn, error) {
		// A deadline never fires early: a dial sooner did not wait.
		if since := time.Since(start); since < wait {
			t.Errorf("dialed %v after the start; want the %v wait first", since, wait)
		}
		dialed = true
		return rc, nil
	})
	if err != nil || c != rc || !dialed {
		t.Fatalf("DialLead: %v, %v (dialed %v)", c, err, dialed)
	}
	if n != 0 || len(rc.writes) != 0 {
		t.Fatalf("wrote %d bytes (%q) for a silent client", n, rc.writes)
	}
	go func() {
		time.Sleep(20 * time.Millisecond) // past the wait: its deadline must be gone
		_, _ = client.Write([]byte("hello"))
	}()
	buf := make([]byte, 5)
	if _, err := io.ReadFull(src, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("read after the wait: %q, %v", buf, err)
	}
}

// TestDialLeadEnded: a client that half-closed (with or without a
// request) is still dialed for, and Copy sees its end again.
func TestDialLeadEnded(t *testing.T) {
	for _, first := range []string{"", "QUIT\r\n"} {
		client, src := tcpPair(t)
		if first != "" {
			if _, err := client.Write([]byte(first)); err != nil {
				t.Fatal(err)
			}
		}
		if err := client.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		rc := &recordConn{}
		c, n, err := dialLeadWithin(t, src, time.Hour, func() (net.Conn, error) { return rc, nil })
		if err != nil || c != rc {
			t.Fatalf("%q: DialLead: %v, %v", first, c, err)
		}
		if want := int64(len(first)); n != want {
			t.Fatalf("%q: wrote %d bytes, want %d", first, n, want)
		}
		if n == 0 {
			// Nothing came: the end was read, and is read again.
			if m, err := src.Read(make([]byte, 8)); m != 0 || err != io.EOF {
				t.Fatalf("read after an ended lead: %d, %v; want EOF", m, err)
			}
		} else if rest, err := io.ReadAll(src); err != nil || len(rest) != 0 {
			t.Fatalf("%q: read after the lead: %q, %v; want the end", first, rest, err)
		}
		_ = client.Close()
		_ = src.Close()
	}
}

// TestDialLeadErrors: a failed dial is returned as is; a failed write of
// the lead closes the dialed conn; src is left to the caller either way.
func TestDialLeadErrors(t *testing.T) {
	client, src := tcpPair(t)
	defer client.Close()
	defer src.Close()
	if _, err := client.Write([]byte("req")); err != nil {
		t.Fatal(err)
	}
	// A client reset during the wait: nothing dialed, and the error says
	// it was the client.
	client2, src2 := tcpPair(t)
	_ = client2.SetLinger(0)
	_ = client2.Close()
	if c, _, err := dialLeadWithin(t, src2, time.Hour, func() (net.Conn, error) {
		t.Error("dialed for a reset client")
		return nil, nil
	}); c != nil || !errors.Is(err, ErrLeadFailed) {
		t.Fatalf("reset client: %v, %v; want ErrLeadFailed", c, err)
	}
	_ = src2.Close()

	refused := errors.New("connect failed")
	if c, _, err := dialLeadWithin(t, src, time.Hour, func() (net.Conn, error) { return nil, refused }); c != nil || !errors.Is(err, refused) || errors.Is(err, ErrLeadFailed) {
		t.Fatalf("failed dial: %v, %v", c, err)
	}

	if _, err := client.Write([]byte("req")); err != nil {
		t.Fatal(err)
	}
	broken := errors.New("channel open refused")
	rc := &recordConn{err: broken}
	if c, _, err := dialLeadWithin(t, src, time.Hour, func() (net.Conn, error) { return rc, nil }); c != nil || !errors.Is(err, broken) || !rc.closed {
		t.Fatalf("failed write: %v, %v (closed %v)", c, err, rc.closed)
	}
	if _, err := src.Write([]byte("x")); err != nil {
		t.Fatalf("src was closed by DialLead: %v", err)
	}
}

// TestDialLeadNoDeadlines: a src without deadlines is dialed for at once.
func TestDialLeadNoDeadlines(t *testing.T) {
	rc := &recordConn{}
	src := noDeadlineConn{}
	c, n, err := dialLeadWithin(t, src, time.Hour, func() (net.Conn, error) { return rc, nil })
	if err != nil || c != rc || n != 0 {
		t.Fatalf("DialLead: %v, %d, %v", c, n, err)
	}
}

type noDeadlineConn struct{ net.Conn }

func (noDeadlineConn) SetReadDeadline(time.Time) error { return errors.ErrUnsupported }
func (noDeadlineConn) Read([]byte) (int, error)        { panic("read without a deadline") }
