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
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/hostgate/hostgate"
)

// keptServer serves terminals of the processes procs hands out in turn,
// each ending with its context as a real host's does. The caller is the
// X-Caller header's (default "tester").
func keptServer(t *testing.T, cfg Config, procs ...*echoProcess) (*httptest.Server, *Terminals) {
	var mu sync.Mutex
	cfg.Authorize = func(w http.ResponseWriter, r *http.Request, id string) (Caller, bool) {
		if c := r.Header.Get("X-Caller"); c != "" {
			return Caller{ID: c, Name: c}, true
		}
		return Caller{ID: "tester", Name: "tester"}, true
	}
	cfg.Spawn = func(ctx context.Context, id, name string, argv []string, pty *hostgate.PTY) (hostgate.Process, func(), error) {
		mu.Lock()
		defer mu.Unlock()
		if len(procs) == 0 {
			return nil, nil, errors.New("no more processes")
		}
		p := procs[0]
		procs = procs[1:]
		stop := context.AfterFunc(ctx, func() { _ = p.Kill(hostgate.SIGKILL) })
		return p, func() { stop() }, nil
	}
	h := Handler(cfg)
	mux := http.NewServeMux()
	mux.Handle("GET /v1/hosts/{id}/pty", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { h.Close(); srv.Close() })
	return srv, h
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// leftTerminal opens a kept terminal of host local, sees its shell answer,
// and drops the socket as a lost network does; it returns the terminal's
// id, which resumes it from output offset 2.
func leftTerminal(ctx context.Context, t *testing.T, srv *httptest.Server) string {
	t.Helper()
	ws := open(ctx, t, srv, "local", "", keepQuery())
	s := readControl(ctx, t, ws)
	echo(ctx, t, ws, "hi")
	_ = ws.CloseNow()
	return s.ID
}

// expectClose reads ws to its end, which must be a close frame of code.
func expectClose(ctx context.Context, t *testing.T, ws *websocket.Conn, code websocket.StatusCode, what string) {
	t.Helper()
	if got, reason := closeStatus(ctx, ws); got != code {
		t.Fatalf("%s: close %v %q, want %v", what, got, reason, code)
	}
}

// open dials a terminal socket of host "local" with query q.
func open(ctx context.Context, t *testing.T, srv *httptest.Server, host, caller string, q url.Values) *websocket.Conn {
	t.Helper()
	ws, err := openErr(ctx, srv, host, caller, q)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.CloseNow() })
	return ws
}

func openErr(ctx context.Context, srv *httptest.Server, host, caller string, q url.Values) (*websocket.Conn, error) {
	h := http.Header{}
	if caller != "" {
		h.Set("X-Caller", caller)
	}
	u := "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/hosts/" + host + "/pty?" + q.Encode()
	ws, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: h})
	return ws, err
}

func keepQuery() url.Values { return url.Values{"keep": {"1"}, "ack": {"1"}} }

func resumeQuery(id string, from, seq int64) url.Values {
	return url.Values{"keep": {"1"}, "ack": {"1"}, "resume": {id}, "from": {fmt.Sprint(from)}, "seq": {fmt.Sprint(seq)}}
}

// readControl reads the next message, which must be a control message.
func readControl(ctx context.Context, t *testing.T, ws *websocket.Conn) control {
	t.Helper()
	typ, b, err := ws.Read(ctx)
	if err != nil || typ != websocket.MessageText {
		t.Fatalf("got %v %q %v, want a control message", typ, b, err)
	}
	var c control
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("control %q: %v", b, err)
	}
	return c
}

// readOutput reads binary messages until n bytes have come.
func readOutput(ctx context.Context, t *testing.T, ws *websocket.Conn, n int) string {
	t.Helper()
	var got []byte
	for len(got) < n {
		typ, b, err := ws.Read(ctx)
		if err != nil || typ != websocket.MessageBinary {
			t.Fatalf("after %q: got %v %q %v, want terminal output", got, typ, b, err)
		}
		got = append(got, b...)
	}
	return string(got)
}

// closeStatus reads ws to its end and returns the close frame's status.
func closeStatus(ctx context.Context, ws *websocket.Conn) (websocket.StatusCode, string) {
	for {
		if _, _, err := ws.Read(ctx); err != nil {
			var ce websocket.CloseError
			if errors.As(err, &ce) {
				return ce.Code, ce.Reason
			}
			return -1, err.Error()
		}
	}
}

func echo(ctx context.Context, t *testing.T, ws *websocket.Conn, s string) {
	t.Helper()
	if err := ws.Write(ctx, websocket.MessageBinary, []byte(s)); err != nil {
		t.Fatal(err)
	}
	if got := readOutput(ctx, t, ws, len(s)); got != strings.ToUpper(s) {
		t.Fatalf("echo of %q: %q", s, got)
	}
}

// printAway has p's shell print s and returns once the output copy has
// passed it on to the replay buffer: a page resuming after gets it in its
// replay. (An empty write returns when the copy reads again, which it
// does once it is done with s.) Output still in the copy when the page
// resumes comes live after the replay instead.
func printAway(t *testing.T, p *echoProcess, s string) {
	t.Helper()
	for _, b := range [][]byte{[]byte(s), nil} {
		if _, err := p.outW.Write(b); err != nil {
			t.Fatal(err)
		}
	}
}

func alive(p *echoProcess) bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// A page whose socket drops (a network gone, a laptop asleep) resumes the
// same shell, and gets what the shell printed while it was away, once.
// Before, the shell was killed with the socket.
func TestResumeKeepsShell(t *testing.T) {
	ctx := testCtx(t)
	proc := newEcho()
	srv, _ := keptServer(t, Config{}, proc)
	ws := open(ctx, t, srv, "local", "", keepQuery())
	s := readControl(ctx, t, ws)
	id := s.ID
	if s.Type != "session" || !validTermID(id) || s.KeepMs != DefaultKeep.Milliseconds() {
		t.Fatalf("first message %+v, want the session's id and keep", s)
	}
	echo(ctx, t, ws, "hi")
	_ = ws.CloseNow()

	// Written while no page is there: the copy takes it all the same.
	printAway(t, proc, "while away")
	if !alive(proc) {
		t.Fatal("the shell ended with its page's socket")
	}
	ws2 := open(ctx, t, srv, "local", "", resumeQuery(id, 2, 1))
	if got := readOutput(ctx, t, ws2, len("while away")); got != "while away" {
		t.Fatalf("after resuming from 2: %q, want what came while away", got)
	}
	echo(ctx, t, ws2, "again")
	if err := ws2.Write(ctx, websocket.MessageBinary, []byte("exit 3")); err != nil {
		t.Fatal(err)
	}
	if c := readControl(ctx, t, ws2); c.Type != "exit" || c.Code == nil || *c.Code != 3 {
		t.Fatalf("%+v, want exit 3", c)
	}
	if code, reason := closeStatus(ctx, ws2); code != websocket.StatusNormalClosure || reason != "exited" {
		t.Fatalf("close %v %q, want normal, exited", code, reason)
	}
	// An ended terminal is not there to resume.
	ws3 := open(ctx, t, srv, "local", "", resumeQuery(id, 0, 2))
	expectClose(ctx, t, ws3, StatusNoTerminal, "resuming an exited terminal")
}

// What the replay buffer no longer holds is told as a count, so the page
// can say output is missing, and the rest comes after it.
func TestResumeSaysWhatIsLost(t *testing.T) {
	ctx := testCtx(t)
	proc := newEcho()
	srv, _ := keptServer(t, Config{Replay: 8}, proc)
	id := leftTerminal(ctx, t, srv)
	printAway(t, proc, "abcdefghijklmnopqrst")
	ws2 := open(ctx, t, srv, "local", "", resumeQuery(id, 2, 1))
	if c := readControl(ctx, t, ws2); c.Type != "skipped" || c.Bytes != 12 {
		t.Fatalf("%+v, want 12 bytes skipped (22 printed, 8 held, 2 drawn)", c)
	}
	if got := readOutput(ctx, t, ws2, 8); got != "mnopqrst" {
		t.Fatalf("replay %q, want the 8 bytes held", got)
	}
	// A page that claims more than was printed gets nothing twice.
	ws3 := open(ctx, t, srv, "local", "", resumeQuery(id, 1000, 2))
	echo(ctx, t, ws3, "ok")
}

// A kept terminal whose page does not come back within Keep ends, and
// so does its shell.
func TestKeptTerminalExpires(t *testing.T) {
	ctx := testCtx(t)
	proc := newEcho()
	srv, _ := keptServer(t, Config{Keep: 50 * time.Millisecond}, proc)
	id := leftTerminal(ctx, t, srv)
	select {
	case <-proc.done:
	case <-ctx.Done():
		t.Fatal("the shell of a terminal not resumed within Keep still runs")
	}
	ws2 := open(ctx, t, srv, "local", "", resumeQuery(id, 2, 1))
	expectClose(ctx, t, ws2, StatusNoTerminal, "resuming an expired terminal")
}

// A terminal id is no key: another caller, or the same caller through
// another host's path, is told there is no such terminal, and the
// terminal is untouched.
func TestResumeOnlyByItsCaller(t *testing.T) {
	ctx := testCtx(t)
	proc := newEcho()
	srv, _ := keptServer(t, Config{}, proc)
	id := leftTerminal(ctx, t, srv)
	for _, c := range []struct{ host, caller string }{{"local", "mallory"}, {"other", ""}} {
		w := open(ctx, t, srv, c.host, c.caller, resumeQuery(id, 0, 1))
		expectClose(ctx, t, w, StatusNoTerminal, "resume as "+c.caller+" on "+c.host)
	}
	ws2 := open(ctx, t, srv, "local", "", resumeQuery(id, 2, 1))
	echo(ctx, t, ws2, "mine")
}

// A second page that resumes the terminal takes it from the first, which
// is told so it stops trying; an older attempt (a connect that waited
// while the network was down) takes nothing.
func TestResumeTakesOverAndStaleRefused(t *testing.T) {
	ctx := testCtx(t)
	proc := newEcho()
	srv, _ := keptServer(t, Config{}, proc)
	q := keepQuery()
	q.Set("seq", "5")
	a := open(ctx, t, srv, "local", "", q)
	id := readControl(ctx, t, a).ID
	echo(ctx, t, a, "a")
	b := open(ctx, t, srv, "local", "", resumeQuery(id, 1, 9))
	expectClose(ctx, t, a, StatusTaken, "the first page")
	echo(ctx, t, b, "b")
	c := open(ctx, t, srv, "local", "", resumeQuery(id, 0, 7))
	expectClose(ctx, t, c, StatusStale, "an older attempt")
	echo(ctx, t, b, "still b")
}

// One caller keeps at most MaxKept terminals without a page: the one
// left longest ends.
func TestKeptPerCallerBound(t *testing.T) {
	ctx := testCtx(t)
	procs := []*echoProcess{newEcho(), newEcho(), newEcho()}
	srv, _ := keptServer(t, Config{MaxKept: 2}, procs...)
	for i := range procs {
		ws := open(ctx, t, srv, "local", "", keepQuery())
		readControl(ctx, t, ws)
		echo(ctx, t, ws, "x")
		_ = ws.CloseNow()
		if i < 2 {
			// In order: "left longest" is then the first.
			waitDetached(ctx, t, srv, i+1)
		}
	}
	select {
	case <-procs[0].done:
	case <-ctx.Done():
		t.Fatal("a third kept terminal left the first one's shell running")
	}
	if !alive(procs[1]) || !alive(procs[2]) {
		t.Fatal("a terminal within the bound ended")
	}
}

// waitDetached waits until n terminals are kept without a page.
func waitDetached(ctx context.Context, t *testing.T, srv *httptest.Server, n int) {
	t.Helper()
	h := srv.Config.Handler.(*http.ServeMux)
	th, _ := h.Handler(httptest.NewRequest("GET", "/v1/hosts/local/pty", nil))
	terms := th.(*Terminals)
	for ctx.Err() == nil {
		got := 0
		terms.mu.Lock()
		for _, k := range terms.kept {
			k.mu.Lock()
			if k.att == nil && k.grace != nil {
				got++
			}
			k.mu.Unlock()
		}
		terms.mu.Unlock()
		if got >= n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%d terminals never were without a page", n)
}

// A shell that exits while its page is away leaves the page its output
// and its exit status to come back to.
func TestEndedWhileAwayTellsThePage(t *testing.T) {
	ctx := testCtx(t)
	proc := newEcho()
	srv, _ := keptServer(t, Config{}, proc)
	id := leftTerminal(ctx, t, srv)
	waitDetached(ctx, t, srv, 1)
	if _, err := proc.inW.Write([]byte("bye")); err != nil {
		t.Fatal(err)
	}
	if _, err := proc.inW.Write([]byte("exit 4")); err != nil {
		t.Fatal(err)
	}
	<-proc.done
	ws2 := open(ctx, t, srv, "local", "", resumeQuery(id, 2, 1))
	if got := readOutput(ctx, t, ws2, 3); got != "BYE" {
		t.Fatalf("replay %q, want BYE", got)
	}
	if c := readControl(ctx, t, ws2); c.Type != "exit" || c.Code == nil || *c.Code != 4 {
		t.Fatalf("%+v, want exit 4", c)
	}
	if code, _ := closeStatus(ctx, ws2); code != websocket.StatusNormalClosure {
		t.Fatalf("close %v, want normal", code)
	}
}

// Without ?keep=1 (a script, an older page) a terminal ends with its
// socket, as it always has.
func TestUnkeptTerminalEndsWithItsPage(t *testing.T) {
	ctx := testCtx(t)
	proc := newEcho()
	srv, _ := keptServer(t, Config{}, proc)
	ws := open(ctx, t, srv, "local", "", url.Values{})
	echo(ctx, t, ws, "hi") // no session message: output comes first
	_ = ws.CloseNow()
	select {
	case <-proc.done:
	case <-ctx.Done():
		t.Fatal("the shell outlived a terminal that was not kept")
	}
}

// Close ends kept terminals too, and refuses new ones with the reason.
func TestCloseEndsKeptTerminals(t *testing.T) {
	ctx := testCtx(t)
	proc := newEcho()
	srv, h := keptServer(t, Config{}, proc)
	ws := open(ctx, t, srv, "local", "", keepQuery())
	readControl(ctx, t, ws)
	_ = ws.CloseNow()
	h.Close()
	if alive(proc) {
		t.Fatal("Close left a kept terminal's shell running")
	}
	ws2 := open(ctx, t, srv, "local", "", keepQuery())
	if c := readControl(ctx, t, ws2); c.Type != "error" || !strings.Contains(c.Message, "shutting down") {
		t.Fatalf("after Close: %+v, want an error saying the gateway is shutting down", c)
	}
}

// TestCloseTellsThePagesFirst: Close returns once each page has been told
// why its terminal ended, close frame and all: the gateway exits after it.
// It returned when the terminals had ended, and with one P (a gateway on
// one CPU) every time before the frame went out: the page took the drop
// for the network's, came back to the restarted gateway, and said "the
// terminal ended while disconnected" (e2e TestBrowserTerminalGatewayRestart
// under GOMAXPROCS=1).
func TestCloseTellsThePagesFirst(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	ctx := testCtx(t)
	srv, h := keptServer(t, Config{}, newEcho())
	ws := open(ctx, t, srv, "local", "", keepQuery())
	readControl(ctx, t, ws)
	told := make(chan error, 1)
	go func() {
		for {
			if _, _, err := ws.Read(ctx); err != nil {
				told <- err
				return
			}
		}
	}()
	h.Close()
	select {
	case err := <-told:
		var ce websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.StatusNormalClosure || !strings.Contains(ce.Reason, "shutting down") {
			t.Fatalf("the page read %v, want a normal close saying the gateway is shutting down", err)
		}
	default:
		t.Fatal("Close returned before the page was told why its terminal ended")
	}
}

func TestResumeParamsRefused(t *testing.T) {
	ctx := testCtx(t)
	srv, _ := keptServer(t, Config{})
	for _, q := range []string{"resume=nope", "resume=" + newTermID() + "&from=-1", "seq=x"} {
		res, err := http.Get(srv.URL + "/v1/hosts/local/pty?" + q)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if res.StatusCode != http.StatusBadRequest {
			t.Errorf("?%s: %d, want 400", q, res.StatusCode)
		}
	}
	_ = ctx
}

func TestRing(t *testing.T) {
	r := newRing(8)
	var all []byte
	for i, n := range []int{3, 5, 1, 9, 2, 16, 7, 8, 0, 4} {
		p := bytes.Repeat([]byte{byte('a' + i)}, n)
		r.add(p)
		all = append(all, p...)
		checkRing(t, r, all)
	}
}

func checkRing(t *testing.T, r *ring, all []byte) {
	t.Helper()
	if r.total != int64(len(all)) {
		t.Fatalf("total %d, want %d", r.total, len(all))
	}
	for from := r.oldest(); from <= r.total; from++ {
		if got := bytes.Join(r.since(from), nil); !bytes.Equal(got, all[from:]) {
			t.Fatalf("since(%d) = %q, want %q", from, got, all[from:])
		}
	}
	if want := max(int64(0), r.total-int64(r.size)); r.oldest() != want {
		t.Fatalf("oldest %d, want %d", r.oldest(), want)
	}
}

func FuzzRing(f *testing.F) {
	f.Add(uint8(8), []byte{3, 5, 1, 9, 2, 16, 7, 8})
	f.Add(uint8(1), []byte{0, 1, 2})
	f.Fuzz(func(t *testing.T, size uint8, adds []byte) {
		if size == 0 || len(adds) > 64 {
			return
		}
		r := newRing(int(size))
		var all []byte
		for i, n := range adds {
			p := bytes.Repeat([]byte{byte(i)}, int(n))
			r.add(p)
			all = append(all, p...)
		}
		checkRing(t, r, all)
	})
}

func FuzzResumeParams(f *testing.F) {
	f.Add("resume=" + newTermID() + "&from=12&seq=3")
	f.Add("from=-1")
	f.Add("resume=%zz")
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		id, from, seq, err := resumeParams(q)
		if err != nil {
			return
		}
		if from < 0 || seq < 0 || (id != "" && !validTermID(id)) {
			t.Fatalf("%q read as %q %d %d", raw, id, from, seq)
		}
	})
}

// A kept terminal still ends with its caller's authorization (a revoked
// token, a logout), page or no page.
func TestBindEndsKeptTerminal(t *testing.T) {
	ctx := testCtx(t)
	proc := newEcho()
	revoke := make(chan struct{})
	srv, _ := keptServer(t, Config{Bind: func(ctx context.Context, r *http.Request, id string) (context.Context, func()) {
		bctx, bcancel := context.WithCancelCause(ctx)
		go func() {
			select {
			case <-revoke:
				bcancel(errors.New("the session's token was revoked"))
			case <-bctx.Done():
			}
		}()
		return bctx, func() { bcancel(nil) }
	}}, proc)
	leftTerminal(ctx, t, srv)
	waitDetached(ctx, t, srv, 1)
	close(revoke)
	select {
	case <-proc.done:
	case <-ctx.Done():
		t.Fatal("a kept terminal's shell outlived its caller's revoked token")
	}
}

// Stats counts running terminals, and those kept waiting for a page.
func TestStats(t *testing.T) {
	ctx := testCtx(t)
	procs := []*echoProcess{newEcho(), newEcho()}
	srv, h := keptServer(t, Config{}, procs...)
	ws := open(ctx, t, srv, "local", "", keepQuery())
	readControl(ctx, t, ws)
	leftTerminal(ctx, t, srv)
	waitDetached(ctx, t, srv, 1)
	if st := h.Stats(); st != (Stats{Open: 2, Waiting: 1}) {
		t.Fatalf("stats %+v, want 2 open, 1 waiting", st)
	}
	if err := ws.Write(ctx, websocket.MessageBinary, []byte("exit 0")); err != nil {
		t.Fatal(err)
	}
	expectClose(ctx, t, ws, websocket.StatusNormalClosure, "after exit")
	for ctx.Err() == nil && h.Stats() != (Stats{Open: 1, Waiting: 1}) {
		time.Sleep(5 * time.Millisecond)
	}
	if st := h.Stats(); st != (Stats{Open: 1, Waiting: 1}) {
		t.Fatalf("stats %+v after one exited, want 1 open, 1 waiting", st)
	}
}

// While no page is there, a kept terminal's output is not held back by
// the page's flow control (there is nobody to ack): the program runs on
// (a build that prints finishes), and the page is told what it lost.
func TestKeptTerminalRunsOnWithoutPage(t *testing.T) {
	ctx := testCtx(t)
	proc := &floodProcess{printer: newPrinter()}
	srv := hostServer(t, proc, Config{Replay: 64 << 10})
	ws := open(ctx, t, srv, "local", "", keepQuery())
	id := readControl(ctx, t, ws).ID
	_ = ws.CloseNow()
	// Four windows' worth with no page acking: held back, it would stop
	// at one.
	for ctx.Err() == nil && proc.read.Load() < 4*AckWindow {
		time.Sleep(5 * time.Millisecond)
	}
	if n := proc.read.Load(); n < 4*AckWindow {
		t.Fatalf("the flood stopped at %d bytes with no page", n)
	}
	ws2 := open(ctx, t, srv, "local", "", resumeQuery(id, 0, 1))
	if c := readControl(ctx, t, ws2); c.Type != "skipped" || c.Bytes < 3*AckWindow {
		t.Fatalf("%+v, want megabytes skipped", c)
	}
	if got := readOutput(ctx, t, ws2, 64<<10); !strings.HasPrefix(got, "y\n") && !strings.HasPrefix(got, "\ny") {
		t.Fatalf("replay starts %q, want the flood", got[:8])
	}
}

// TestEndCutsAReplayStuckOnAPageThatDoesNotRead: a terminal that ends
// (here the gateway's shutdown) while its replay to a resuming page waits
// on that page, which does not read (a frozen tab: the socket is up,
// nothing reads it), gives the replay's write up and ends. The replay
// holds the output lock while it writes, so the output copy, and with it
// the terminal's end and Close, waited for the write's own timeout (30 s,
// for each of up to three writes); the timeout is an hour here, so the old
// code hangs.
func TestEndCutsAReplayStuckOnAPageThatDoesNotRead(t *testing.T) {
	defer func(d time.Duration) { pageWriteTimeout = d }(pageWriteTimeout)
	pageWriteTimeout = time.Hour
	ctx := testCtx(t)
	// More than loopback sockets buffer (4 MiB to send, as much again to
	// receive at most here), so the replay cannot all go out.
	const replay = 32 << 20
	proc := &floodProcess{printer: newPrinter()}
	srv, h := hostTerminals(t, proc, Config{Replay: replay})
	ws := open(ctx, t, srv, "local", "", keepQuery())
	id := readControl(ctx, t, ws).ID
	_ = ws.CloseNow()
	for ctx.Err() == nil && proc.read.Load() < replay {
		time.Sleep(5 * time.Millisecond)
	}
	// The page resumes and reads nothing: the replay fills the socket's
	// buffers and its write then waits, holding the output copy. Seen
	// when the flood stops being read.
	ws2 := open(ctx, t, srv, "local", "", resumeQuery(id, 0, 1))
	for last := int64(-1); ; {
		select {
		case <-ctx.Done():
			t.Fatal("the flood was never held up by the resuming page that does not read")
		case <-time.After(200 * time.Millisecond):
		}
		n := proc.read.Load()
		if n == last {
			break
		}
		last = n
	}
	closed := make(chan struct{})
	go func() { h.Close(); close(closed) }()
	select {
	case <-closed:
	case <-ctx.Done():
		_ = ws2.CloseNow() // unblocks the write, so the test's cleanup ends
		<-closed
		t.Fatal("Close waited on a replay stuck on a page that does not read")
	}
	// What the page has is less than the replay: the replay's write was
	// stuck, not done (the flood then held by the page's acks).
	rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := 0
	for {
		typ, b, err := ws2.Read(rctx)
		if err != nil {
			break
		}
		if typ == websocket.MessageBinary {
			got += len(b)
		}
	}
	if got >= replay {
		t.Fatalf("the page had all %d bytes of the replay: its write never waited", got)
	}
	t.Logf("the page had %d of the replay's %d bytes", got, replay)
}

// chunkProcess prints each chunk sent on out in one read, counting its
// reads: the output copy starts read n+1 once it has passed read n's
// chunk on. A resize prints onResize, as a full-screen program redraws.
type chunkProcess struct {
	printer
	out      chan chunk
	reads    atomic.Int64
	onResize []byte
	resized  chan struct{} // closed once onResize is passed on
}

// chunk is output to print; the read that takes it is sent on read.
type chunk struct {
	b    []byte
	read chan int64
}

func (p *chunkProcess) Read(b []byte) (int, error) {
	n := p.reads.Add(1)
	select {
	case c := <-p.out:
		c.read <- n
		return copy(b, c.b), nil
	case <-p.killed:
		return 0, io.EOF
	}
}

// print has the shell print b and waits until the output copy has
// passed it on (to the replay buffer and the page, if any).
func (p *chunkProcess) print(ctx context.Context, b []byte) {
	c := chunk{b, make(chan int64, 1)}
	select {
	case p.out <- c:
	case <-ctx.Done():
		return
	}
	n := <-c.read
	for ctx.Err() == nil && p.reads.Load() <= n {
		time.Sleep(time.Millisecond)
	}
}

func (p *chunkProcess) Resize(c, r int) error {
	if p.onResize != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p.print(ctx, p.onResize)
		close(p.resized)
	}
	return nil
}

func (p *chunkProcess) Stdout() io.Reader { return p }

// Output the shell prints while a page resumes (the redraw its new size
// brings) reaches the page after what it missed, once. Before, the page
// was attached before its replay: that output came ahead of the replay
// and again in it ("REDRAW" "old" "REDRAW").
func TestResumeReplaysBeforeNewOutput(t *testing.T) {
	ctx := testCtx(t)
	proc := &chunkProcess{printer: newPrinter(), out: make(chan chunk), onResize: []byte("REDRAW"), resized: make(chan struct{})}
	srv := hostServer(t, proc, Config{})
	ws := open(ctx, t, srv, "local", "", keepQuery())
	id := readControl(ctx, t, ws).ID
	_ = ws.CloseNow()
	proc.print(ctx, []byte("old"))
	ws2 := open(ctx, t, srv, "local", "", resumeQuery(id, 0, 1))
	select {
	case <-proc.resized:
	case <-ctx.Done():
		t.Fatal("the resumed terminal was never resized")
	}
	proc.print(ctx, []byte("END"))
	var got string
	for !strings.HasSuffix(got, "END") {
		typ, b, err := ws2.Read(ctx)
		if err != nil {
			t.Fatalf("after %q: %v", got, err)
		}
		if typ == websocket.MessageBinary {
			got += string(b)
		}
	}
	if got != "oldREDRAWEND" {
		t.Fatalf("the resumed page got %q, want %q", got, "oldREDRAWEND")
	}
}

// A page that stops answering as its terminal's ending is sent (its
// network dropped at that moment) resumes to the ending, exit code and
// all. The terminal was forgotten as the ending went out, and the resume
// was told it was gone (4004), the exit code lost: 29 of 90 such resumes
// in a soak.
func TestEndingKeptForAPageThatDidNotAnswer(t *testing.T) {
	ctx := testCtx(t)
	proc := newEcho()
	srv, _ := keptServer(t, Config{}, proc)
	ws := open(ctx, t, srv, "local", "", keepQuery())
	s := readControl(ctx, t, ws)
	echo(ctx, t, ws, "hi")
	// From here the page reads nothing, so it never answers a close.
	if _, err := proc.inW.Write([]byte("exit 4")); err != nil {
		t.Fatal(err)
	}
	<-proc.done
	waitDetached(ctx, t, srv, 1) // the close went unanswered, the terminal kept
	ws2 := open(ctx, t, srv, "local", "", resumeQuery(s.ID, 2, 1))
	if c := readControl(ctx, t, ws2); c.Type != "exit" || c.Code == nil || *c.Code != 4 {
		t.Fatalf("the resume got %+v, want exit 4", c)
	}
	if code, _ := closeStatus(ctx, ws2); code != websocket.StatusNormalClosure {
		t.Fatalf("close %v, want normal", code)
	}
	// Had, it is forgotten.
	ws3, err := openErr(ctx, srv, "local", "", resumeQuery(s.ID, 2, 2))
	if err != nil {
		t.Fatal(err)
	}
	defer ws3.CloseNow()
	expectClose(ctx, t, ws3, StatusNoTerminal, "a resume after the ending was had")
}

// The bound on a caller's kept terminals counts those whose shell ended
// while their page was away too: each holds its replay buffer
// (Config.Replay) for Config.Keep, waiting for its page. They were left
// out of the count, so a page that had its shells exit and went (or
// never answered the close of their ending) kept any number of them, up
// to 256 KiB each for 5 minutes: a caller's memory at the gateway had no
// bound. The one left longest is dropped, and its resume told it ended.
func TestKeptPerCallerBoundCountsEnded(t *testing.T) {
	ctx := testCtx(t)
	procs := []*echoProcess{newEcho(), newEcho(), newEcho()}
	srv, _ := keptServer(t, Config{MaxKept: 1}, procs...)
	var ids []string
	for i, p := range procs {
		ids = append(ids, leftTerminal(ctx, t, srv))
		waitDetached(ctx, t, srv, 1)
		if i == len(procs)-1 {
			break
		}
		if _, err := p.inW.Write([]byte("exit 4")); err != nil {
			t.Fatal(err)
		}
		<-p.done
	}
	for i, id := range ids[:2] {
		ws, err := openErr(ctx, srv, "local", "", resumeQuery(id, 2, 1))
		if err != nil {
			t.Fatal(err)
		}
		defer ws.CloseNow()
		expectClose(ctx, t, ws, StatusNoTerminal, fmt.Sprintf("the resume of ended terminal %d past the bound", i))
	}
	if !alive(procs[2]) {
		t.Fatal("the terminal within the bound ended")
	}
	ws := open(ctx, t, srv, "local", "", resumeQuery(ids[2], 2, 1))
	echo(ctx, t, ws, "still")
}

// A page's grace timer that fires as the page comes back (its Stop too
// late: expire already waits for the lock) does not end the terminal once
// the page that came back has left in its turn: the terminal is kept for
// Config.Keep from its latest page's going. It ended at once, for it
// looked only at whether some page had it and some grace ran.
func TestLateGraceOfAnEarlierPageKeepsTerminal(t *testing.T) {
	ctx := testCtx(t)
	proc := newEcho()
	srv, h := keptServer(t, Config{}, proc)
	ws := open(ctx, t, srv, "local", "", keepQuery())
	s := readControl(ctx, t, ws)
	echo(ctx, t, ws, "hi")
	h.mu.Lock()
	term := h.kept[s.ID]
	h.mu.Unlock()
	term.mu.Lock()
	first := term.att
	term.mu.Unlock()
	_ = ws.CloseNow()
	waitDetached(ctx, t, srv, 1)
	ws2 := open(ctx, t, srv, "local", "", resumeQuery(s.ID, 2, 1))
	echo(ctx, t, ws2, "back")
	_ = ws2.CloseNow()
	waitDetached(ctx, t, srv, 1)
	term.expire(first) // the first page's grace, late
	if !alive(proc) {
		t.Fatal("the first page's late grace ended the terminal kept for the second")
	}
	ws3 := open(ctx, t, srv, "local", "", resumeQuery(s.ID, 6, 2))
	echo(ctx, t, ws3, "again")
}

// A page whose kept terminal the gateway closed while it was away (a
// laptop asleep past Keep, or with more terminal tabs than MaxKept) is
// told why when it comes back, not only that the terminal has ended,
// which it took for its shell's exit. No one else's resume hears of it.
func TestResumeOfTerminalClosedAwaySaysWhy(t *testing.T) {
	ctx := testCtx(t)
	procs := []*echoProcess{newEcho(), newEcho()}
	srv, _ := keptServer(t, Config{MaxKept: 1}, procs...)
	first := leftTerminal(ctx, t, srv)
	waitDetached(ctx, t, srv, 1)
	leftTerminal(ctx, t, srv)
	<-procs[0].done
	for _, c := range []struct{ host, caller, want string }{
		{"other", "", "this terminal has ended; open a new one"},
		{"local", "mallory", "this terminal has ended; open a new one"},
		{"local", "", "closed: more than 1 terminals of this login were kept without their page, this one longest"},
	} {
		ws := open(ctx, t, srv, c.host, c.caller, resumeQuery(first, 2, 1))
		if code, reason := closeStatus(ctx, ws); code != StatusNoTerminal || reason != c.want {
			t.Errorf("resume as %q on %s: close %v %q, want %v %q", c.caller, c.host, code, reason, StatusNoTerminal, c.want)
		}
	}

	proc := newEcho()
	srv, _ = keptServer(t, Config{Keep: 50 * time.Millisecond}, proc)
	id := leftTerminal(ctx, t, srv)
	<-proc.done
	ws := open(ctx, t, srv, "local", "", resumeQuery(id, 2, 1))
	if code, reason := closeStatus(ctx, ws); code != StatusNoTerminal || reason != "closed: this page did not come back within 50ms" {
		t.Errorf("resume after Keep: close %v %q", code, reason)
	}
}

// A kept terminal whose page had its ending (exit, close answered) is
// let go whole: nothing holds it, or its replay buffer, on. Its page's
// reader, ending with the socket, took the page's going for a page gone
// away and armed the keep timer, which held the terminal and up to
// Replay bytes of its output for Keep after, outside the bound on kept
// terminals (the terminal forgotten): a page that opened and exited
// terminals in a loop held any number of them.
func TestEndingHadLeavesNothingKept(t *testing.T) {
	ctx := testCtx(t)
	proc := newEcho()
	srv, h := keptServer(t, Config{}, proc)
	ws := open(ctx, t, srv, "local", "", keepQuery())
	s := readControl(ctx, t, ws)
	echo(ctx, t, ws, "hi")
	h.mu.Lock()
	term := h.kept[s.ID]
	h.mu.Unlock()
	term.mu.Lock()
	a := term.att
	term.mu.Unlock()
	if _, err := proc.inW.Write([]byte("exit 4")); err != nil {
		t.Fatal(err)
	}
	if c := readControl(ctx, t, ws); c.Type != "exit" {
		t.Fatalf("%+v, want exit", c)
	}
	if code, _ := closeStatus(ctx, ws); code != websocket.StatusNormalClosure {
		t.Fatalf("close %v, want normal", code)
	}
	<-a.told // the gateway is done with the page: its reader too
	<-term.finished
	term.mu.Lock()
	armed := term.grace != nil
	term.mu.Unlock()
	if armed {
		t.Fatal("a terminal whose page had its ending is still kept for Keep")
	}
}

// The gateway keeps at most MaxKeptAll terminals without a page across
// all callers: each caller within its own MaxKept, many callers (tokens)
// together held any number of shells and their replay buffers. Past the
// bound the one left longest, whoever's, ends, and its page's resume is
// told why; a new one is not refused.
func TestKeptGatewayBound(t *testing.T) {
	ctx := testCtx(t)
	procs := []*echoProcess{newEcho(), newEcho(), newEcho()}
	srv, _ := keptServer(t, Config{MaxKeptAll: 2}, procs...)
	callers := []string{"ann", "bob", "cyd"}
	var ids []string
	for i, c := range callers {
		ws := open(ctx, t, srv, "local", c, keepQuery())
		ids = append(ids, readControl(ctx, t, ws).ID)
		echo(ctx, t, ws, "hi")
		_ = ws.CloseNow()
		if i < 2 {
			// In order: "left longest" is then ann's.
			waitDetached(ctx, t, srv, i+1)
		}
	}
	select {
	case <-procs[0].done:
	case <-ctx.Done():
		t.Fatal("a third caller's kept terminal left the first caller's shell running past the gateway's bound")
	}
	ws := open(ctx, t, srv, "local", "ann", resumeQuery(ids[0], 2, 1))
	want := "closed: the gateway kept more than 2 terminals without their page; this login kept the most, and this one longest"
	if code, reason := closeStatus(ctx, ws); code != StatusNoTerminal || reason != want {
		t.Errorf("ann's resume: close %v %q, want %v %q", code, reason, StatusNoTerminal, want)
	}
	for i, c := range callers[1:] {
		ws := open(ctx, t, srv, "local", c, resumeQuery(ids[i+1], 2, 1))
		echo(ctx, t, ws, "still "+c)
	}
}

// A kept terminal whose page never heard its id (the write of the session
// message failed: the page went as its shell started) ends at once, with
// its shell: no page can resume it. It was kept for Keep, a shell on the
// host and a place in its caller's bound held for nobody.
func TestKeptTerminalWhoseIDWasNotToldEnds(t *testing.T) {
	ctx := testCtx(t)
	proc := newEcho()
	conns := make(chan net.Conn, 1)
	h := Handler(Config{
		Authorize: func(w http.ResponseWriter, r *http.Request, id string) (Caller, bool) {
			return Caller{ID: "tester", Name: "tester"}, true
		},
		Spawn: func(ctx context.Context, id, name string, argv []string, pty *hostgate.PTY) (hostgate.Process, func(), error) {
			// The page's connection breaks as the shell starts: the
			// session message that follows cannot be written.
			select {
			case c := <-conns:
				_ = c.Close()
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			stop := context.AfterFunc(ctx, func() { _ = proc.Kill(hostgate.SIGKILL) })
			return proc, func() { stop() }, nil
		},
	})
	mux := http.NewServeMux()
	mux.Handle("GET /v1/hosts/{id}/pty", h)
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateHijacked {
			conns <- c
		}
	}
	srv.Start()
	t.Cleanup(func() { h.Close(); srv.Close() })
	ws := open(ctx, t, srv, "local", "", keepQuery())
	if _, _, err := ws.Read(ctx); err == nil {
		t.Fatal("the page read a message over a connection the gateway's side closed")
	}
	select {
	case <-proc.done:
	case <-ctx.Done():
		t.Fatal("a kept terminal whose id no page was told is still running")
	}
	for ctx.Err() == nil {
		h.mu.Lock()
		n := len(h.all) + len(h.kept)
		h.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the gateway still holds a terminal no page can resume")
}

// One caller's kept terminals ended while away, however many, do not push
// out another caller's record of why its own ended: a token that opened
// and abandoned kept terminals in a loop took every other page's reason,
// which then heard only that its terminal had ended.
func TestGoneReasonsBoundedPerCaller(t *testing.T) {
	h := Handler(Config{})
	ann := &term{id: newTermID(), host: "local", caller: "ann"}
	h.bury(ann, "closed: ann's reason")
	for range maxGone + 10 {
		h.bury(&term{id: newTermID(), host: "local", caller: "mallory"}, "closed: mallory's")
	}
	if why := h.goneWhy(ann.id, "local", "ann"); why != "closed: ann's reason" {
		t.Fatalf("ann's resume after mallory's %d: reason %q, want ann's", maxGone+10, why)
	}
	// Nor do many callers' together, past the bound on all of them:
	// those holding the most lose theirs first.
	for i := range 2 * maxGone / maxGonePer {
		for range maxGonePer {
			h.bury(&term{id: newTermID(), host: "local", caller: fmt.Sprint("mallory", i)}, "closed: mallory's")
		}
	}
	if why := h.goneWhy(ann.id, "local", "ann"); why != "closed: ann's reason" {
		t.Fatalf("ann's resume after %d callers' %d each: reason %q, want ann's", 2*maxGone/maxGonePer, maxGonePer, why)
	}
	h.mu.Lock()
	n := len(h.gone)
	h.mu.Unlock()
	if n > maxGone {
		t.Fatalf("%d reasons held, more than %d", n, maxGone)
	}
}

// Past the gateway's bound on kept terminals, the caller keeping the most
// loses one, not whoever left theirs first: a caller (one user's many
// logins) keeping several ended another's only kept terminal, its shell
// and what it was running, to keep all of its own.
func TestKeptGatewayBoundTakesFromTheBiggestHolder(t *testing.T) {
	ctx := testCtx(t)
	procs := []*echoProcess{newEcho(), newEcho(), newEcho(), newEcho()}
	srv, _ := keptServer(t, Config{MaxKeptAll: 3}, procs...)
	callers := []string{"ann", "mal", "mal", "mal"}
	var ids []string
	for i, c := range callers {
		ws := open(ctx, t, srv, "local", c, keepQuery())
		ids = append(ids, readControl(ctx, t, ws).ID)
		echo(ctx, t, ws, "hi")
		_ = ws.CloseNow()
		if i < len(callers)-1 {
			// In order: ann's is left longest, then mal's first.
			waitDetached(ctx, t, srv, i+1)
		}
	}
	select {
	case <-procs[0].done:
		t.Fatal("the gateway's bound ended a caller's only kept terminal while another kept 3")
	case <-procs[1].done:
	case <-ctx.Done():
		t.Fatal("past the gateway's bound, the oldest kept terminal of the caller keeping the most still runs")
	}
	if !alive(procs[0]) || !alive(procs[2]) || !alive(procs[3]) {
		t.Fatal("the gateway's bound ended more than one kept terminal")
	}
	ws := open(ctx, t, srv, "local", "ann", resumeQuery(ids[0], 2, 1))
	echo(ctx, t, ws, "still ann")
	ws = open(ctx, t, srv, "local", "mal", resumeQuery(ids[1], 2, 1))
	want := "closed: the gateway kept more than 3 terminals without their page; this login kept the most, and this one longest"
	if code, reason := closeStatus(ctx, ws); code != StatusNoTerminal || reason != want {
		t.Errorf("mal's resume: close %v %q, want %v %q", code, reason, StatusNoTerminal, want)
	}
}
