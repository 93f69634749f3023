// Package webterm is the browser terminal's server side: GET
// /v1/hosts/{id}/pty upgrades to a WebSocket that carries one PTY session on
// the host. The gateway is the SSH client (with its own certificate), so the
// browser never holds SSH keys.
//
// Wire format: binary messages are terminal bytes in both directions; text
// messages are JSON control messages — {"type":"resize","cols":C,"rows":R},
// {"type":"ack","bytes":N} (see AckWindow) and {"type":"ping"} from the
// browser, {"type":"exit","code":N}, {"type":"error","message":M} and
// {"type":"pong"} (the answer to a ping) from the gateway. A message may
// carry at most MaxMessage bytes: the page sends a long paste in several. A larger one is dropped whole and
// answered with an error message; the terminal goes on.
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
	// itself when it returns false. name identifies the caller in the
	// host's logs (the token's name).
	Authorize func(w http.ResponseWriter, r *http.Request, id string) (name string, ok bool)
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
	// Logger; nil discards.
	Logger *slog.Logger
	// Idle closes a terminal with no input or output for this long; 0
	// means 1 hour.
	Idle time.Duration
	// Ping is the longest the socket goes without a frame to the page;
	// 0 means PingInterval. See PingInterval.
	Ping time.Duration
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

// Handler serves GET /v1/hosts/{id}/pty.
func Handler(cfg Config) http.Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Idle == 0 {
		cfg.Idle = time.Hour
	}
	if cfg.Ping == 0 {
		cfg.Ping = PingInterval
	}
	return &handler{cfg: cfg}
}

type handler struct{ cfg Config }

// control is a text message.
type control struct {
	Type    string `json:"type"`
	Cols    int    `json:"cols,omitempty"`
	Rows    int    `json:"rows,omitempty"`
	Code    *int   `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	Bytes   int64  `json:"bytes,omitempty"` // ack: output bytes the page has drawn
}

// AckWindow is how far the terminal's output may run ahead of what the
// page has drawn, when the page acknowledges ({"type":"ack","bytes":N},
// N the output bytes drawn so far; it says so with ?ack=1 on the URL). The socket and the browser buffered
// whatever a command printed: after Ctrl-C on `yes` another 18 MB arrived
// and the prompt came back 6 to 8 s later. Reading stops past the window,
// and the host's PTY holds the command back. A page that never acks is
// not held back.
const AckWindow = 1 << 20

// flow is the output's progress against the page's acks.
type flow struct {
	mu     sync.Mutex
	cond   *sync.Cond
	sent   int64
	acked  int64
	acking bool // the page has acked once: it does flow control
	done   bool
}

func newFlow() *flow {
	f := &flow{}
	f.cond = sync.NewCond(&f.mu)
	return f
}

// wait blocks while the page is more than AckWindow behind; false once the
// session is over.
func (f *flow) wait() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.acking && f.sent-f.acked > AckWindow && !f.done {
		f.cond.Wait()
	}
	return !f.done
}

func (f *flow) wrote(n int) {
	f.mu.Lock()
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
	f.mu.Unlock()
	f.cond.Broadcast()
}

func (f *flow) end() {
	f.mu.Lock()
	f.done = true
	f.mu.Unlock()
	f.cond.Broadcast()
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	// Refuse a foreign origin before authenticating, so a hijacking page
	// learns nothing (not even whether the cookie is valid).
	if !h.originOK(r) {
		gateway.WriteError(w, http.StatusForbidden, "forbidden", "cross-origin terminal sockets are refused")
		return
	}
	if h.cfg.Handshake != nil && !h.cfg.Handshake(w, r) {
		return
	}
	name, ok := h.cfg.Authorize(w, r, id)
	if !ok {
		return
	}
	cols, rows := dim(r.URL.Query().Get("cols"), 80), dim(r.URL.Query().Get("rows"), 24)
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{OriginPatterns: h.cfg.OriginPatterns})
	if err != nil {
		return // Accept answered
	}
	// readMessage bounds each message itself: coder/websocket's own limit
	// closes the socket, and with it the shell and whatever the user had
	// running, over one message too long (a paste from a page that sends
	// it in one).
	ws.SetReadLimit(-1)
	log := h.cfg.Logger.With("host", id, "caller", name)
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	if h.cfg.Bind != nil {
		bound, done := h.cfg.Bind(ctx, r, id)
		defer done()
		ctx = bound // cancel still ends it: bound is ctx's child
	}
	p, release, err := h.cfg.Spawn(ctx, id, name, Shell, &hostgate.PTY{Term: "xterm-256color", Cols: cols, Rows: rows})
	if err != nil {
		log.Info("terminal spawn failed", "err", err)
		b, _ := json.Marshal(control{Type: "error", Message: "cannot start a terminal on " + id + ": " + err.Error()})
		_ = ws.Write(ctx, websocket.MessageText, b)
		_ = ws.Close(websocket.StatusInternalError, "spawn failed")
		return
	}
	defer release()
	log.Info("terminal opened", "cols", cols, "rows", rows)
	h.bridge(ctx, cancel, ws, p, r.URL.Query().Get("ack") == "1", log)
}

// bridge copies between the socket and the process until either ends.
func (h *handler) bridge(ctx context.Context, cancel context.CancelCauseFunc, ws *websocket.Conn, p hostgate.Process, acks bool, log *slog.Logger) {
	var (
		wg     sync.WaitGroup
		wmu    sync.Mutex // one writer at a time on the socket
		active = make(chan struct{}, 1)
		// The pinger's view of the socket: when a frame last went out,
		// whether a write is under way, and whether the input copy is
		// stuck writing to a shell that does not read, which leaves the
		// page's pongs unread.
		lastWrite    atomic.Int64 // UnixNano
		writing      atomic.Int32
		inputBlocked atomic.Bool
	)
	lastWrite.Store(time.Now().UnixNano())
	touch := func() {
		select {
		case active <- struct{}{}:
		default:
		}
	}
	// Writes are not bound to ctx either: coder/websocket closes the
	// socket when a write's context ends, even one whose bytes are already
	// out, and a terminal ended from outside still owes the page its
	// reason. stopWrites ends a write stuck on a page that does not read,
	// once that reason is sent.
	wbase, stopWrites := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWrites()
	write := func(typ websocket.MessageType, b []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		writing.Add(1)
		defer writing.Add(-1)
		wctx, wcancel := context.WithTimeout(wbase, 30*time.Second)
		defer wcancel()
		err := ws.Write(wctx, typ, b)
		lastWrite.Store(time.Now().UnixNano())
		return err
	}
	// Terminal output → socket. A PTY merges stderr into stdout.
	fl := newFlow()
	// The page says it acks (?ack=1) before the first output: a flood
	// starts at once, and a window that began with the first ack came
	// after megabytes.
	fl.acking = acks
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 32<<10)
		for {
			if !fl.wait() {
				return
			}
			n, err := p.Stdout().Read(buf)
			if n > 0 {
				touch()
				fl.wrote(n) // before the write: the page may ack it at once
				if werr := write(websocket.MessageBinary, buf[:n]); werr != nil {
					cancel(nil)
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	// Socket → terminal input and control. Reads are not bound to ctx:
	// coder/websocket closes the socket when a read's context ends, and a
	// terminal ended from outside still owes the page its reason. The read
	// ends when the socket closes below.
	rctx, rcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer rcancel()
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer cancel(nil)
		buf := make([]byte, MaxMessage+1)
		for {
			typ, b, err := readMessage(rctx, ws, buf)
			if errors.Is(err, errTooBig) {
				touch()
				log.Info("terminal message dropped", "err", err)
				m, _ := json.Marshal(control{Type: "error", Message: err.Error()})
				if write(websocket.MessageText, m) != nil {
					return
				}
				continue
			}
			if err != nil {
				return
			}
			touch()
			if typ == websocket.MessageBinary {
				inputBlocked.Store(true)
				_, err := p.Stdin().Write(b)
				inputBlocked.Store(false)
				if err != nil {
					return
				}
				continue
			}
			if applyControl(b, p, fl) {
				m, _ := json.Marshal(control{Type: "pong"})
				if write(websocket.MessageText, m) != nil {
					return
				}
			}
		}
	}()
	// Idle timeout.
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTimer(h.cfg.Idle)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-active:
				t.Reset(h.cfg.Idle)
			case <-t.C:
				log.Info("terminal idle, closing")
				// A cause, so the page says why: its shell is gone.
				cancel(fmt.Errorf("no input or output for %v", h.cfg.Idle))
				return
			}
		}
	}()

	// Keepalive and liveness: a ping once the socket has been quiet for
	// half the interval, so no gap passes the interval.
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(h.cfg.Ping / 2)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			start := time.Now()
			if start.Sub(time.Unix(0, lastWrite.Load())) < h.cfg.Ping/2 {
				continue
			}
			// On wbase, not ctx: a ping write cut by ctx would close the
			// socket before the page is told why its terminal ended.
			pctx, pcancel := context.WithTimeout(wbase, h.cfg.Ping)
			err := ws.Ping(pctx)
			pcancel()
			if err == nil || ctx.Err() != nil {
				continue
			}
			// Not proof the page is gone: output went out meanwhile (a
			// dead page fails those writes), or the pong waits behind
			// input the shell has not taken yet.
			if time.Unix(0, lastWrite.Load()).After(start) || writing.Load() > 0 || inputBlocked.Load() {
				continue
			}
			log.Info("terminal page stopped answering pings, closing", "err", err)
			cancel(nil)
			return
		}
	}()

	werr := p.Wait()
	code := hostgate.ExitCode(werr)
	var ee *hostgate.ExitError
	// The close's reason is what the page shows last: "exited" only when
	// the shell did.
	reason := "terminal closed"
	if cause := context.Cause(ctx); ctx.Err() != nil && !errors.Is(cause, context.Canceled) {
		// Ended from outside (a revoked token): say why before closing,
		// on a context of its own since ctx is over.
		b, _ := json.Marshal(control{Type: "error", Message: "terminal closed: " + cause.Error()})
		reason = closeReason("terminal closed: " + cause.Error())
		wmu.Lock()
		wctx, wcancel := context.WithTimeout(wbase, 5*time.Second)
		_ = ws.Write(wctx, websocket.MessageText, b)
		wcancel()
		wmu.Unlock()
	} else if werr != nil && !errors.As(werr, &ee) && ctx.Err() == nil {
		b, _ := json.Marshal(control{Type: "error", Message: werr.Error()})
		_ = write(websocket.MessageText, b)
	} else if ctx.Err() == nil {
		b, _ := json.Marshal(control{Type: "exit", Code: &code})
		_ = write(websocket.MessageText, b)
		reason = "exited"
	}
	cancel(nil)
	stopWrites()
	_ = ws.Close(websocket.StatusNormalClosure, reason)
	rcancel() // a peer that never answers the close: the read ends anyway
	_ = p.Kill(hostgate.SIGKILL)
	fl.end() // an output copy held back by the window
	wg.Wait()
	log.Info("terminal closed", "exit", code)
}

// closeReason is s cut to what a close frame carries (123 bytes), at a
// character's start.
func closeReason(s string) string {
	const max = 123
	if len(s) <= max {
		return s
	}
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
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
func (h *handler) originOK(r *http.Request) bool {
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
