package bytestream

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// testCtx is a per-test context with a generous deadline.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// pair returns two connected streams; both are closed at cleanup.
type pairFunc func(t testing.TB) (a, b net.Conn)

func tcpPair(t testing.TB) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() { c, err := ln.Accept(); ch <- res{c, err} }()
	port := ln.Addr().(*net.TCPAddr).Port
	a, err := TCP(testCtx(t), "127.0.0.1", port)
	if err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { a.Close(); r.c.Close() })
	return a, r.c
}

// wsServer serves Accept on loopback and hands each accepted conn to the
// returned channel. The handler returns right away: the conn must outlive it.
func wsServer(t testing.TB, opts *AcceptOptions) (string, <-chan net.Conn) {
	t.Helper()
	ch := make(chan net.Conn, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Enrollment", "host-42")
		c, err := Accept(w, r, opts)
		if err != nil {
			return
		}
		ch <- c
	}))
	t.Cleanup(srv.Close)
	return srv.URL, ch
}

func wsPairOpts(t testing.TB, dial *WebSocketOptions, accept *AcceptOptions) (net.Conn, net.Conn) {
	t.Helper()
	url, ch := wsServer(t, accept)
	a, err := WebSocket(testCtx(t), url, dial)
	if err != nil {
		t.Fatal(err)
	}
	b := acceptedConn(t, ch)
	t.Cleanup(func() { closeBoth(a, b) })
	return a, b
}

// acceptedConn is the next conn a test server accepted on ch; the test
// fails if none comes while its context lasts.
func acceptedConn(t testing.TB, ch <-chan net.Conn) net.Conn {
	t.Helper()
	select {
	case c := <-ch:
		return c
	case <-testCtx(t).Done():
		t.Fatal("no server conn")
		return nil
	}
}

func wsPair(t testing.TB) (net.Conn, net.Conn) { return wsPairOpts(t, nil, nil) }

// wssPair is wsPair over TLS (wss://): client, server.
func wssPair(t testing.TB) (net.Conn, net.Conn) {
	url, ch := tlsWSServer(t)
	a, err := WebSocket(testCtx(t), "wss"+strings.TrimPrefix(url, "https"), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := acceptedConn(t, ch)
	t.Cleanup(func() { closeBoth(a, s) })
	return a, s
}

// closeBoth closes a and b concurrently: a WebSocket Close waits for the
// peer's close frame, which needs the peer to be reading or closing too.
func closeBoth(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); a.Close() }()
	go func() { defer wg.Done(); b.Close() }()
	wg.Wait()
}

func pipePair(t testing.TB) (net.Conn, net.Conn) {
	t.Helper()
	r1, w1, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r2, w2, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	a, b := NewPipeConn(r1, w2), NewPipeConn(r2, w1)
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// randomData returns n pseudo-random bytes from a seeded source.
func randomData(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// writeRandomly writes data in chunks of random size (x/crypto's
// copyNRandomly style), so framing bugs at odd boundaries show.
func writeRandomly(w io.Writer, data []byte, seed uint64) error {
	r := rand.New(rand.NewPCG(seed, 1))
	for len(data) > 0 {
		n := min(len(data), 1+r.IntN(70000))
		if _, err := w.Write(data[:n]); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// readRandomly reads exactly n bytes with reads of random size.
func readRandomly(rd io.Reader, n int, seed uint64) ([]byte, error) {
	r := rand.New(rand.NewPCG(seed, 2))
	out := make([]byte, 0, n)
	for len(out) < n {
		k := min(n-len(out), 1+r.IntN(70000))
		m, err := rd.Read(out[len(out) : len(out)+k])
		out = out[:len(out)+m]
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// exchange sends size random bytes each way at once and checks both
// arrive intact.
func exchange(t *testing.T, a, b net.Conn, size int) {
	t.Helper()
	da, db := randomData(1, size), randomData(2, size)
	var wg sync.WaitGroup
	send := func(c net.Conn, d []byte, seed uint64) {
		defer wg.Done()
		if err := writeRandomly(c, d, seed); err != nil {
			t.Errorf("write: %v", err)
		}
	}
	wg.Add(2)
	go send(a, da, 3)
	go send(b, db, 4)
	gotB, errB := readRandomly(b, size, 5)
	gotA, errA := readRandomly(a, size, 6)
	wg.Wait()
	if errA != nil || errB != nil {
		t.Fatalf("read: %v, %v", errA, errB)
	}
	if sha256.Sum256(gotB) != sha256.Sum256(da) || !bytes.Equal(gotA, db) {
		t.Fatal("data corrupted in transit")
	}
}
