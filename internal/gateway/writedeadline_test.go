package gateway

import (
	"bufio"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// TestStalledReaderReleasesHandler: a client that asks for an answer
// larger than the sockets' buffers and then reads nothing held the
// handler's write, and so its goroutine and buffers, for as long as it
// kept the connection open. The write now fails once it has waited
// writeTimeout, and net/http closes the connection.
func TestStalledReaderReleasesHandler(t *testing.T) {
	old := writeTimeout
	writeTimeout = 100 * time.Millisecond
	t.Cleanup(func() { writeTimeout = old })
	e := newEnv(t, nil)
	wrote := make(chan error, 1)
	e.srv.Mux().HandleFunc("GET /test/big", func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 64<<10)
		for range 4096 { // 256 MiB: more than any socket buffer holds
			if _, err := w.Write(chunk); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	})
	c, err := net.Dial("tcp", e.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4 << 10)
	}
	req, _ := http.NewRequest("GET", e.ts.URL+"/test/big", nil)
	if err := req.Write(c); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-wrote:
		if err == nil {
			t.Fatal("the handler wrote 256 MiB to a client that reads nothing")
		}
	case <-e.ctx.Done():
		t.Fatal("the handler's write to a client that reads nothing still waits")
	}
}

// TestSlowReaderGetsWholeAnswer: the bound is on a client that takes
// nothing, not on one that takes a large answer slowly: an answer written
// in one Write (an exec's output is) reaches a client that reads it over
// longer than writeTimeout.
func TestSlowReaderGetsWholeAnswer(t *testing.T) {
	old := writeTimeout
	// 2 s, and about 3 s of reading: a stall of the test's machine under
	// 2 s (CI, loaded) leaves each 64 KiB's deadline unmissed.
	writeTimeout = 2 * time.Second
	t.Cleanup(func() { writeTimeout = old })
	e := newEnv(t, nil)
	const size = 24 << 20
	wrote := make(chan error, 1)
	e.srv.Mux().HandleFunc("GET /test/one", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		_, err := w.Write(make([]byte, size))
		wrote <- err
	})
	c, err := net.Dial("tcp", e.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(16 << 10)
	}
	req, _ := http.NewRequest("GET", e.ts.URL+"/test/one", nil)
	if err := req.Write(c); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReaderSize(c, 16<<10), req)
	if err != nil {
		t.Fatal(err)
	}
	// 16 KiB every 2 ms at most: longer than writeTimeout in all.
	buf := make([]byte, 16<<10)
	total := 0
	for {
		n, err := res.Body.Read(buf)
		total += n
		if err != nil {
			if total != size {
				t.Fatalf("the answer ended after %d of its %d bytes: %v", total, size, err)
			}
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err := <-wrote; err != nil {
		t.Errorf("the handler's write: %v", err)
	}
}
