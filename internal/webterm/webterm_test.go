package webterm

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/hostgate/hostgate"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoProcess is a PTY process that echoes input uppercased, exits with the
// code typed after "exit ", and records resizes.
type echoProcess struct {
	inR, outR *io.PipeReader
	inW, outW *io.PipeWriter
	done      chan struct{}
	code      int
	lost      error // Wait's answer when set: the shell's end went unseen
	mu        sync.Mutex
	sizes     [][2]int
}

func newEcho() *echoProcess {
	p := &echoProcess{done: make(chan struct{})}
	p.inR, p.inW = io.Pipe()
	p.outR, p.outW = io.Pipe()
	go func() {
		defer close(p.done)
		defer p.outW.Close()
		buf := make([]byte, 1024)
		for {
			n, err := p.inR.Read(buf)
			if err != nil {
				return
			}
			s := string(buf[:n])
			if strings.HasPrefix(s, "exit ") {
				p.code = int(s[5] - '0')
				return
			}
			if _, err := p.outW.Write([]byte(strings.ToUpper(s))); err != nil {
				return
			}
		}
	}()
	return p
}

func (p *echoProcess) Stdin() io.WriteCloser { return p.inW }
func (p *echoProcess) Stdout() io.Reader     { return p.outR }
func (p *echoProcess) Stderr() io.Reader     { return strings.NewReader("") }
func (p *echoProcess) Wait() error {
	<-p.done
	if p.lost != nil {
		return p.lost
	}
	if p.code != 0 {
		return &hostgate.ExitError{Code: p.code}
	}
	return nil
}
func (p *echoProcess) Kill(hostgate.Signal) error { p.inR.CloseWithError(io.ErrClosedPipe); return nil }
func (p *echoProcess) Resize(c, r int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sizes = append(p.sizes, [2]int{c, r})
	return nil
}

func newServer(t *testing.T, proc *echoProcess) *httptest.Server {
	mux := http.NewServeMux()
	mux.Handle("GET /v1/hosts/{id}/pty", Handler(Config{
		Authorize: func(w http.ResponseWriter, r *http.Request, id string) (Caller, bool) {
			if r.Header.Get("Cookie") != "hostgate_session=good" {
				http.Error(w, "no", http.StatusUnauthorized)
				return Caller{}, false
			}
			return Caller{ID: "tester", Name: "tester"}, true
		},
		Spawn: func(ctx context.Context, id, name string, argv []string, pty *hostgate.PTY) (hostgate.Process, func(), error) {
			if pty == nil || pty.Cols != 100 || pty.Rows != 30 {
				t.Errorf("pty %+v, want 100x30 from the query", pty)
			}
			return proc, func() {}, nil
		},
	}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func dial(ctx context.Context, srv *httptest.Server, origin string) (*websocket.Conn, *http.Response, error) {
	h := http.Header{}
	h.Set("Cookie", "hostgate_session=good")
	if origin != "" {
		h.Set("Origin", origin)
	}
	return websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/hosts/local/pty?cols=100&rows=30", &websocket.DialOptions{HTTPHeader: h})
}

func TestTerminalRoundTripResizeAndExit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	proc := newEcho()
	srv := newServer(t, proc)
	ws, _, err := dial(ctx, srv, srv.URL) // same origin
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if err := ws.Write(ctx, websocket.MessageText, []byte(`{"type":"resize","cols":120,"rows":40}`)); err != nil {
		t.Fatal(err)
	}
	if err := ws.Write(ctx, websocket.MessageBinary, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	typ, b, err := ws.Read(ctx)
	if err != nil || typ != websocket.MessageBinary || string(b) != "HELLO" {
		t.Fatalf("got %v %q %v, want binary HELLO", typ, b, err)
	}
	if err := ws.Write(ctx, websocket.MessageBinary, []byte("exit 3")); err != nil {
		t.Fatal(err)
	}
	typ, b, err = ws.Read(ctx)
	if err != nil || typ != websocket.MessageText {
		t.Fatalf("got %v %q %v, want the exit message", typ, b, err)
	}
	var c control
	if err := json.Unmarshal(b, &c); err != nil || c.Type != "exit" || c.Code == nil || *c.Code != 3 {
		t.Fatalf("exit message %s", b)
	}
	proc.mu.Lock()
	defer proc.mu.Unlock()
	if len(proc.sizes) != 1 || proc.sizes[0] != [2]int{120, 40} {
		t.Errorf("resizes %v, want [120 40]", proc.sizes)
	}
}

func TestForeignOriginRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	proc := newEcho()
	defer proc.inW.Close()
	srv := newServer(t, proc)
	_, res, err := dial(ctx, srv, "http://evil.example")
	if err == nil {
		t.Fatal("a foreign origin opened the terminal socket")
	}
	if res == nil || res.StatusCode != http.StatusForbidden {
		t.Fatalf("got %v, want 403", res)
	}
	// What a client reads of the refusal stays as it was when this
	// handler wrote it by hand: status, content type and body, byte for byte.
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/hosts/local/pty", nil)
	req.Header.Set("Origin", "http://evil.example")
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	const want = `{"error":{"code":"forbidden","message":"cross-origin terminal sockets are refused"}}` + "\n"
	if res.StatusCode != http.StatusForbidden || res.Header.Get("Content-Type") != "application/json" || string(body) != want {
		t.Fatalf("got %d %q %q, want 403 application/json %q", res.StatusCode, res.Header.Get("Content-Type"), body, want)
	}
}

// TestBindEndsTerminal: when the context Bind returned ends (the gateway
// revoked the caller's token), the terminal closes, the page is told why,
// and Bind's done runs.
func TestBindEndsTerminal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	proc := newEcho()
	revoked := errors.New("the session's token was revoked")
	revoke := make(chan struct{})
	doneCalled := make(chan struct{})
	mux := http.NewServeMux()
	mux.Handle("GET /v1/hosts/{id}/pty", Handler(Config{
		Authorize: func(w http.ResponseWriter, r *http.Request, id string) (Caller, bool) {
			return Caller{ID: "tester", Name: "tester"}, true
		},
		Bind: func(ctx context.Context, r *http.Request, id string) (context.Context, func()) {
			bctx, bcancel := context.WithCancelCause(ctx)
			go func() {
				select {
				case <-revoke:
					bcancel(revoked)
				case <-bctx.Done():
				}
			}()
			return bctx, func() { bcancel(nil); close(doneCalled) }
		},
		Spawn: func(ctx context.Context, id, name string, argv []string, pty *hostgate.PTY) (hostgate.Process, func(), error) {
			// As a real host does: the process ends with ctx.
			stop := context.AfterFunc(ctx, func() { _ = proc.Kill(hostgate.SIGKILL) })
			return proc, func() { stop() }, nil
		},
	}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	ws, _, err := dial(ctx, srv, "")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if err := ws.Write(ctx, websocket.MessageBinary, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if _, b, err := ws.Read(ctx); err != nil || string(b) != "HI" {
		t.Fatalf("echo: %q %v", b, err)
	}
	close(revoke)
	typ, b, err := ws.Read(ctx)
	if err != nil || typ != websocket.MessageText || !strings.Contains(string(b), "revoked") {
		t.Fatalf("after revocation: %v %q %v, want an error message naming it", typ, b, err)
	}
	if _, _, err := ws.Read(ctx); err == nil {
		t.Fatal("the terminal socket is still open")
	}
	select {
	case <-doneCalled:
	case <-ctx.Done():
		t.Fatal("Bind's done was not called")
	}
}

// TestOversizedMessageKeepsTerminal: a message over MaxMessage (a 70 KB
// paste sent in one piece) is dropped with an error message the page
// shows, and the terminal goes on; coder/websocket's read limit used to
// close the socket, and with it the shell.
func TestOversizedMessageKeepsTerminal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	proc := newEcho()
	srv := newServer(t, proc)
	ws, _, err := dial(ctx, srv, "")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	for _, typ := range []websocket.MessageType{websocket.MessageBinary, websocket.MessageText} {
		if err := ws.Write(ctx, typ, make([]byte, 70_000)); err != nil {
			t.Fatal(err)
		}
		gotTyp, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("after a 70,000-byte %v message: %v, want an error message and the terminal open", typ, err)
		}
		var c control
		if gotTyp != websocket.MessageText || json.Unmarshal(b, &c) != nil || c.Type != "error" || !strings.Contains(c.Message, "64 KiB") {
			t.Fatalf("after a 70,000-byte %v message: %v %q, want an error naming the limit", typ, gotTyp, b)
		}
	}
	// Nothing of it reached the shell, and a message at the limit does.
	max := []byte(strings.Repeat("a", 64<<10))
	if err := ws.Write(ctx, websocket.MessageBinary, max); err != nil {
		t.Fatal(err)
	}
	var got []byte
	for len(got) < len(max) {
		typ, b, err := ws.Read(ctx)
		if err != nil || typ != websocket.MessageBinary {
			t.Fatalf("echo of a message at the limit: %v %q %v", typ, b, err)
		}
		got = append(got, b...)
	}
	if want := strings.ToUpper(string(max)); string(got) != want {
		t.Fatalf("echo of %d bytes: got %d bytes, want %d A's", len(max), len(got), len(want))
	}
	if err := ws.Write(ctx, websocket.MessageBinary, []byte("exit 0")); err != nil {
		t.Fatal(err)
	}
	if typ, b, err := ws.Read(ctx); err != nil || typ != websocket.MessageText || !strings.Contains(string(b), `"exit"`) {
		t.Fatalf("exit: %v %q %v", typ, b, err)
	}
}

// printer is the rest of a test process that only prints: its input
// goes nowhere, and it runs until killed.
type printer struct {
	killed chan struct{}
	once   sync.Once
}

func newPrinter() printer { return printer{killed: make(chan struct{})} }

func (p *printer) Stdin() io.WriteCloser { return nopWriteCloser{io.Discard} }
func (p *printer) Stderr() io.Reader     { return strings.NewReader("") }
func (p *printer) Wait() error           { <-p.killed; return nil }
func (p *printer) Kill(hostgate.Signal) error {
	p.once.Do(func() { close(p.killed) })
	return nil
}

// floodProcess prints without end, like yes, counting what was read of it.
type floodProcess struct {
	printer
	read atomic.Int64
}

func (p *floodProcess) Read(b []byte) (int, error) {
	select {
	case <-p.killed:
		return 0, io.EOF
	default:
	}
	for i := range b {
		b[i] = "y\n"[i%2]
	}
	p.read.Add(int64(len(b)))
	return len(b), nil
}
func (p *floodProcess) Stdout() io.Reader { return p }

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// Once the page acknowledges what it has drawn, output runs at most
// AckWindow ahead of it: a flood waits on the host instead of piling up in
// the socket and the browser (after Ctrl-C on yes another 18 MB arrived).
func TestFlowControlHoldsFlood(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	proc := &floodProcess{printer: newPrinter()}
	mux := http.NewServeMux()
	mux.Handle("GET /v1/hosts/{id}/pty", Handler(Config{
		Authorize: func(w http.ResponseWriter, r *http.Request, id string) (Caller, bool) {
			return Caller{ID: "tester", Name: "tester"}, true
		},
		Spawn: func(ctx context.Context, id, name string, argv []string, pty *hostgate.PTY) (hostgate.Process, func(), error) {
			return proc, func() {}, nil
		},
	}))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/hosts/local/pty?ack=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(-1)
	// Draw (read) everything, but acknowledge once only, at 64 KiB.
	var got atomic.Int64
	acked := false
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for {
			_, b, err := ws.Read(ctx)
			if err != nil {
				return
			}
			n := got.Add(int64(len(b)))
			if !acked && n >= 64<<10 {
				acked = true
				m, _ := json.Marshal(control{Type: "ack", Bytes: n})
				_ = ws.Write(ctx, websocket.MessageText, m)
			}
		}
	}()
	limit := int64(64<<10) + AckWindow + 2*32<<10 // the ack, the window, reads in flight
	var last int64 = -1
	for quiet := 0; quiet < 10; {
		time.Sleep(50 * time.Millisecond)
		n := proc.read.Load()
		if n > limit {
			t.Fatalf("%d bytes read from the flood past one ack of 64 KiB, want at most %d", n, limit)
		}
		if n == last {
			quiet++
		} else {
			quiet = 0
		}
		last = n
	}
	// Acknowledging everything drawn lets the output go on.
	m, _ := json.Marshal(control{Type: "ack", Bytes: got.Load()})
	if err := ws.Write(ctx, websocket.MessageText, m); err != nil {
		t.Fatal(err)
	}
	for proc.read.Load() <= last {
		if ctx.Err() != nil {
			t.Fatal("the output did not go on after the page caught up")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = proc.Kill(hostgate.SIGKILL)
	ws.CloseNow()
	<-drained
}

// An ack past the count (the count lagging its write) is capped, not
// dropped: dropped, the page's last ack left the output held for good.
func TestFlowAckCapped(t *testing.T) {
	f := newFlow()
	f.acking = true
	f.wrote(AckWindow + 100)
	f.ack(AckWindow + 200)
	if f.acked != AckWindow+100 {
		t.Fatalf("acked %d after an ack past the %d sent, want it capped at the count", f.acked, f.sent)
	}
	done := make(chan bool, 1)
	go func() { done <- f.wait(1) != 0 }()
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("wait said the session ended")
		}
	case <-time.After(10 * time.Second):
		f.end()
		t.Fatal("the output stayed held after the page caught up")
	}
}

// TestIdleTerminalSaysWhy: a terminal closed for idleness tells the page
// so, in a message and in its close, which the page's status line shows:
// it showed "disconnected: exited" for a shell the gateway had killed after
// its idle hour, or for a logout, as if the person had typed exit.
func TestIdleTerminalSaysWhy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	proc := newEcho()
	srv := hostServer(t, proc, Config{Idle: 100 * time.Millisecond})
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/hosts/local/pty", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	typ, b, err := ws.Read(ctx)
	if err != nil || typ != websocket.MessageText || !strings.Contains(string(b), "no input or output for 100ms") {
		t.Fatalf("idle terminal: %v %q %v, want an error message saying it sat idle", typ, b, err)
	}
	// The close says it too: the page's status line shows its reason.
	_, _, err = ws.Read(ctx)
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusNormalClosure || ce.Reason != "terminal closed: no input or output for 100ms" {
		t.Fatalf("idle terminal's close: %v, want a normal closure saying why", err)
	}
}

// TestLostTerminalSaysWhyInItsClose: a terminal whose shell's end went
// unseen (its host's connection was lost) says why in its close as well
// as in its message, as one ended from outside does. Its close said only
// "terminal closed", so a page's status line, across a gateway restart,
// said why or not by which of the two ends came first.
func TestLostTerminalSaysWhyInItsClose(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	proc := newEcho()
	proc.lost = errors.New("host alpha: the gateway is shutting down")
	srv := hostServer(t, proc, Config{})
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/hosts/local/pty", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if err := ws.Write(ctx, websocket.MessageBinary, []byte("exit 0")); err != nil {
		t.Fatal(err)
	}
	typ, b, err := ws.Read(ctx)
	if err != nil || typ != websocket.MessageText || !strings.Contains(string(b), proc.lost.Error()) {
		t.Fatalf("lost terminal: %v %q %v, want an error message saying why", typ, b, err)
	}
	_, _, err = ws.Read(ctx)
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusNormalClosure || ce.Reason != "terminal closed: "+proc.lost.Error() {
		t.Fatalf("lost terminal's close: %v, want a normal closure saying why", err)
	}
}

func TestCloseReasonFits(t *testing.T) {
	long := "terminal closed: " + strings.Repeat("é", 100)
	got := closeReason(long)
	if len(got) > 123 || !utf8.ValidString(got) || !strings.HasPrefix(long, got) || len(got) < 120 {
		t.Fatalf("closeReason of %d bytes: %d bytes %q, want a valid prefix of at most 123", len(long), len(got), got)
	}
	if got := closeReason("exited"); got != "exited" {
		t.Fatalf("closeReason(exited) = %q", got)
	}
}

// TestCloseReasonIsUTF8: a close reason is valid UTF-8 whatever the
// words it is made of. A lost shell's reason carries the host's own
// words (an SSH disconnect message, a signal's name), and a browser
// fails a connection whose close reason is not UTF-8 (RFC 6455 8.1): the
// page saw 1006, took it for a dropped network and resumed, and a kept
// terminal told it the same ending again, over and over.
func TestCloseReasonIsUTF8(t *testing.T) {
	for _, s := range []string{"bye \xff\xfe", "\x80", strings.Repeat("\xe9", 200), "terminal closed: " + strings.Repeat("é", 60) + "\xff"} {
		if got := closeReason(s); !utf8.ValidString(got) || len(got) > 123 {
			t.Errorf("closeReason(%q) = %q (%d bytes), want valid UTF-8 of at most 123 bytes", s, got, len(got))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	proc := newEcho()
	proc.lost = errors.New("host alpha: ssh: disconnect, reason 11: bye \xff\xfe")
	srv := hostServer(t, proc, Config{})
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/hosts/local/pty", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if err := ws.Write(ctx, websocket.MessageBinary, []byte("exit 0")); err != nil {
		t.Fatal(err)
	}
	if _, b, err := ws.Read(ctx); err != nil || !utf8.Valid(b) {
		t.Fatalf("lost terminal's message: %q %v, want valid UTF-8", b, err)
	}
	_, _, err = ws.Read(ctx)
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusNormalClosure || !utf8.ValidString(ce.Reason) || !strings.HasPrefix(ce.Reason, "terminal closed: host alpha: ssh: disconnect, reason 11: bye ") {
		t.Fatalf("lost terminal's close: %v (reason %q), want a normal closure saying why in UTF-8", err, ce.Reason)
	}
}

// TestPingAnswered: the page's {"type":"ping"} is answered with
// {"type":"pong"}, which is how it tells a live gateway from a connection
// that died without a close (the socket's own pings never reach a script).
func TestPingAnswered(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	proc := newEcho()
	srv := newServer(t, proc)
	ws, _, err := dial(ctx, srv, "")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if err := ws.Write(ctx, websocket.MessageText, []byte(`{"type":"ping"}`)); err != nil {
		t.Fatal(err)
	}
	// An echo after the ping: without a pong, the echo comes first.
	if err := ws.Write(ctx, websocket.MessageBinary, []byte("after")); err != nil {
		t.Fatal(err)
	}
	typ, b, err := ws.Read(ctx)
	if err != nil || typ != websocket.MessageText || string(b) != `{"type":"pong"}` {
		t.Fatalf("answer to a ping: %v %q %v, want {\"type\":\"pong\"}", typ, b, err)
	}
	// Input is a byte stream: "exit 0" sent before the shell took "after"
	// may reach it in the same read.
	if _, b, err := ws.Read(ctx); err != nil || string(b) != "AFTER" {
		t.Fatalf("echo: %q %v", b, err)
	}
	if err := ws.Write(ctx, websocket.MessageBinary, []byte("exit 0")); err != nil {
		t.Fatal(err)
	}
}

// pageSim drives a paced flow (?ack=2) against a simulated page on a
// simulated clock: from floodAt on the host always has output, the page
// draws rate bytes a second (rtt after they went out, nothing while
// stalled says so) and acks every 20 ms, as terminal.js does. It returns
// the most bytes that were sent and not yet drawn after the first second
// (once the page's pace is known), the smallest window from leastFrom
// on, and the window at the end.
func pageSim(t *testing.T, rate int64, rtt, floodAt, leastFrom time.Duration, stalled func(time.Duration) bool) (inFlight, least, window int64) {
	start := time.Unix(0, 0)
	clock := start
	f := newFlow()
	f.now = func() time.Time { return clock }
	told := 0
	f.setWindow = func(n int) { told = n }
	f.attach(0, true, true)
	type sent struct {
		at  time.Time
		end int64
	}
	var out []sent // writes not yet arrived at the page
	var arrived, drawn float64
	fill := func() {
		for {
			f.mu.Lock()
			full := f.sent-f.acked >= f.window
			if full {
				f.holding() // what wait does before it blocks
			}
			f.mu.Unlock()
			if full {
				return
			}
			n := f.wait(32 << 10)
			f.wrote(n)
			out = append(out, sent{clock, f.sent})
		}
	}
	const tick = time.Millisecond
	// The shell's prompt first: the page times its round trip on it.
	f.wrote(20)
	out = append(out, sent{clock, f.sent})
	least = AckWindow
	for i := 0; clock.Before(start.Add(10 * time.Second)); i++ {
		now := clock.Sub(start)
		if now >= floodAt {
			fill()
		}
		if now >= leastFrom {
			f.mu.Lock()
			least = min(least, f.window)
			f.mu.Unlock()
		}
		clock = clock.Add(tick)
		for len(out) > 0 && clock.Sub(out[0].at) >= rtt {
			arrived = float64(out[0].end)
			out = out[1:]
		}
		if stalled == nil || !stalled(now) {
			drawn = min(arrived, drawn+float64(rate)*tick.Seconds())
		}
		if i%20 == 19 {
			f.ack(int64(drawn))
		}
		if now > floodAt+time.Second {
			f.mu.Lock()
			inFlight = max(inFlight, f.sent-int64(drawn))
			f.mu.Unlock()
		}
	}
	// The host's side (the SSH session's window) is told the window, and
	// AckWindow again once no page acks.
	if int64(told) != f.window {
		t.Errorf("the host's side was told a window of %d, the page's is %d", told, f.window)
	}
	window = f.window
	f.detach()
	if told != AckWindow {
		t.Errorf("the host's side was told a window of %d with no page, want AckWindow", told)
	}
	return inFlight, least, window
}

// TestPacedWindowFollowsThePage: a page that acks promptly (?ack=2) has
// as much output in flight as it draws in about a quarter of a second, not
// AckWindow: Chromium CPU-throttled 20x draws yes at 20-50 KB/s, and the
// fixed 1 MiB (with the SSH session's 1 MiB) kept a Ctrl-C's prompt
// waiting 28-38 s. A fast page still gets the whole AckWindow, so its
// throughput stays.
func TestPacedWindowFollowsThePage(t *testing.T) {
	for _, c := range []struct {
		rate         int64
		rtt          time.Duration
		most, window int64
	}{
		{40 << 10, 5 * time.Millisecond, 40 << 10, minWindow},           // a throttled browser
		{400 << 10, 5 * time.Millisecond, 160 << 10, 0},                 // a phone
		{400 << 10, 150 * time.Millisecond, 256 << 10, 0},               // a phone far away
		{20 << 20, 2 * time.Millisecond, AckWindow + 32<<10, AckWindow}, // a desktop browser
	} {
		inFlight, _, window := pageSim(t, c.rate, c.rtt, 0, 0, nil)
		t.Logf("page drawing %d KB/s, %v away: at most %d KiB in flight, window %d KiB", c.rate>>10, c.rtt, inFlight>>10, window>>10)
		if inFlight > c.most {
			t.Errorf("page drawing %d KB/s, %v away: %d KiB sent and not drawn, want at most %d KiB", c.rate>>10, c.rtt, inFlight>>10, c.most>>10)
		}
		if c.window != 0 && window != c.window {
			t.Errorf("page drawing %d KB/s, %v away: window %d KiB, want %d KiB", c.rate>>10, c.rtt, window>>10, c.window>>10)
		}
	}
}

// TestPacedWindowKeepsAFastPagesPace: a fast page's window is not cut by
// a sample that says nothing of its pace: one in which a flood began
// (its first bytes in flight, none drawn yet: the window fell from 64 KiB
// to 16 KiB at the start of a cat in Chromium), or one in which the page
// stalled for a moment (a frame, garbage collection).
func TestPacedWindowKeepsAFastPagesPace(t *testing.T) {
	_, least, window := pageSim(t, 20<<20, 50*time.Millisecond, 95*time.Millisecond, 95*time.Millisecond, nil)
	if least < startWindow || window != AckWindow {
		t.Errorf("a flood beginning within a sample: window down to %d KiB, %d KiB at the end; want at least %d KiB, and %d KiB", least>>10, window>>10, startWindow>>10, AckWindow>>10)
	}
	stall := func(d time.Duration) bool { return d > time.Second && d%(400*time.Millisecond) < 120*time.Millisecond }
	_, least, _ = pageSim(t, 20<<20, 2*time.Millisecond, 0, time.Second, stall)
	t.Logf("a page stalling 120 ms in 400: window down to %d KiB", least>>10)
	if least < AckWindow/2 {
		t.Errorf("a page stalling 120 ms in 400: window down to %d KiB, want at least %d KiB", least>>10, AckWindow>>11)
	}
}

// TestTerminalKilledBySignalSaysSo: a shell a signal ended (a sandbox's
// memory limit's OOM killer, a kill -9) is told to the page with the
// signal; the page showed "exited (-1)", which says nothing of why.
func TestTerminalKilledBySignalSaysSo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	proc := newEcho()
	proc.lost = &hostgate.ExitError{Code: -1, Signal: hostgate.SIGKILL}
	srv := newServer(t, proc)
	ws, _, err := dial(ctx, srv, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if err := ws.Write(ctx, websocket.MessageBinary, []byte("exit 0")); err != nil {
		t.Fatal(err)
	}
	typ, b, err := ws.Read(ctx)
	if err != nil || typ != websocket.MessageText {
		t.Fatalf("got %v %q %v, want the exit message", typ, b, err)
	}
	var c control
	if err := json.Unmarshal(b, &c); err != nil || c.Type != "exit" || c.Signal != "KILL" || c.Code == nil || *c.Code != -1 {
		t.Fatalf("exit message %s, want {\"type\":\"exit\",\"code\":-1,\"signal\":\"KILL\"}", b)
	}
	_, _, err = ws.Read(ctx)
	if ce := (websocket.CloseError{}); !errors.As(err, &ce) || ce.Code != websocket.StatusNormalClosure || ce.Reason != "killed by signal KILL" {
		t.Fatalf("close: %v, want 1000 \"killed by signal KILL\"", err)
	}
}
