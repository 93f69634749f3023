package bytestream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

var pairs = []struct {
	name string
	pair pairFunc
}{
	{"tcp", tcpPair},
	{"websocket", wsPair},
	{"pipe", pipePair},
}

func TestRoundTripRandomChunks(t *testing.T) {
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) {
			a, b := p.pair(t)
			exchange(t, a, b, 1<<20)
		})
	}
}

type closeWriter interface{ CloseWrite() error }

// TestHalfClose: after one side's CloseWrite the other reads EOF and can
// still answer.
func TestHalfClose(t *testing.T) {
	for _, p := range pairs {
		if p.name == "websocket" {
			continue // no half-close in WebSocket; see TestWebSocketHasNoCloseWrite
		}
		t.Run(p.name, func(t *testing.T) {
			a, b := p.pair(t)
			if _, err := a.Write([]byte("request")); err != nil {
				t.Fatal(err)
			}
			if err := a.(closeWriter).CloseWrite(); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(b)
			if err != nil || string(got) != "request" {
				t.Fatalf("peer read %q, %v; want request, EOF", got, err)
			}
			if _, err := b.Write([]byte("reply")); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 5)
			if _, err := io.ReadFull(a, buf); err != nil || string(buf) != "reply" {
				t.Fatalf("half-closed side read %q, %v", buf, err)
			}
		})
	}
}

func TestWebSocketHasNoCloseWrite(t *testing.T) {
	a, _ := wsPair(t)
	if _, ok := a.(closeWriter); ok {
		t.Fatal("websocket conn offers CloseWrite, but WebSocket cannot half-close")
	}
}

func TestReadDeadline(t *testing.T) {
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) {
			a, _ := p.pair(t)
			if err := a.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
				t.Fatal(err)
			}
			_, err := a.Read(make([]byte, 1))
			var ne net.Error
			if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("read past deadline: %v, want os.ErrDeadlineExceeded", err)
			}
		})
	}
}

func TestWriteDeadlinePipe(t *testing.T) {
	a, _ := pipePair(t)
	if err := a.SetWriteDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	// Nobody reads b: the pipe buffer fills and the write must time out.
	_, err := a.Write(make([]byte, 8<<20))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write past deadline: %v", err)
	}
}

// A pipe conn over readers without deadlines says so instead of pretending.
func TestPipeConnNoDeadline(t *testing.T) {
	c := NewPipeConn(io.NopCloser(strings.NewReader("")), nopWriteCloser{io.Discard})
	if err := c.SetDeadline(time.Now()); !errors.Is(err, os.ErrNoDeadline) {
		t.Fatalf("SetDeadline = %v, want os.ErrNoDeadline", err)
	}
}

// After Close, a pipe conn reports net.ErrClosed like a socket would.
func TestPipeConnClosedError(t *testing.T) {
	a, _ := pipePair(t)
	a.Close()
	if _, err := a.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read after close: %v, want net.ErrClosed", err)
	}
	if _, err := a.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after close: %v, want net.ErrClosed", err)
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func TestTCPFailsToConnect(t *testing.T) {
	// A bound socket that never listens: connecting to it is refused, and
	// we hold the port so nobody else can take it.
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	port := sa.(*syscall.SockaddrInet4).Port
	c, err := TCP(testCtx(t), "127.0.0.1", port)
	if err == nil {
		c.Close()
		t.Fatal("dial to a closed port succeeded")
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("err = %v, want connection refused", err)
	}
	if _, err := TCP(testCtx(t), "127.0.0.1", 0); err == nil {
		t.Fatal("port 0 accepted")
	}
}

func TestDialWebSocketReturnsResponse(t *testing.T) {
	url, ch := wsServer(t, nil)
	hdr := http.Header{"Authorization": {"Bearer t0ken"}}
	a, resp, err := DialWebSocket(testCtx(t), url, &WebSocketOptions{Header: hdr})
	if err != nil {
		t.Fatal(err)
	}
	b := <-ch
	defer closeBoth(a, b)
	if got := resp.Header.Get("X-Enrollment"); got != "host-42" {
		t.Fatalf("response header X-Enrollment = %q", got)
	}
}

// ctx bounds the dial only: cancelling it afterwards leaves the conn up.
func TestWebSocketOutlivesDialContext(t *testing.T) {
	url, ch := wsServer(t, nil)
	ctx, cancel := context.WithCancel(testCtx(t))
	a, err := WebSocket(ctx, url, nil)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	b := <-ch
	defer closeBoth(a, b)
	exchange(t, a, b, 64<<10)
}

// TestDialWebSocketSilentServerTimesOut: a server that takes the TCP
// connection and never answers the upgrade (the path stalled once the
// connection was made) ends the dial at the handshake timeout, saying so,
// though ctx has no deadline. It waited for ever.
func TestDialWebSocketSilentServerTimesOut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 1)
	go func() {
		defer close(held)
		if c, err := ln.Accept(); err == nil {
			held <- c
		}
	}()
	defer func() {
		_ = ln.Close()
		for c := range held {
			_ = c.Close() // ends a dial still waiting
		}
	}()
	done := make(chan error, 1)
	go func() {
		_, _, err := DialWebSocket(context.Background(), "ws://"+ln.Addr().String()+"/", &WebSocketOptions{HandshakeTimeout: 200 * time.Millisecond})
		done <- err
	}()
	select {
	case err := <-done:
		var ne net.Error
		if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() ||
			!strings.Contains(err.Error(), "no answer to the WebSocket handshake within 200ms") {
			t.Fatalf("dial to a server that never answers: %v, want a timeout saying no answer came within 200ms", err)
		}
	case <-time.After(10 * time.Second): // a guard against a hang, not a timing
		t.Fatal("dial to a server that never answers still waits 10 s on, its handshake timeout 200 ms")
	}
}

func TestWebSocketHeadersReachServer(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Authorization")
		c, err := Accept(w, r, nil)
		if err == nil {
			c.Close()
		}
	}))
	defer srv.Close()
	c, err := WebSocket(testCtx(t), strings.Replace(srv.URL, "http://", "ws://", 1),
		&WebSocketOptions{Header: http.Header{"Authorization": {"Bearer abc"}}})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if h := <-got; h != "Bearer abc" {
		t.Fatalf("server saw Authorization %q", h)
	}
}

func TestHandshakeError(t *testing.T) {
	long := strings.Repeat("x", 3*maxErrorBody)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "token rejected "+long, http.StatusForbidden)
	}))
	defer srv.Close()
	_, resp, err := DialWebSocket(testCtx(t), srv.URL, nil)
	var he *HandshakeError
	if !errors.As(err, &he) {
		t.Fatalf("err = %v (%T), want *HandshakeError", err, err)
	}
	if he.StatusCode != http.StatusForbidden || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("status = %d, want 403", he.StatusCode)
	}
	if !strings.HasPrefix(he.Body, "token rejected") || len(he.Body) > maxErrorBody {
		t.Fatalf("body = %.40q… (%d bytes), want truncated server message", he.Body, len(he.Body))
	}
	if !strings.Contains(err.Error(), "403") {
		t.Fatalf("error text %q lacks the status", err)
	}
	// The whole bound is kept (a gateway's answer of direct addresses is
	// up to 1 KiB), the error's text shows only its start.
	if len(he.Body) != 1<<10 || len(err.Error()) > maxErrorText+100 {
		t.Fatalf("kept %d bytes of the body (want 1 KiB), error text %d bytes (want about %d)", len(he.Body), len(err.Error()), maxErrorText)
	}
}

func TestAcceptRejectsPlainRequest(t *testing.T) {
	url, _ := wsServer(t, nil)
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode < 400 {
		t.Fatalf("plain GET answered %d", resp.StatusCode)
	}
}

// A message over the read limit closes the connection instead of being
// buffered.
func TestWebSocketOversizedMessage(t *testing.T) {
	a, b := wsPairOpts(t, nil, &AcceptOptions{ReadLimit: 1024})
	go func() { _, _ = a.Write(make([]byte, 4096)) }()
	got, err := io.ReadAll(b)
	if err == nil || len(got) > 1025 {
		t.Fatalf("read %d bytes of an oversized message, err %v; want at most the limit, then an error", len(got), err)
	}
	// The connection is gone both ways.
	if _, err := io.ReadAll(a); err == nil {
		t.Fatal("client conn survived the oversized message")
	}
}

// Writes larger than a message are split, so a peer with the default read
// limit takes a big write (a yamux frame can be a whole 4 MiB window).
func TestWebSocketBigWriteWithinLimit(t *testing.T) {
	a, b := wsPairOpts(t, nil, &AcceptOptions{ReadLimit: 128 << 10})
	data := randomData(11, 1<<20)
	errc := make(chan error, 1)
	go func() { _, err := a.Write(data); errc <- err }() // one Write, 8× the limit
	got, err := readRandomly(b, len(data), 12)
	if err != nil || string(got) != string(data) {
		t.Fatalf("read %d bytes, %v; want the 1 MiB write intact", len(got), err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func TestWebSocketURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://gw:8080/v1/agents/connect", "ws://gw:8080/v1/agents/connect"},
		{"https://gw/v1/hosts/a/ssh?x=1", "wss://gw/v1/hosts/a/ssh?x=1"},
		{"ws://127.0.0.1:1/", "ws://127.0.0.1:1/"},
		{"WSS://gw/p#frag", "wss://gw/p"},
		{"ftp://gw/", ""},
		{"gw:8080", ""},
		{"/v1/x", ""},
		{"http:///nohost", ""},
		{"https://user:pw@gw/", ""},
		{"http://gw/%zz", ""},
	} {
		got, err := websocketURL(tc.in)
		if tc.want == "" {
			if err == nil {
				t.Errorf("websocketURL(%q) = %q, want error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("websocketURL(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// Stdio is tested in a child process (it owns fds 0 and 1): the child echoes
// stdin to stdout, then half-closes; the parent checks bytes and EOF.
const stdioHelperEnv = "BYTESTREAM_STDIO_HELPER"

func runStdioHelper() int {
	c := Stdio()
	defer c.Close()
	if Stdio() != c {
		fmt.Fprintln(os.Stderr, "Stdio returned two conns")
		return 6
	}
	// Pipes are made pollable, so deadlines must work; a regular file
	// (stdin redirected from a file) is left alone and says so.
	err := c.SetReadDeadline(time.Time{})
	if mode := os.Getenv(stdioHelperEnv); mode == "file" && !errors.Is(err, os.ErrNoDeadline) ||
		mode != "file" && err != nil {
		fmt.Fprintln(os.Stderr, "deadline:", err)
		return 2
	}
	if _, err := c.Write([]byte("ready\n")); err != nil {
		return 3
	}
	if _, err := io.Copy(c, c); err != nil {
		return 4
	}
	if err := c.(closeWriter).CloseWrite(); err != nil {
		return 5
	}
	return 0
}

func TestStdio(t *testing.T) {
	ctx := testCtx(t)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), stdioHelperEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := NewPipeConn(stdout, stdin)
	buf := make([]byte, 6)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ready\n" {
		t.Fatalf("child said %q, %v (stderr %s)", buf, err, stderr.String())
	}
	data := randomData(9, 1<<20)
	errc := make(chan error, 1)
	go func() {
		err := writeRandomly(c, data, 10)
		if err == nil {
			err = c.(closeWriter).CloseWrite()
		}
		errc <- err
	}()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if string(got) != string(data) {
		t.Fatalf("echo corrupted: got %d bytes, want %d", len(got), len(data))
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v (stderr %s)", err, stderr.String())
	}
}

// Accept refuses cross-origin upgrades (a browser page elsewhere must not
// reach a host's stream) unless the origin is listed.
func TestAcceptOrigin(t *testing.T) {
	evil := &WebSocketOptions{Header: http.Header{"Origin": {"http://evil.example"}}}
	url, _ := wsServer(t, nil)
	_, err := WebSocket(testCtx(t), url, evil)
	var he *HandshakeError
	if !errors.As(err, &he) || he.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-origin dial: %v, want 403", err)
	}
	url, ch := wsServer(t, &AcceptOptions{OriginPatterns: []string{"evil.example"}})
	a, err := WebSocket(testCtx(t), url, evil)
	if err != nil {
		t.Fatalf("listed origin refused: %v", err)
	}
	closeBoth(a, <-ch)
}

// Stdio with stdin redirected from a regular file: it reads the file to EOF,
// and deadlines on it are reported unsupported rather than faked.
func TestStdioFromFile(t *testing.T) {
	path := t.TempDir() + "/in"
	if err := os.WriteFile(path, []byte("from a file"), 0o600); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	cmd := exec.CommandContext(testCtx(t), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), stdioHelperEnv+"=file")
	cmd.Stdin = in
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v (stderr %s)", err, stderr.String())
	}
	if string(out) != "ready\nfrom a file" {
		t.Fatalf("child wrote %q", out)
	}
}

// TestWebSocketWriteAfterDeadlineRecovers: a Write after the write
// deadline passed fails with os.ErrDeadlineExceeded and sends nothing,
// and once the deadline is cleared the stream writes again, as with the
// other conns (an idle timeout that extends its deadline). A dialed conn,
// which writes behind, took such a Write as sent, and its flusher's
// failed write then failed every later Write for good, the bytes lost.
func TestWebSocketWriteAfterDeadlineRecovers(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts *WebSocketOptions
		side int // 0: the dialed conn writes, 1: the accepted one
	}{
		{"dialed", nil, 0},
		{"dialed WriteThrough", &WebSocketOptions{WriteThrough: true}, 0},
		{"accepted", nil, 1},
	} {
		c := [2]net.Conn{}
		c[0], c[1] = wsPairOpts(t, tc.opts, nil)
		a, b := c[tc.side], c[1-tc.side]
		if err := a.SetWriteDeadline(time.Now().Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Write([]byte("x")); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("%s: Write past the deadline: %v, want os.ErrDeadlineExceeded", tc.name, err)
		}
		if err := a.SetWriteDeadline(time.Time{}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Write([]byte("y")); err != nil {
			t.Fatalf("%s: Write once the deadline is cleared: %v", tc.name, err)
		}
		_ = b.SetReadDeadline(time.Now().Add(10 * time.Second)) // a guard against a hang
		buf := make([]byte, 1)
		if _, err := io.ReadFull(b, buf); err != nil || buf[0] != 'y' {
			t.Fatalf("%s: peer read %q, %v; want y", tc.name, buf, err)
		}
	}
}

// TestWebSocketReadAfterDeadlineRecovers: a Read after the read deadline
// passed fails with os.ErrDeadlineExceeded and the stream reads again
// once the deadline is cleared (msgConn's doc: a deadline that passes
// between operations fails the next ones until it is reset). The Read
// that came before the deadline's timer marked it blocked, and the timer
// then closed the conn under it.
func TestWebSocketReadAfterDeadlineRecovers(t *testing.T) {
	for side, name := range []string{"dialed", "accepted"} {
		c := [2]net.Conn{}
		c[0], c[1] = wsPair(t)
		a, b := c[side], c[1-side]
		if err := a.SetReadDeadline(time.Now().Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("%s: Read past the deadline: %v, want os.ErrDeadlineExceeded", name, err)
		}
		if err := a.SetReadDeadline(time.Time{}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Write([]byte("y")); err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		buf := make([]byte, 1)
		go func() { _, err := io.ReadFull(a, buf); errc <- err }()
		select {
		case err := <-errc:
			if err != nil || buf[0] != 'y' {
				t.Fatalf("%s: Read once the deadline is cleared: %q, %v; want y", name, buf, err)
			}
		case <-testCtx(t).Done():
			t.Fatalf("%s: Read once the deadline is cleared: no answer", name)
		}
	}
}
