package webterm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/hostgate/hostgate"
)

// hostServer serves the terminal of proc, which ends with its context as
// a real host's process does, with cfg's other settings.
func hostServer(t *testing.T, proc hostgate.Process, cfg Config) *httptest.Server {
	srv, _ := hostTerminals(t, proc, cfg)
	return srv
}

// hostTerminals is hostServer that also returns the Terminals serving it.
func hostTerminals(t *testing.T, proc hostgate.Process, cfg Config) (*httptest.Server, *Terminals) {
	cfg.Authorize = func(w http.ResponseWriter, r *http.Request, id string) (Caller, bool) {
		return Caller{ID: "tester", Name: "tester"}, true
	}
	cfg.Spawn = func(ctx context.Context, id, name string, argv []string, pty *hostgate.PTY) (hostgate.Process, func(), error) {
		stop := context.AfterFunc(ctx, func() { _ = proc.Kill(hostgate.SIGKILL) })
		return proc, func() { stop() }, nil
	}
	h := Handler(cfg)
	mux := http.NewServeMux()
	mux.Handle("GET /v1/hosts/{id}/pty", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { h.Close(); srv.Close() })
	return srv, h
}

// messages reads ws until it fails, as a browser does whatever its page
// does: pings are answered meanwhile.
func messages(ctx context.Context, ws *websocket.Conn) <-chan string {
	msgs := make(chan string, 16)
	go func() {
		defer close(msgs)
		for {
			_, b, err := ws.Read(ctx)
			if err != nil {
				return
			}
			msgs <- string(b)
		}
	}()
	return msgs
}

// idleCuttingProxy relays TCP to addr and closes a connection whose
// upstream sends nothing for idle, as nginx's proxy_read_timeout does.
func idleCuttingProxy(t *testing.T, addr string, idle time.Duration) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", addr)
			if err != nil {
				_ = down.Close()
				continue
			}
			wg.Add(2)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(up, down)
				_ = up.Close()
			}()
			go func() {
				defer wg.Done()
				defer down.Close()
				defer up.Close()
				buf := make([]byte, 32<<10)
				for {
					_ = up.SetReadDeadline(time.Now().Add(idle))
					n, err := up.Read(buf)
					if n > 0 {
						if _, werr := down.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// TestIdleTerminalOutlivesProxyReadTimeout: a terminal that prints nothing
// for longer than the reverse proxy in front of the gateway waits for its
// upstream still works afterwards. Browsers send no pings, and the gateway
// sent none either, so behind nginx (proxy_read_timeout 60 s) a terminal
// left at its prompt for a minute was cut.
func TestIdleTerminalOutlivesProxyReadTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	proc := newEcho()
	// A ping goes out within Ping of the last frame, and its pong is
	// waited for Ping: half the proxy's timeout leaves a loaded machine
	// (-race, two cores) half of it to spare both ways. At 40 ms of 400 a
	// pong or a ping's write 40 ms late under load ended the terminal
	// (coder/websocket closes the socket when a write's context ends).
	const proxyIdle = time.Second
	srv := hostServer(t, proc, Config{Ping: proxyIdle / 2})
	front := idleCuttingProxy(t, strings.TrimPrefix(srv.URL, "http://"), proxyIdle)
	ws, _, err := websocket.Dial(ctx, "ws://"+front+"/v1/hosts/local/pty", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	msgs := messages(ctx, ws)
	// The person looks away: nothing typed, nothing printed, for two of
	// the proxy's timeouts.
	time.Sleep(2 * proxyIdle)
	if err := ws.Write(ctx, websocket.MessageBinary, []byte("still there")); err != nil {
		t.Fatalf("typing after %v idle: %v", 2*proxyIdle, err)
	}
	if got, ok := <-msgs; !ok || got != "STILL THERE" {
		t.Fatalf("after %v idle behind a proxy that cuts %v of silence: got %q (open %v), want the echo", 2*proxyIdle, proxyIdle, got, ok)
	}
}

// TestGonePageEndsTerminal: a page that no longer answers (its network
// dropped without a FIN, the laptop went to sleep) ends its terminal, and
// the shell with it; it lasted the idle hour.
func TestGonePageEndsTerminal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	proc := newEcho()
	srv := hostServer(t, proc, Config{Ping: 40 * time.Millisecond})
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/hosts/local/pty", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	// The connection stays up, but nothing on this side reads it any more,
	// so no pong goes back.
	select {
	case <-proc.done:
	case <-ctx.Done():
		t.Fatal("the terminal of a page that answers no pings is still running")
	}
}

// TestEndCutsAWriteStuckOnAPageThatDoesNotRead: a terminal that ends
// (here the gateway's shutdown) while its output write waits on a page
// that does not read (a frozen tab: the socket is up, nothing reads it)
// gives that write up and ends. It waited for the write's own timeout, 30
// s, holding the gateway's SIGTERM drain for that long (9.6 s in a soak);
// the timeout is an hour here, so the old code hangs.
func TestEndCutsAWriteStuckOnAPageThatDoesNotRead(t *testing.T) {
	defer func(d time.Duration) { pageWriteTimeout = d }(pageWriteTimeout)
	pageWriteTimeout = time.Hour
	ctx := testCtx(t)
	proc := &floodProcess{printer: newPrinter()}
	srv, h := hostTerminals(t, proc, Config{})
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/hosts/local/pty", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	// Nothing reads ws: the output fills the socket's buffers, and the
	// terminal's write then waits. Seen when the flood stops being read.
	for last := int64(-1); ; {
		select {
		case <-ctx.Done():
			t.Fatal("the flood was never held up by the page that does not read")
		case <-time.After(200 * time.Millisecond):
		}
		n := proc.read.Load()
		if n == last && n > 0 {
			break
		}
		last = n
	}
	closed := make(chan struct{})
	go func() { h.Close(); close(closed) }()
	select {
	case <-closed:
	case <-ctx.Done():
		_ = ws.CloseNow() // unblocks the write, so the test's cleanup ends
		<-closed
		t.Fatal("Close waited on a write stuck on a page that does not read")
	}
}

// gatedProcess echoes like echoProcess, but takes no input until open is
// closed: a shell busy with something else while a paste waits.
type gatedProcess struct {
	*echoProcess
	in      *io.PipeWriter
	open    chan struct{}
	writing chan struct{} // closed when the terminal first writes input
	once    sync.Once
}

func newGated() *gatedProcess {
	e := newEcho()
	r, w := io.Pipe()
	g := &gatedProcess{echoProcess: e, in: w, open: make(chan struct{}), writing: make(chan struct{})}
	go func() {
		<-g.open
		_, _ = io.Copy(e.inW, r)
	}()
	return g
}

func (g *gatedProcess) Stdin() io.WriteCloser { return gatedIn{g} }

type gatedIn struct{ g *gatedProcess }

func (w gatedIn) Write(p []byte) (int, error) {
	w.g.once.Do(func() { close(w.g.writing) })
	return w.g.in.Write(p)
}
func (w gatedIn) Close() error { return w.g.in.Close() }
func (g *gatedProcess) Kill(s hostgate.Signal) error {
	g.in.CloseWithError(io.ErrClosedPipe)
	return g.echoProcess.Kill(s)
}

// TestBlockedInputKeepsTerminal: while the shell takes no input, the
// page's pongs wait behind the input it sent; the terminal is not taken
// for gone.
func TestBlockedInputKeepsTerminal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	proc := newGated()
	// Pongs are waited for Ping: at 40 ms one late on a loaded machine
	// (-race, two cores) once the input went through ended the terminal.
	const ping = 250 * time.Millisecond
	srv := hostServer(t, proc, Config{Ping: ping})
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/hosts/local/pty", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	msgs := messages(ctx, ws)
	if err := ws.Write(ctx, websocket.MessageBinary, []byte("queued")); err != nil {
		t.Fatal(err)
	}
	// Once the input is stuck (not before: on a loaded machine the
	// terminal could take longer than a ping's wait to read it, and a
	// pong unread behind input not yet taken is a page gone).
	select {
	case <-proc.writing:
	case <-ctx.Done():
		t.Fatal("the terminal never passed the input on")
	}
	time.Sleep(4 * ping) // pings unanswered for four intervals with the input stuck
	close(proc.open)
	if got, ok := <-msgs; !ok || got != "QUEUED" {
		t.Fatalf("after the shell took its input: got %q (open %v), want the echo", got, ok)
	}
	if err := ws.Write(ctx, websocket.MessageBinary, []byte("exit 0")); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

// stuckInput is a shell that takes no input until open is closed, then
// takes it without a word (no echo, so no output tells the pinger the page
// is there).
type stuckInput struct {
	*echoProcess
	open    chan struct{}
	writing chan struct{} // closed when the terminal first writes input
	once    sync.Once
	resized chan [2]int
}

func (s *stuckInput) Resize(c, r int) error {
	select {
	case s.resized <- [2]int{c, r}:
	default:
	}
	return nil
}

func (s *stuckInput) Stdin() io.WriteCloser { return stuckIn{s} }

type stuckIn struct{ s *stuckInput }

func (w stuckIn) Write(p []byte) (int, error) {
	w.s.once.Do(func() { close(w.s.writing) })
	select {
	case <-w.s.open:
		return len(p), nil
	case <-w.s.done: // killed
		return 0, io.ErrClosedPipe
	}
}
func (w stuckIn) Close() error { return nil }

// TestInputTakenDuringPingKeepsTerminal: a page whose pong waited behind
// input the shell took only as the ping's wait ran out is not taken for
// gone. (The pong waits only behind more input than the inbox holds: the
// page here pastes more than that.) The pinger asked whether the input was stuck when the wait ended,
// not whether it had been stuck during it, so a shell that took the input
// just before (or the page's next message read just after it) dropped a
// live page: what made TestBlockedInputKeepsTerminal end its terminal at
// a 40 ms interval on a loaded machine. Here the input goes through just
// after a ping's wait ends, before the pinger decides (found by the
// leftovers30 audit).
func TestInputTakenDuringPingKeepsTerminal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	proc := &stuckInput{echoProcess: newEcho(), open: make(chan struct{}), writing: make(chan struct{}), resized: make(chan [2]int, 4)}
	var release sync.Once
	released := make(chan struct{})
	pinged := make(chan error, 16)
	cfg := Config{Ping: 250 * time.Millisecond}
	cfg.testHookPinged = func(err error) {
		select {
		case <-proc.writing:
		default:
			return // not stuck yet
		}
		if err != nil {
			// The first wait that ran out with the input stuck: the
			// shell takes it now, before the pinger decides, and the
			// terminal reads on (the resize the page sent after it).
			release.Do(func() {
				close(proc.open)
			read:
				for {
					select {
					case size := <-proc.resized:
						if size == [2]int{123, 45} {
							break read
						}
					case <-ctx.Done():
						break read
					}
				}
				close(released)
			})
		}
		select {
		case pinged <- err:
		default:
		}
	}
	srv := hostServer(t, proc, cfg)
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/hosts/local/pty", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	msgs := messages(ctx, ws)
	// The shell's first write takes at most a full inbox; the rest fills it.
	paste := make([]byte, 60<<10)
	for range 3*inboxMax/len(paste) + 1 {
		if err := ws.Write(ctx, websocket.MessageBinary, paste); err != nil {
			t.Fatal(err)
		}
	}
	if err := ws.Write(ctx, websocket.MessageText, []byte(`{"type":"resize","cols":123,"rows":45}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-released:
	case <-ctx.Done():
		t.Fatal("no ping ran out while the input was stuck")
	}
	// The pinger goes on: a later ping is answered.
	for {
		select {
		case err := <-pinged:
			if err == nil {
				return
			}
		case _, ok := <-msgs:
			if !ok {
				t.Fatal("the terminal took the page for gone: its pong waited behind input the shell took as the ping's wait ended")
			}
		case <-ctx.Done():
			t.Fatal("no ping answered after the input went through")
		}
	}
}

// deafShell takes no input and prints nothing until it is killed.
type deafShell struct {
	killed chan struct{}
	once   sync.Once
	took   chan struct{} // closed when the terminal first writes input
	tookMu sync.Once
	out    io.Reader     // nil: prints nothing
	hear   chan struct{} // closed: takes input from then on (nil: never)
	heard  atomic.Int64
}

func newDeaf() *deafShell {
	return &deafShell{killed: make(chan struct{}), took: make(chan struct{})}
}

func (d *deafShell) Stdin() io.WriteCloser { return deafIn{d} }
func (d *deafShell) Stdout() io.Reader {
	if d.out != nil {
		return d.out
	}
	return deafOut{d}
}
func (d *deafShell) Stderr() io.Reader { return strings.NewReader("") }
func (d *deafShell) Wait() error       { <-d.killed; return errors.New("killed") }
func (d *deafShell) Kill(hostgate.Signal) error {
	d.once.Do(func() { close(d.killed) })
	return nil
}

type deafIn struct{ d *deafShell }

func (w deafIn) Write(p []byte) (int, error) {
	w.d.tookMu.Do(func() { close(w.d.took) })
	select {
	case <-w.d.killed:
		return 0, io.ErrClosedPipe
	case <-w.d.hear:
		w.d.heard.Add(int64(len(p)))
		return len(p), nil
	}
}
func (w deafIn) Close() error { return nil }

type deafOut struct{ d *deafShell }

func (r deafOut) Read([]byte) (int, error) { <-r.d.killed; return 0, io.EOF }

// TestGonePageWithStuckInputEndsTerminal: a page that goes away after
// typing into a shell that takes no input ends its terminal, as any gone
// page does. The page's socket was read straight into the shell's stdin,
// so its pongs waited behind the stuck input, and the pinger, unable to
// tell, kept the terminal (and the shell) until the idle hour.
func TestGonePageWithStuckInputEndsTerminal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	proc := newDeaf()
	srv := hostServer(t, proc, Config{Ping: 100 * time.Millisecond})
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/hosts/local/pty", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	for _, s := range []string{"ls\r", "whoami\r"} {
		if err := ws.Write(ctx, websocket.MessageBinary, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-proc.took:
	case <-ctx.Done():
		t.Fatal("the terminal never passed the input on")
	}
	// The page is gone: nothing on this side reads the socket any more,
	// so no pong goes back.
	select {
	case <-proc.killed:
	case <-ctx.Done():
		t.Fatal("the terminal of a gone page whose input the shell never took is still running")
	}
}

// yes prints y lines for ever, in 32 KiB reads, until killed.
type yes struct{ d *deafShell }

func (y yes) Read(b []byte) (int, error) {
	select {
	case <-y.d.killed:
		return 0, io.EOF
	default:
	}
	n := min(len(b), 32<<10)
	for i := 0; i+1 < n; i += 2 {
		b[i], b[i+1] = 'y', '\n'
	}
	return n &^ 1, nil
}

// TestOutputFlowsWhileInputIsStuck: a program that prints without reading
// its input (yes, a build, cat of a large file) goes on printing to a
// page that acks its output when that page has typed something the
// program never takes. The page's acks waited behind the input, so the
// output stopped for good one window (AckWindow) later: the program
// blocked printing, and the page could not even send ^C past the input.
func TestOutputFlowsWhileInputIsStuck(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	proc := newDeaf()
	proc.out = yes{proc}
	srv := hostServer(t, proc, Config{})
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/hosts/local/pty?ack=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(1 << 20)
	var drawn int64
	read := func(until int64) {
		t.Helper()
		for drawn < until {
			typ, b, err := ws.Read(ctx)
			if err != nil {
				t.Fatalf("after %d bytes of output: %v", drawn, err)
			}
			if typ != websocket.MessageBinary {
				continue
			}
			drawn += int64(len(b))
			ack := fmt.Sprintf(`{"type":"ack","bytes":%d}`, drawn)
			if err := ws.Write(ctx, websocket.MessageText, []byte(ack)); err != nil {
				t.Fatal(err)
			}
		}
	}
	read(64 << 10)
	if err := ws.Write(ctx, websocket.MessageBinary, []byte("q")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-proc.took:
	case <-ctx.Done():
		t.Fatal("the terminal never passed the input on")
	}
	read(drawn + 4*AckWindow)
}

// TestStuckInputTellsThePage: while the gateway reads no more of a page
// (its input fills the inbox, the shell taking none), the page's own pings
// wait unread behind that input; the gateway tells it every Ping/2 that it
// is there. The page heard nothing, took the connection for lost after
// 20 s and dropped it, and with it the rest of a paste.
func TestStuckInputTellsThePage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	proc := newDeaf()
	srv := hostServer(t, proc, Config{Ping: 200 * time.Millisecond})
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/hosts/local/pty", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	msgs := messages(ctx, ws)
	// More than the inbox holds, in the page's 16 KiB pieces; the writes
	// themselves block once the gateway reads no more. Three inboxes:
	// the shell's one Write takes all the inbox held when it came (up to
	// an inboxful) before it hangs, and with two the second could fit
	// whole, never stopping the reader (about 4 runs in 10).
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		piece := bytes.Repeat([]byte("x"), 16<<10)
		for n := 0; n < 3*inboxMax; n += len(piece) {
			if ws.Write(ctx, websocket.MessageBinary, piece) != nil {
				return
			}
		}
	}()
	// Three notes come within a second; none came in 20 s.
	late := time.After(5 * time.Second)
	for notes := 0; notes < 3; {
		select {
		case m, ok := <-msgs:
			if !ok {
				t.Fatal("the socket closed")
			}
			if m == `{"type":"inputwait","taken":0}` { // the shell took none
				notes++
			}
		case <-late:
			t.Fatalf("%d notes in 5 s that input waits, want 3: the page hears nothing while its pings wait behind its input", notes)
		}
	}
	_ = proc.Kill(hostgate.SIGKILL)
	ws.CloseNow()
	<-wrote
}

// TestInputWaitEnds: the page told its input waits is told when the shell
// has taken it all ({"type":"inputdone"}), and how much went on
// ("taken"), so it can say how much waits and stop saying so. It was told
// nothing more: the notes stopped, and a page showing them had no way to
// know the input had gone through.
func TestInputWaitEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	proc := newDeaf()
	proc.hear = make(chan struct{})
	// No socket pings: the gateway dropped a page whose pong took over
	// Ping (200 ms) to come back while the reader did not wait yet, which
	// a loaded -race run does (2 runs in 10 beside a CPU burner). Notes
	// come every 4 s then.
	srv, h := hostTerminals(t, proc, Config{Ping: time.Hour})
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/hosts/local/pty", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	msgs := messages(ctx, ws)
	const sent = 3 * inboxMax // see TestStuckInputTellsThePage
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		piece := bytes.Repeat([]byte("x"), 16<<10)
		for n := 0; n < sent; n += len(piece) {
			if ws.Write(ctx, websocket.MessageBinary, piece) != nil {
				return
			}
		}
	}()
	// next returns the next note, or the pong ("") once the page's ping
	// is answered.
	next := func() (control, string) {
		t.Helper()
		for {
			m, ok := <-msgs
			if !ok {
				t.Fatal("the socket closed")
			}
			var c control
			if json.Unmarshal([]byte(m), &c) != nil {
				continue
			}
			switch c.Type {
			case "inputwait", "inputdone":
				return c, m
			case "pong":
				return c, ""
			}
		}
	}
	if _, m := next(); m != `{"type":"inputwait","taken":0}` {
		t.Fatalf("with the shell taking nothing the page got %q, want {\"type\":\"inputwait\",\"taken\":0}", m)
	}
	close(proc.hear)
	<-wrote
	// Notes may come while the shell takes it, and an inputdone whenever
	// the gateway holds none (the page's last pieces may be on their
	// way): the last note must be an inputdone, once the shell has it
	// all. There are no more to come once the gateway's noting has ended
	// with nothing held (1 s of silence was taken for that, which a
	// stalled gateway broke); a ping the page sends then is answered
	// after every note.
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if proc.heard.Load() == sent && !noting(h) {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the shell took %d of %d bytes in 30 s", proc.heard.Load(), sent)
		}
	}
	if err := ws.Write(ctx, websocket.MessageText, []byte(`{"type":"ping"}`)); err != nil {
		t.Fatal(err)
	}
	var last control
	var notes []string
	for {
		c, m := next()
		if m == "" {
			break
		}
		last = c
		notes = append(notes, m)
	}
	if last.Type != "inputdone" || last.Taken <= 0 || last.Taken > sent {
		t.Fatalf("the last note once the shell took the input is %+v, want an inputdone with 1 to %d bytes taken (notes since it could: %v)", last, sent, notes)
	}
	_ = proc.Kill(hostgate.SIGKILL)
}

// noting reports whether the gateway's note of waiting input runs for the
// page of h's one terminal.
func noting(h *Terminals) bool {
	h.mu.Lock()
	ts := make([]*term, 0, len(h.all))
	for t := range h.all {
		ts = append(ts, t)
	}
	h.mu.Unlock()
	for _, t := range ts {
		t.mu.Lock()
		a := t.att
		t.mu.Unlock()
		if a != nil && a.noting.Load() {
			return true
		}
	}
	return false
}
