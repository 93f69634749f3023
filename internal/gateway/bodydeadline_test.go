package gateway

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/store"
)

// shortBodyTimeout sets bodyTimeout for one test.
func shortBodyTimeout(t *testing.T, d time.Duration) {
	old := bodyTimeout
	bodyTimeout = d
	t.Cleanup(func() { bodyTimeout = old })
}

// A body that trickles in to a handler that answers without reading it
// (no token, no route) gets its answer once bodyTimeout has passed, and
// the connection closes; before, net/http waited for the body forever.
func TestTrickledBodyAnswered(t *testing.T) {
	shortBodyTimeout(t, 200*time.Millisecond)
	e := newEnv(t, nil)
	admin := e.token(store.RoleAdmin)
	for _, tc := range []struct {
		name, head string
		status     int
	}{
		{"no token", "POST /v1/hosts/h1/certificates HTTP/1.1\r\nContent-Length: 100000\r\n", 401},
		{"no route", "POST /v1/nothing/here HTTP/1.1\r\nAuthorization: Bearer " + admin + "\r\nContent-Length: 100000\r\n", 404},
		{"chunked", "POST /v1/hosts/h1/certificates HTTP/1.1\r\nTransfer-Encoding: chunked\r\n", 401},
	} {
		c, err := net.Dial("tcp", e.ts.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		first := "{\"publicKey\":"
		if strings.Contains(tc.head, "chunked") {
			first = "d\r\n" + first + "\r\n"
		}
		if _, err := io.WriteString(c, tc.head+"Host: gw\r\n\r\n"+first); err != nil {
			t.Fatal(err)
		}
		// The client sends nothing more and keeps the connection open.
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: no answer: %v", tc.name, err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != tc.status {
			t.Errorf("%s: status %d, want %d", tc.name, res.StatusCode, tc.status)
		}
		if _, err := br.ReadByte(); err != io.EOF {
			t.Errorf("%s: after the answer: %v, want the connection closed", tc.name, err)
		}
	}
}

// A request whose body has arrived keeps its connection and context for
// as long as its handler runs, past bodyTimeout.
func TestBodyDeadlineSparesLongRequests(t *testing.T) {
	shortBodyTimeout(t, 100*time.Millisecond)
	e := newEnv(t, nil)
	e.srv.Mux().HandleFunc("POST /test/slow", func(w http.ResponseWriter, r *http.Request) {
		var v map[string]any
		if !decodeBody(w, r, &v) {
			return
		}
		select {
		case <-r.Context().Done():
			http.Error(w, "cancelled: "+context.Cause(r.Context()).Error(), http.StatusInternalServerError)
		case <-time.After(5 * bodyTimeout):
			io.WriteString(w, "done")
		}
	})
	for range 2 { // the second on the kept-alive connection
		res, err := http.Post(e.ts.URL+"/test/slow", "application/json", strings.NewReader(`{"a":1}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || string(b) != "done" {
			t.Fatalf("status %d %q; want 200 done", res.StatusCode, b)
		}
	}
}

// The limit is on idleness, not the whole body: a large body that keeps
// coming on a slow link arrives whole (an exec's stdin at 400 kbit/s).
func TestSlowSteadyBodyArrives(t *testing.T) {
	shortBodyTimeout(t, time.Second)
	e := newEnv(t, nil)
	e.srv.Mux().HandleFunc("POST /test/echo", func(w http.ResponseWriter, r *http.Request) {
		var v map[string]string
		if !decodeBody(w, r, &v) {
			return
		}
		io.WriteString(w, v["a"])
	})
	// 15 parts 100 ms apart: 1.5 s in all, never close to 1 s idle (at
	// 150 ms apart against 300 ms a stall of the writer or the handler on
	// a loaded machine cut it, 1 run in 20 at load 9).
	words := strings.Fields("one two three four five six seven eight nine ten eleven twelve thirteen")
	parts := append(append([]string{`{"a":"`}, words...), `"}`)
	body := strings.Join(parts, "")
	c, err := net.Dial("tcp", e.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /test/echo HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	for _, p := range parts {
		if _, err := io.WriteString(c, p); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if want := strings.Join(words, ""); res.StatusCode != 200 || string(b) != want {
		t.Fatalf("a steady slow body: %d %q, want 200 with all of it", res.StatusCode, b)
	}
}
