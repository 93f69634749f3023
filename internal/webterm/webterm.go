// Package webterm is the browser terminal's server side: GET
// /v1/hosts/{id}/pty upgrades to a WebSocket that carries one PTY session on
// the host. The gateway is the SSH client (with its own certificate), so the
// browser never holds SSH keys.
//
// Wire format: binary messages are terminal bytes in both directions; text
// messages are JSON control messages — {"type":"resize","cols":C,"rows":R},
// {"type":"ack","bytes":N} (see AckWindow; ?ack=1 or, paced, ?ack=2) and {"type":"ping"} from the
// browser, {"type":"exit","code":N} (with "signal":S, "KILL", and code
// -1 for a shell a signal ended), {"type":"error","message":M},
// {"type":"pong"} (the answer to a ping), {"type":"inputwait","taken":T},
// {"type":"inputdone","taken":T} and {"type":"starting"} (every few
// seconds while the host has not yet started the shell; the gateway
// gives up after 30 s and sends an error) from the gateway. A message may
// carry at most MaxMessage bytes: the page sends a long paste in several. A larger one is dropped whole and
// answered with an error message; the terminal goes on. Control messages
// do not wait behind input the shell has not taken: the gateway holds up
// to 256 KiB of it before it stops reading the page; from then until the
// shell has taken what it holds, it sends {"type":"inputwait"} every few
// seconds, so that a page whose ping waits unread behind its input hears
// the gateway is there, then one {"type":"inputdone"}. T is how many bytes
// of the page's input (since its socket opened) went on to the shell: the
// rest of what it sent waits.
//
// A page that asks with ?keep=1 gets a terminal that outlives its socket
// (Config.Keep): the first message is {"type":"session","id":I,"keepMs":K},
// and a socket opened with ?resume=I&from=N&seq=S, N the output bytes the
// page has, continues it: the gateway sends {"type":"skipped","bytes":L}
// when it no longer holds L of them (Config.Replay), then the rest. S
// orders a page's attempts (newer takes over older); the close codes
// StatusTaken, StatusStale and StatusNoTerminal tell a page to stop.
//
// The socket is opened with the browser's session cookie, so the Origin is
// checked (cross-site WebSocket hijacking): only the gateway's own origin,
// or the patterns configured, may open it; others get 403.
package webterm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/gateway"
)

// MaxMessage is the most bytes one message from the page may carry.
const MaxMessage = 64 << 10

// Shell is what the terminal runs: the user's login shell.
var Shell = []string{"/bin/sh", "-c", `exec "${SHELL:-/bin/sh}" -l`}

// Config wires the terminal to the gateway.
type Config struct {
	// Authorize authenticates r for host id and writes the error answer
	// itself when it returns false.
	Authorize func(w http.ResponseWriter, r *http.Request, id string) (who Caller, ok bool)
	// Spawn starts argv on host id on a PTY, as caller name.
	Spawn func(ctx context.Context, id, name string, argv []string, pty *hostgate.PTY) (hostgate.Process, func(), error)
	// Handshake, when set, checks r is a WebSocket handshake before
	// Authorize and writes the error answer itself when it returns false
	// (the gateway's answers are JSON; coder/websocket's are text).
	Handshake func(w http.ResponseWriter, r *http.Request) bool
	// OriginPatterns are extra origins allowed to open the socket
	// (coder/websocket host patterns); the gateway's own origin always is.
	OriginPatterns []string
	// Bind, when set, ties the terminal to the caller's authorization: the
	// terminal ends when the context Bind returns does (the gateway ends
	// it when the caller's token is revoked or expires), and the page is
	// told the context's cause. done is called when the terminal closes.
	Bind func(ctx context.Context, r *http.Request, id string) (bound context.Context, done func())
	// Why, when set, words for the page the cause of a terminal ended from
	// outside (Bind's context, the idle timer); nil shows the cause's own
	// text, which is a Go error's.
	Why func(cause error) string
	// Logger; nil discards.
	Logger *slog.Logger
	// Idle closes a terminal with no input or output for this long; 0
	// means 1 hour.
	Idle time.Duration
	// Ping is the longest the socket goes without a frame to the page;
	// 0 means PingInterval. See PingInterval.
	Ping time.Duration
	// Keep is how long a terminal whose page asked for it (?keep=1)
	// runs on after the page goes without its shell exiting, for the page
	// to resume it; 0 means DefaultKeep, negative turns keeping off.
	Keep time.Duration
	// MaxKept bounds the terminals one caller may have kept without a
	// page; 0 means DefaultMaxKept.
	MaxKept int
	// MaxKeptAll bounds the terminals kept without a page across all
	// callers, past which the caller keeping the most loses one; 0 means
	// DefaultMaxKeptAll.
	MaxKeptAll int
	// Replay is how many bytes of its latest output a kept terminal
	// holds for its page to catch up from; 0 means DefaultReplay.
	Replay int

	testHookPinged func(err error) // tests: called after each keepalive ping, before the pinger acts on err
}

// Caller is who opens a terminal.
type Caller struct {
	// ID tells callers apart: a kept terminal is resumed only by its
	// own, and the bound on kept terminals is each one's (the token's id;
	// names need not be unique).
	ID string
	// Name identifies the caller in the host's logs (the token's name).
	Name string
}

// PingInterval is the longest a terminal's socket goes without a frame to
// the page: a terminal that prints nothing for longer is pinged. A reverse
// proxy closes a WebSocket its upstream has sent nothing on for a while
// (nginx's proxy_read_timeout: 60 s), and browsers send no pings of their
// own, so an idle terminal behind one was cut after a minute. A page whose
// pong does not come back within the interval is gone (a dropped network,
// a laptop put to sleep): its terminal ends, and with it the shell, within
// two intervals instead of lasting the idle hour (49 s in Chromium behind a
// proxy that stopped relaying).
const PingInterval = 25 * time.Second

// Handler serves GET /v1/hosts/{id}/pty. Close it when the server stops:
// terminals kept for their pages outlive their requests.
func Handler(cfg Config) *Terminals {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Idle == 0 {
		cfg.Idle = time.Hour
	}
	if cfg.Ping == 0 {
		cfg.Ping = PingInterval
	}
	if cfg.Keep == 0 {
		cfg.Keep = DefaultKeep
	}
	if cfg.MaxKept <= 0 {
		cfg.MaxKept = DefaultMaxKept
	}
	if cfg.MaxKeptAll <= 0 {
		cfg.MaxKeptAll = DefaultMaxKeptAll
	}
	if cfg.Replay <= 0 {
		cfg.Replay = DefaultReplay
	}
	return &Terminals{cfg: cfg, all: make(map[*term]struct{}), kept: make(map[string]*term), gone: make(map[string]goneTerm)}
}

// control is a text message.
type control struct {
	Type    string `json:"type"`
	Cols    int    `json:"cols,omitempty"`
	Rows    int    `json:"rows,omitempty"`
	Code    *int   `json:"code,omitempty"`
	Signal  string `json:"signal,omitempty"` // exit: the signal that ended the shell (KILL: the OOM killer's too)
	Message string `json:"message,omitempty"`
	Bytes   int64  `json:"bytes,omitempty"` // ack: output bytes the page has drawn; skipped: bytes lost
	ID      string `json:"id,omitempty"`    // session: what resumes the terminal
	KeepMs  int64  `json:"keepMs,omitempty"`
	Taken   int64  `json:"taken,omitempty"` // inputwait, inputdone (noteInputWait): bytes of the page's input passed on to the shell
}

// AckWindow is how far the terminal's output may run ahead of what the
// page has drawn, when the page acknowledges ({"type":"ack","bytes":N},
// N the output bytes drawn so far; it says so with ?ack=1 on the URL). The socket and the browser buffered
// whatever a command printed: after Ctrl-C on `yes` another 18 MB arrived
// and the prompt came back 6 to 8 s later. Reading stops past the window,
// and the host's PTY holds the command back. A page that never acks is
// not held back, and neither is a kept terminal while no page is there:
// what it prints meanwhile goes to its replay buffer.
//
// A page that acks within a few tens of milliseconds of drawing (?ack=2,
// see ackPaced) gets a window sized from how fast it draws instead, with
// AckWindow its ceiling: a fixed 1 MiB was 0.3 s of a desktop browser's
// drawing but minutes of a slow one's (Chromium CPU-throttled 20×: no
// prompt 120 s after Ctrl-C on yes).
const AckWindow = 1 << 20

// The paced window (?ack=2): output may run ahead of the page by what it
// drew in the last paceTarget, plus its round trip, between minWindow and
// AckWindow. The SSH session's window follows it (Windower), so what is
// between the shell and the screen when Ctrl-C is pressed is about twice
// paceTarget of drawing, whatever the page's speed.
const (
	ackPaced   = "2"
	paceTarget = 250 * time.Millisecond
	// minWindow keeps output flowing between a page's acks, which come
	// within 20 ms of drawing (terminal.js's ackLagMs).
	minWindow = 16 << 10
	// startWindow is a new page's, before its pace is known: small, as
	// a slow page has it all to draw before a Ctrl-C; a fast one is past
	// it after its first sample.
	startWindow = 64 << 10
	// sampleEvery is the shortest span the drawing rate is measured over.
	sampleEvery = 100 * time.Millisecond
)

// Windower is a process whose output the host may send only so far ahead
// of what is read (an SSH session's window): the terminal sets it to the
// page's window, so a flood waits on the host, not at the gateway.
type Windower interface {
	SetOutputWindow(bytes int)
}

// flow is the output's progress against the page's acks.
type flow struct {
	mu     sync.Mutex
	cond   *sync.Cond
	sent   int64
	acked  int64
	acking bool // the page has acked once: it does flow control
	done   bool

	// paced: the window follows the page's drawing rate (?ack=2).
	paced  bool
	window int64
	now    func() time.Time
	// setWindow tells the host's side (Windower); called outside mu,
	// in order (winMu).
	setWindow func(int)
	winMu     sync.Mutex
	// The current rate sample: since when, acked then, whether the
	// window was holding output back then, and whether it did since.
	// Only a sample held from start to end measures the page: else it
	// drew all there was part of the time (a flood that began within it
	// had its first bytes in flight, none drawn). rates are the latest
	// samples' rates.
	sampleAt    time.Time
	sampleAcked int64
	sampleHeld  bool
	held        bool
	rates       [3]float64
	nrates      int
	// One write's trip, gateway to drawn and acked: probeAt is when the
	// output up to probeEnd went out (0: none out). rtt is the shortest
	// trip seen on this page, the part of the window that is in transit
	// rather than waiting to be drawn.
	probeEnd int64
	probeAt  time.Time
	rtt      time.Duration
}

func newFlow() *flow {
	f := &flow{now: time.Now, window: AckWindow}
	f.cond = sync.NewCond(&f.mu)
	return f
}

// wait blocks while the page is a window or more behind, and returns how
// many bytes may go now (up to most); 0 once the session is over.
func (f *flow) wait(most int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.acking && f.sent-f.acked >= f.window && !f.done {
		f.holding()
		f.cond.Wait()
	}
	if f.done {
		return 0
	}
	if f.acking && f.paced {
		return int(min(int64(most), f.window-(f.sent-f.acked)))
	}
	return most
}

// holding notes that the window holds output back (under mu).
func (f *flow) holding() {
	if f.paced && !f.sampleHeld {
		// The window fills: the page's pace is measured from now.
		f.sampleAt, f.sampleAcked, f.sampleHeld = f.now(), f.acked, true
	}
	f.held = true
}

func (f *flow) wrote(n int) {
	f.mu.Lock()
	// Timed only when the page has drawn everything before it (an echo,
	// a prompt): a write behind others times their drawing too.
	if f.paced && f.probeEnd == 0 && f.sent == f.acked {
		f.probeEnd, f.probeAt = f.sent+int64(n), f.now()
	}
	f.sent += int64(n)
	f.mu.Unlock()
}

func (f *flow) ack(n int64) {
	f.mu.Lock()
	// Capped, not dropped: an ack past what was counted (a count that
	// lagged its write) is still the page's progress.
	n = min(n, f.sent)
	if n > f.acked {
		f.acked = n
	}
	f.acking = true
	set := f.pace()
	f.mu.Unlock()
	f.cond.Broadcast()
	if set {
		f.tell()
	}
}

// pace moves a paced window after an ack, and reports whether it moved.
func (f *flow) pace() bool {
	if !f.paced {
		return false
	}
	now := f.now()
	if f.probeEnd != 0 && f.acked >= f.probeEnd {
		if d := now.Sub(f.probeAt); f.rtt == 0 || d < f.rtt {
			f.rtt = max(d, time.Millisecond)
		}
		f.probeEnd = 0
	}
	if f.sampleAt.IsZero() {
		f.sampleAt, f.sampleAcked, f.sampleHeld, f.held = now, f.acked, false, false
		return false
	}
	span := now.Sub(f.sampleAt)
	if span < max(sampleEvery, 2*f.rtt) {
		return false
	}
	valid := f.sampleHeld && f.held
	drawn := f.acked - f.sampleAcked
	// The next sample starts held if the window held output back up to
	// this ack, which has just made room.
	f.sampleAt, f.sampleAcked, f.sampleHeld, f.held = now, f.acked, f.held, false
	if !valid {
		return false
	}
	// The fastest of the latest samples: a page draws in bursts (frames,
	// garbage collection), and a window cut by one slow sample held a
	// fast page back for the next.
	copy(f.rates[1:], f.rates[:])
	f.rates[0] = float64(drawn) / span.Seconds()
	f.nrates = min(f.nrates+1, len(f.rates))
	rate := 0.0
	for _, r := range f.rates[:f.nrates] {
		rate = max(rate, r)
	}
	w := int64(rate * (paceTarget + f.rtt).Seconds())
	// At most four times as large at once: a burst of acks after a
	// pause (a page in the background) is not the page's pace.
	w = min(max(w, minWindow), AckWindow, 4*f.window)
	if w == f.window {
		return false
	}
	f.window = w
	return true
}

// tell passes the window to the host's side: the page's while it paces
// its acks, else AckWindow.
func (f *flow) tell() {
	if f.setWindow == nil {
		return
	}
	f.winMu.Lock()
	defer f.winMu.Unlock()
	f.mu.Lock()
	w := f.window // the newest: two acks may race to here
	if !f.acking || !f.paced {
		w = AckWindow
	}
	f.mu.Unlock()
	f.setWindow(int(w))
}

// attach starts counting for a page that has drawn from bytes; paced
// pages start with a small window, sized as they draw.
func (f *flow) attach(from int64, acks, paced bool) {
	f.mu.Lock()
	f.acked, f.acking, f.paced = from, acks, acks && paced
	f.window = AckWindow
	if f.paced {
		f.window = startWindow
	}
	f.sampleAt, f.sampleHeld, f.held, f.probeEnd, f.rtt, f.nrates = time.Time{}, false, false, 0, 0, 0
	f.mu.Unlock()
	f.cond.Broadcast()
	f.tell()
}

// detach lets output run while no page is there to ack it.
func (f *flow) detach() {
	f.mu.Lock()
	f.acking = false
	f.mu.Unlock()
	f.cond.Broadcast()
	f.tell()
}

func (f *flow) end() {
	f.mu.Lock()
	f.done = true
	f.mu.Unlock()
	f.cond.Broadcast()
}

func (h *Terminals) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	// Refuse a foreign origin before authenticating, so a hijacking page
	// learns nothing (not even whether the cookie is valid).
	if !h.originOK(r) {
		gateway.WriteError(w, http.StatusForbidden, "forbidden", "cross-origin terminal sockets are refused")
		return
	}
	q := r.URL.Query()
	resume, from, seq, err := resumeParams(q)
	if err != nil {
		gateway.WriteError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	if h.cfg.Handshake != nil && !h.cfg.Handshake(w, r) {
		return
	}
	who, ok := h.cfg.Authorize(w, r, id)
	if !ok {
		return
	}
	cols, rows := dim(q.Get("cols"), 80), dim(q.Get("rows"), 24)
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{OriginPatterns: h.cfg.OriginPatterns})
	if err != nil {
		return // Accept answered
	}
	// readMessage bounds each message itself: coder/websocket's own limit
	// closes the socket, and with it the shell and whatever the user had
	// running, over one message too long (a paste from a page that sends
	// it in one).
	ws.SetReadLimit(-1)
	log := h.cfg.Logger.With("host", id, "caller", who.Name)
	acks, paced := q.Get("ack") == "1" || q.Get("ack") == ackPaced, q.Get("ack") == ackPaced
	if resume != "" {
		h.resume(ws, id, who.ID, resume, from, seq, cols, rows, acks, paced, log)
		return
	}
	// While the host starts the shell the page hears from the gateway, and
	// a page found gone ends the start (page's cause).
	page, pageGone := context.WithCancelCause(context.Background())
	noted := h.noteStarting(ws, pageGone)
	t, err := h.start(r, page, id, who, cols, rows, q.Get("keep") == "1", log)
	noted()
	pageGone(nil)
	if err != nil {
		b, _ := json.Marshal(control{Type: "error", Message: err.Error()})
		_ = ws.Write(r.Context(), websocket.MessageText, b)
		_ = ws.Close(websocket.StatusInternalError, "spawn failed")
		return
	}
	a := newAttachment(ws, seq)
	a.live = true // nothing to replay: the output copy starts below
	if t.id != "" {
		// Before any output: the page must know what resumes it.
		b, _ := json.Marshal(control{Type: "session", ID: t.id, KeepMs: h.cfg.Keep.Milliseconds()})
		if err := a.write(websocket.MessageText, b); err != nil {
			// No page knows its id, so none can resume it: it ends
			// with this page, not kept for Keep holding its shell and
			// a place in its caller's bound for nobody.
			log.Info("terminal page gone before it was told the terminal's id; not kept", "terminal", t.id, "err", err)
			h.unkeep(t)
			a.stop(stopGone)
		}
	}
	t.fl.attach(0, acks, paced)
	t.attach(a)
	t.run()
	h.serveAttachment(t, a, log)
	if t.id == "" {
		// A terminal that ends with its page has ended by now, or is
		// ending: the request lasts as long as it, as it always has.
		<-t.finished
	}
}

// noteStarting tells ws's page, every few seconds while the host starts
// its shell, that the gateway waits for the host ({"type":"starting"}):
// the page takes 20 s without a word for a lost connection, and said
// "connection lost" while the start waited, never told the host had not
// answered. A note that cannot be written means the page has gone, which
// ends the start (gone). stop ends the notes and waits for them; it is
// called before anything else is written to ws.
func (h *Terminals) noteStarting(ws *websocket.Conn, gone context.CancelCauseFunc) (stop func()) {
	every := min(h.cfg.Ping/2, 4*time.Second)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		m, _ := json.Marshal(control{Type: "starting"})
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			wctx, wcancel := context.WithTimeout(context.Background(), every)
			err := ws.Write(wctx, websocket.MessageText, m)
			wcancel()
			if err != nil {
				gone(fmt.Errorf("the page went away while the host started the shell: %w", err))
				return
			}
		}
	}()
	return func() { close(quit); <-done }
}

// resumeParams reads ?resume=ID&from=N&seq=S.
func resumeParams(q url.Values) (id string, from, seq int64, err error) {
	num := func(k string) (int64, error) {
		v := q.Get(k)
		if v == "" {
			return 0, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%s=%q: want a count of bytes or a sequence number, 0 or more", k, v)
		}
		return n, nil
	}
	if from, err = num("from"); err != nil {
		return "", 0, 0, err
	}
	if seq, err = num("seq"); err != nil {
		return "", 0, 0, err
	}
	id = q.Get("resume")
	if id != "" && !validTermID(id) {
		return "", 0, 0, errors.New("resume: not a terminal's id; open a new terminal without it")
	}
	return id, from, seq, nil
}

// resume attaches ws to the kept terminal id, replaying what its page
// missed from offset from.
func (h *Terminals) resume(ws *websocket.Conn, host, caller, id string, from, seq int64, cols, rows int, acks, paced bool, log *slog.Logger) {
	h.mu.Lock()
	t := h.kept[id]
	h.mu.Unlock()
	// Another caller's, or another host's, is no more there than an
	// expired one: an id proves nothing without the caller's own login.
	if t != nil && t.host == host && t.caller == caller {
		t = h.afterEndingSent(t, id)
	}
	if t == nil || t.host != host || t.caller != caller {
		reason := "this terminal has ended; open a new one"
		if why := h.goneWhy(id, host, caller); why != "" {
			reason = closeReason(why)
		}
		log.Info("terminal resume refused: no such terminal", "terminal", id, "why", reason)
		_ = ws.Close(StatusNoTerminal, reason)
		return
	}
	a := newAttachment(ws, seq)
	if !t.attach(a) {
		log.Info("terminal resume refused: a newer page has it", "terminal", id)
		_ = ws.Close(StatusStale, "a newer page has this terminal")
		return
	}
	if rz, ok := t.p.(hostgate.Resizer); ok {
		_ = rz.Resize(cols, rows) // the new page's size; a size change redraws full-screen programs
	}
	t.replay(a, from, acks, paced)
	log.Info("terminal resumed", "terminal", id, "from", from)
	h.serveAttachment(t, a, log)
}

// afterEndingSent is kept terminal t (id) for a resume once the page its
// ending is being sent to, if any, is done with its close: nil when that
// page had the ending (it answered the close, and t was forgotten). A
// resume in that window got the ending a second time (7 of 90 in a
// soak), and once the close was unanswered, the page's own resume could
// find t forgotten.
func (h *Terminals) afterEndingSent(t *term, id string) *term {
	t.mu.Lock()
	prev := t.endingTo
	if prev == nil && t.end != nil {
		prev = t.att // its ending under way, not yet being written
	}
	t.mu.Unlock()
	if prev == nil {
		return t
	}
	// Bounded by the ending's write (closeWait) and the close handshake;
	// the timer only guards against a page that holds both.
	wait := time.NewTimer(2*closeWait + 10*time.Second)
	defer wait.Stop()
	select {
	case <-prev.told:
	case <-wait.C:
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.kept[id] != t {
		return nil
	}
	return t
}

// serveAttachment carries input and control from a's page until it goes,
// another page takes the terminal, or the terminal ends; then closes the
// socket the way that says which.
func (h *Terminals) serveAttachment(t *term, a *attachment, log *slog.Logger) {
	defer close(a.told)
	var wg sync.WaitGroup
	// Reads are not bound to a context that ends first: coder/websocket
	// closes the socket when a read's context ends, and a terminal ended
	// from outside still owes the page its reason. The read ends when the
	// socket closes below.
	rctx, rcancel := context.WithCancel(context.Background())
	defer rcancel()
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer t.detach(a)
		buf := make([]byte, MaxMessage+1)
		base, _ := t.in.counts() // input put before this page's: not the page's to count
		blocked := func(on bool) {
			if !on {
				a.inputTaken.Store(time.Now().UnixNano()) // before the flag: the pinger reads them the other way round
			}
			a.inputBlocked.Store(on)
			if on && a.noting.CompareAndSwap(false, true) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					h.noteInputWait(t, a, base)
				}()
			}
		}
		for {
			typ, b, err := readMessage(rctx, a.ws, buf)
			if errors.Is(err, errTooBig) {
				t.touch()
				log.Info("terminal message dropped", "err", err)
				m, _ := json.Marshal(control{Type: "error", Message: err.Error()})
				if a.write(websocket.MessageText, m) != nil {
					return
				}
				continue
			}
			if err != nil {
				return
			}
			t.touch()
			if typ == websocket.MessageBinary {
				if !t.in.put(b, a.done, blocked) {
					return
				}
				continue
			}
			if applyControl(b, t.p, t.fl) {
				m, _ := json.Marshal(control{Type: "pong"})
				if a.write(websocket.MessageText, m) != nil {
					return
				}
			}
		}
	}()
	// Keepalive and liveness: a ping once the socket has been quiet for
	// half the interval, so no gap passes the interval.
	go func() {
		defer wg.Done()
		tick := time.NewTicker(h.cfg.Ping / 2)
		defer tick.Stop()
		for {
			select {
			case <-a.done:
				return
			case <-tick.C:
			}
			start := time.Now()
			if start.Sub(time.Unix(0, a.lastWrite.Load())) < h.cfg.Ping/2 {
				continue
			}
			pctx, pcancel := context.WithTimeout(a.wctx, h.cfg.Ping)
			err := a.ws.Ping(pctx)
			pcancel()
			if h.cfg.testHookPinged != nil {
				h.cfg.testHookPinged(err)
			}
			if err == nil {
				continue
			}
			select {
			case <-a.done:
				return
			default:
			}
			// Not proof the page is gone: output went out meanwhile (a
			// dead page fails those writes), or the pong waits behind
			// input past what the inbox holds for a shell that has not
			// taken it, or did for some of the wait (the reader reads
			// the pong only after it, so it may come just too late; and
			// a shell reading a long paste slowly leaves the reader
			// waiting most of the time, not at the instant the wait
			// ends).
			if a.inputBlocked.Load() || time.Unix(0, a.inputTaken.Load()).After(start) ||
				time.Unix(0, a.lastWrite.Load()).After(start) || a.writing.Load() > 0 {
				continue
			}
			log.Info("terminal page stopped answering pings", "err", err)
			t.detach(a)
			return
		}
	}()
	<-a.done
	switch a.why {
	case stopEnded:
		t.mu.Lock()
		t.endingTo = a
		t.mu.Unlock()
		end := t.ending()
		if end.msg != nil {
			// An output write stuck on a page that does not read holds
			// wmu until its own timeout (pageWriteTimeout): it is given
			// up after closeWait instead, as Close gives up a taken
			// page's, so that the terminal's end, and with it the
			// gateway's shutdown, does not wait on that page (9.6 s of a
			// SIGTERM's drain in a soak, up to the write's 30 s).
			cut := time.AfterFunc(closeWait, a.stopWrites)
			a.wmu.Lock()
			cut.Stop()
			wctx, wcancel := context.WithTimeout(context.Background(), closeWait)
			_ = a.ws.Write(wctx, websocket.MessageText, end.msg)
			wcancel()
			a.wmu.Unlock()
		}
		if err := a.ws.Close(websocket.StatusNormalClosure, end.reason); err == nil || t.id == "" || end.msg == nil {
			t.h.forget(t) // the page has the ending: nothing is left to resume
		} else {
			// The page did not answer the close: it may never have
			// read the ending (its network dropped as it was sent), and
			// its resume was told the terminal was gone (4004), its exit
			// code lost (29 of 90 in a soak). A kept terminal keeps the
			// ending for it, as one that ended while its page was away.
			t.log.Info("terminal page did not answer the close of its ending; kept for its resume", "err", err, "keep", t.h.cfg.Keep)
			t.detach(a)
		}
	case stopTaken:
		// Close waits at most 5 s for a write stuck on this page, then
		// closes the socket under it.
		_ = a.ws.Close(StatusTaken, "this terminal was opened in another page")
	default:
		_ = a.ws.CloseNow()
	}
	a.stopWrites()
	rcancel() // a peer that never answers the close: the read ends anyway
	wg.Wait()
}

// Close codes the page acts on: StatusTaken and StatusStale end a page's
// attempts to resume (another page has the terminal), StatusNoTerminal
// says the terminal has ended (or expired) and a new one is needed; its
// reason says why when the gateway closed the terminal while its page
// was away (past Config.Keep, MaxKept or MaxKeptAll).
const (
	StatusTaken      websocket.StatusCode = 4001
	StatusStale      websocket.StatusCode = 4009
	StatusNoTerminal websocket.StatusCode = 4004
)

// attachment is one page's socket on a terminal.
type attachment struct {
	ws  *websocket.Conn
	seq int64 // the page's attempt number: an older attempt never takes over a newer
	// live: the output copy writes to the page (under term.out). A
	// resuming page is attached before its replay is sent, and is live
	// once it has been: output before then reaches it in the replay.
	live bool
	wmu  sync.Mutex
	// Writes are not bound to the terminal: coder/websocket closes the
	// socket when a write's context ends, even one whose bytes are already
	// out, and a terminal ended from outside still owes the page its
	// reason. stopWrites ends a write stuck on a page that does not read.
	wctx       context.Context
	stopWrites context.CancelFunc
	// The pinger's view of the socket: when a frame last went out,
	// whether a write is under way, whether the reader waits for room in
	// a full inbox (a shell that has not taken inboxMax of input), which
	// leaves the page's pongs unread, and when it last got that room.
	lastWrite    atomic.Int64 // UnixNano
	writing      atomic.Int32
	inputBlocked atomic.Bool
	inputTaken   atomic.Int64 // UnixNano
	noting       atomic.Bool  // noteInputWait runs

	once sync.Once
	why  stopReason // set before done closes
	done chan struct{}
	// told closes when serveAttachment is done with the page: its
	// ending sent and the close handshake over (or given up).
	told chan struct{}
}

type stopReason int

const (
	stopGone  stopReason = iota // the page went (or its socket failed)
	stopTaken                   // another page resumed the terminal
	stopEnded                   // the terminal ended
)

func newAttachment(ws *websocket.Conn, seq int64) *attachment {
	a := &attachment{ws: ws, seq: seq, done: make(chan struct{}), told: make(chan struct{})}
	a.wctx, a.stopWrites = context.WithCancel(context.Background())
	a.lastWrite.Store(time.Now().UnixNano())
	return a
}

// pageWriteTimeout bounds one write to a page: a page that has not taken
// it by then is gone (its output goes on to the replay buffer). A var for
// tests.
var pageWriteTimeout = 30 * time.Second

// closeWait is how long a page's socket is given to take a write before
// its close (coder/websocket's own wait in Close).
const closeWait = 5 * time.Second

func (a *attachment) write(typ websocket.MessageType, b []byte) error {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	a.writing.Add(1)
	defer a.writing.Add(-1)
	wctx, wcancel := context.WithTimeout(a.wctx, pageWriteTimeout)
	defer wcancel()
	err := a.ws.Write(wctx, typ, b)
	a.lastWrite.Store(time.Now().UnixNano())
	return err
}

// stop ends the attachment for why; the first reason holds. A page gone
// gets no more writes: one stuck on it ends now (coder/websocket closes
// the socket under it), so the terminal's output goes on to its replay
// buffer. A page replaced or told the ending keeps its socket until the
// close frame is out.
func (a *attachment) stop(why stopReason) {
	a.once.Do(func() {
		a.why = why
		if why == stopGone {
			a.stopWrites()
		}
		close(a.done)
	})
}

// closeReason is s cut to what a close frame carries (123 bytes), at a
// character's start, and made valid UTF-8: a host's words (a disconnect
// message, a signal's name) need not be, and a browser fails a socket
// whose close reason is not (RFC 6455 8.1), which its page took for a
// dropped network and resumed, to be told the same ending again.
func closeReason(s string) string {
	const max = 123
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= max {
		return s
	}
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// noteInputWait tells a's page, every few seconds from when its reader
// first waits for room in the inbox until the shell has taken all the
// input held, that its input waits for the shell
// ({"type":"inputwait","taken":T}), and then that it no longer does
// ({"type":"inputdone","taken":T}); T counts the bytes of this page's
// input passed on to the shell, from which the page knows how much of
// what it sent still waits. The page's own pings wait unread behind that
// input meanwhile: the page took the silence for a lost connection,
// dropped the socket and with it the rest of a paste (of 4 MiB into a
// shell in `sleep 35`, 1.4 MB reached it); and a person saw a terminal
// that took no keys, and nothing saying why. base is what the inbox had
// been put when the page came. a.noting is set while it runs.
func (h *Terminals) noteInputWait(t *term, a *attachment, base int64) {
	// Within the page's 10 s of quiet before it asks; a reader held for
	// less (a shell reading a paste as it comes) says nothing.
	every := min(h.cfg.Ping/2, 4*time.Second)
	tick := time.NewTicker(min(every/4, 250*time.Millisecond))
	defer tick.Stop()
	note := func(typ string, passed int64) bool {
		// taken even when 0: a page tells a gateway that counts from
		// one that does not (its inputwait has no taken).
		m, _ := json.Marshal(struct {
			Type  string `json:"type"`
			Taken int64  `json:"taken"`
		}{typ, max(passed-base, 0)})
		if a.write(websocket.MessageText, m) != nil {
			t.detach(a) // as a failed output write does: the page is gone
			return false
		}
		return true
	}
	told, last := false, time.Now()
	for {
		select {
		case <-a.done:
			return
		case <-tick.C:
		}
		put, passed := t.in.counts()
		if a.inputBlocked.Load() || passed < put {
			if time.Since(last) >= every {
				if !note("inputwait", passed) {
					return
				}
				told, last = true, time.Now()
			}
			continue
		}
		if told && !note("inputdone", passed) {
			return
		}
		told = false
		// The reader may have waited again just before noting was
		// cleared, and not started another: go on for it then.
		a.noting.Store(false)
		if !a.inputBlocked.Load() || !a.noting.CompareAndSwap(false, true) {
			return
		}
		last = time.Now()
	}
}

// applyControl acts on a control message from the page and reports
// whether it asks for a pong. One it cannot read, or of a type it does not
// know, is ignored: the page may be newer.
func applyControl(b []byte, p hostgate.Process, fl *flow) (pong bool) {
	var c control
	if json.Unmarshal(b, &c) != nil {
		return false
	}
	switch c.Type {
	case "resize":
		if rz, ok := p.(hostgate.Resizer); ok && c.Cols > 0 && c.Rows > 0 && c.Cols <= 1000 && c.Rows <= 1000 {
			_ = rz.Resize(c.Cols, c.Rows)
		}
	case "ack":
		fl.ack(c.Bytes)
	case "ping":
		// The page's own check that the gateway still answers: the
		// socket's pings are invisible to it.
		return true
	}
	return false
}

// errTooBig is a message over MaxMessage, which readMessage dropped.
var errTooBig = fmt.Errorf("input dropped: a message of over %d KiB reached the terminal; send input in smaller messages", MaxMessage>>10)

// readMessage reads the next message into buf (MaxMessage+1 bytes long).
// A longer message is read to its end, dropped, and reported as
// errTooBig, so the socket stays usable.
func readMessage(ctx context.Context, ws *websocket.Conn, buf []byte) (websocket.MessageType, []byte, error) {
	typ, r, err := ws.Reader(ctx)
	if err != nil {
		return 0, nil, err
	}
	n, err := io.ReadFull(r, buf)
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return typ, buf[:n], nil
	case err != nil:
		return 0, nil, err
	}
	// Discarded, not buffered: what it costs is the time to read it.
	if _, err := io.Copy(io.Discard, r); err != nil {
		return 0, nil, err
	}
	return typ, nil, errTooBig
}

// originOK allows requests without Origin (non-browser clients carry a
// bearer token, which a foreign page cannot), the gateway's own origin, and
// configured patterns (matched against the origin's host like
// coder/websocket does).
func (h *Terminals) originOK(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	for _, p := range h.cfg.OriginPatterns {
		if ok, _ := path.Match(strings.ToLower(p), strings.ToLower(u.Host)); ok {
			return true
		}
	}
	return false
}

func dim(s string, def int) int {
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || n > 1000 {
		return def
	}
	return n
}
