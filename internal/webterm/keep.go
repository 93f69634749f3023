package webterm

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/hostgate/hostgate"
)

// DefaultKeep is how long a terminal whose page went away, without the
// shell exiting, keeps running for the page to come back: a dropped
// network, a laptop asleep, a reload. Config.Keep sets another.
const DefaultKeep = 5 * time.Minute

// DefaultMaxKept bounds the terminals one caller may have kept without a
// page at once, those whose shell ended meanwhile included; past it one
// whose shell ended is dropped first, else the one left longest ends.
const DefaultMaxKept = 8

// DefaultMaxKeptAll bounds the terminals kept without a page across all
// callers, as DefaultMaxKept bounds one caller's: each holds a shell on
// its host and up to Replay bytes here, and callers (tokens) are as many
// as are made, so the per-caller bound alone left the gateway's memory
// without one (256 of them hold at most 64 MiB of replay). Past it the
// caller keeping the most loses one, as past DefaultMaxKept: a caller
// with many logins' worth ends its own, not another's only one.
const DefaultMaxKeptAll = 256

// DefaultReplay is what a kept terminal holds of its latest output for
// its page to catch up from: what was in flight when the page went and
// what came while it was away.
const DefaultReplay = 256 << 10

// Terminals serves the terminal socket and owns the terminals it starts,
// which may outlive their requests (Config.Keep).
type Terminals struct {
	cfg Config

	mu     sync.Mutex
	closed bool
	all    map[*term]struct{}
	kept   map[string]*term // resumable terminals by id
	// gone says why the gateway ended a kept terminal while its page was
	// away, by id, for that page's resume (for goneFor).
	gone map[string]goneTerm
}

// goneTerm is why a kept terminal the gateway ended without its page
// ended: its page's resume is told that, not only that it has ended,
// which it took for its shell's exit (a laptop asleep with more terminal
// tabs than MaxKept, or longer than Config.Keep).
type goneTerm struct {
	host, caller string // whose: no one else's resume hears of it
	why          string
	at           time.Time
}

// A reason is kept for goneFor, long enough for a laptop asleep
// overnight, and for the latest maxGonePer terminals of each caller: a
// page that comes back later hears only that its terminal ended. Past
// maxGone in all, the caller holding the most loses its oldest, so that a
// caller (a token) opening and abandoning kept terminals in a loop pushes
// out its own reasons, not another's.
const (
	goneFor    = 24 * time.Hour
	maxGone    = 1024
	maxGonePer = 32
)

// bury notes why t, kept and forgotten, ended while its page was away.
func (h *Terminals) bury(t *term, why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	type holder struct {
		n      int
		oldest string
	}
	held := make(map[string]*holder)
	for id, g := range h.gone {
		if now.Sub(g.at) > goneFor {
			delete(h.gone, id)
			continue
		}
		c := held[g.caller]
		if c == nil {
			c = &holder{}
			held[g.caller] = c
		}
		c.n++
		if c.oldest == "" || g.at.Before(h.gone[c.oldest].at) {
			c.oldest = id
		}
	}
	var drop *holder
	if c := held[t.caller]; c != nil && c.n >= maxGonePer {
		drop = c
	} else if len(h.gone) >= maxGone {
		for _, c := range held {
			if drop == nil || c.n > drop.n || c.n == drop.n && h.gone[c.oldest].at.Before(h.gone[drop.oldest].at) {
				drop = c
			}
		}
	}
	if drop != nil {
		delete(h.gone, drop.oldest)
	}
	h.gone[t.id] = goneTerm{host: t.host, caller: t.caller, why: why, at: now}
}

// goneWhy is why the kept terminal id of host and caller ended while its
// page was away, or "" when the gateway does not know (any longer).
func (h *Terminals) goneWhy(id, host, caller string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	g, ok := h.gone[id]
	if !ok || g.host != host || g.caller != caller || time.Since(g.at) > goneFor {
		return ""
	}
	return g.why
}

// Close ends every terminal, telling the pages that are there why, and
// waits for them. Later requests are refused.
func (h *Terminals) Close() {
	h.mu.Lock()
	h.closed = true
	ts := make([]*term, 0, len(h.all))
	for t := range h.all {
		ts = append(ts, t)
	}
	h.mu.Unlock()
	for _, t := range ts {
		t.mu.Lock()
		if t.grace != nil {
			t.grace.Stop() // nothing is left to expire
			t.grace = nil
		}
		t.mu.Unlock()
		t.cancel(errors.New("the gateway is shutting down"))
	}
	for _, t := range ts {
		<-t.finished
	}
	// And their pages told why: the gateway exits after this, and a page
	// whose close frame had not gone out yet (with one CPU, every time)
	// took the drop for the network's, came back to the restarted gateway
	// and said "the terminal ended while disconnected". A page that does
	// not answer the close is given up after 5 s (coder/websocket's
	// handshake wait), so this waits a little longer at most.
	giveUp := time.After(6 * time.Second)
	for _, t := range ts {
		if t.told == nil {
			continue
		}
		select {
		case <-t.told:
		case <-giveUp:
			return
		}
	}
}

// Stats counts the terminals running now: Open in all, Waiting of them
// kept with no page, for their pages to come back.
type Stats struct{ Open, Waiting int }

// Stats counts the terminals running now.
func (h *Terminals) Stats() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	var st Stats
	for t := range h.all {
		t.mu.Lock()
		if t.end == nil {
			st.Open++
			if t.att == nil && t.grace != nil {
				st.Waiting++
			}
		}
		t.mu.Unlock()
	}
	return st
}

// term is one terminal: a process on a host and, while a page has it, the
// page's socket.
type term struct {
	h            *Terminals
	id           string // what resumes it; "" when it ends with its page
	host, caller string // caller: its Caller's ID, who may resume it
	p            hostgate.Process
	ctx          context.Context
	cancel       context.CancelCauseFunc
	release      func()
	log          *slog.Logger
	fl           *flow
	active       chan struct{} // input or output: the idle timer starts over

	// out orders the output: what the replay buffer records and what
	// the page is sent, so a page that resumes gets each byte once.
	out  sync.Mutex
	ring *ring // nil when the terminal ends with its page

	mu       sync.Mutex
	att      *attachment
	seq      int64 // the latest attachment's
	detached time.Time
	grace    *time.Timer
	// leftBy is the page whose going started grace: a timer of an
	// earlier page's, firing as its Stop came too late, is not grace's.
	leftBy *attachment
	// forgotten: no longer resumable (forget), so a page's going arms
	// no grace: nothing would be resumed, and the timer would hold the
	// terminal and its replay buffer on, uncounted.
	forgotten bool
	end       *ending
	// endingTo is the attachment last sent the ending: a resume waits
	// until that page's close is over, which says whether it had the
	// ending (the terminal is forgotten) or not (kept for the resume).
	endingTo *attachment

	in       *inbox
	fed      chan struct{} // the input copy is done
	pumped   chan struct{} // the output copy is done
	finished chan struct{} // every goroutine is done and the host released
	// told is the page's attachment's when the terminal ended with one:
	// closed once that page has been told why (set before finished).
	told chan struct{}
}

// ending is what the page is told when the terminal ends.
type ending struct {
	msg    []byte // a control message, or nil
	reason string // the close frame's
}

func newTermID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func validTermID(s string) bool {
	b, err := base64.RawURLEncoding.DecodeString(s)
	return err == nil && len(b) == 16
}

// startTimeout bounds starting a terminal's shell: the SSH connection,
// the session channel, the pty and the shell. A host that completed the
// handshake but never confirmed the rest (hung, or hostile) kept the start
// waiting until the caller's token ended, the page long gone. A var for
// tests.
var startTimeout = 30 * time.Second

// start spawns the shell for a new terminal; keep asks for one its page
// can resume. page ending (the page went) ends the start too.
func (h *Terminals) start(r *http.Request, page context.Context, host string, who Caller, cols, rows int, keep bool, log *slog.Logger) (*term, error) {
	// The terminal's life is not the request's: a kept one outlives it.
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(r.Context()))
	bindDone := func() {}
	if h.cfg.Bind != nil {
		var bound context.Context
		bound, bindDone = h.cfg.Bind(ctx, r, host)
		ctx = bound // cancel still ends it: bound is ctx's child
	}
	t := &term{
		h: h, host: host, caller: who.ID, ctx: ctx, cancel: cancel, log: log, fl: newFlow(),
		active: make(chan struct{}, 1), in: newInbox(), fed: make(chan struct{}), pumped: make(chan struct{}), finished: make(chan struct{}),
	}
	if keep && h.cfg.Keep > 0 {
		t.id = newTermID()
		t.ring = newRing(h.cfg.Replay)
		t.log = log.With("terminal", t.id)
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		cancel(nil)
		bindDone()
		return nil, fmt.Errorf("cannot start a terminal on %s: the gateway is shutting down", host)
	}
	h.all[t] = struct{}{}
	if t.id != "" {
		h.kept[t.id] = t
	}
	h.mu.Unlock()
	// On the terminal's own context, which the shell lives by: ended
	// here only when the start does not finish.
	stopGone := context.AfterFunc(page, func() { cancel(context.Cause(page)) })
	late := time.AfterFunc(startTimeout, func() {
		cancel(fmt.Errorf("the host did not answer the terminal's start (its SSH session, pty and shell) within %v: it may be overloaded or hung; reload the page to try again", startTimeout))
	})
	p, release, err := h.cfg.Spawn(ctx, host, who.Name, Shell, &hostgate.PTY{Term: "xterm-256color", Cols: cols, Rows: rows})
	late.Stop()
	stopGone()
	if err == nil && ctx.Err() != nil {
		// Started as the wait ended: the shell, bound to ctx, is being
		// ended.
		_ = p.Kill(hostgate.SIGKILL)
		release()
		err = ctx.Err()
	}
	if err != nil && ctx.Err() != nil {
		// Why the wait ended, not the bare "context canceled" the
		// dial or the spawn answers.
		err = context.Cause(ctx)
		if h.cfg.Why != nil {
			err = errors.New(h.cfg.Why(err))
		}
	}
	if err != nil {
		log.Info("terminal spawn failed", "err", err)
		h.forget(t)
		cancel(nil)
		bindDone()
		close(t.finished) // for a Close that saw it
		return nil, fmt.Errorf("cannot start a terminal on %s: %w", host, err)
	}
	t.p = p
	if w, ok := p.(Windower); ok {
		t.fl.setWindow = w.SetOutputWindow
	}
	t.release = func() { release(); bindDone() }
	t.log.Info("terminal opened", "cols", cols, "rows", rows, "kept", t.id != "")
	return t, nil
}

// forget drops t from the terminals: it can no longer be resumed, and
// its grace, if running, is over.
func (h *Terminals) forget(t *term) {
	h.mu.Lock()
	delete(h.all, t)
	if t.id != "" && h.kept[t.id] == t {
		delete(h.kept, t.id)
	}
	h.mu.Unlock()
	t.mu.Lock()
	t.forgotten = true
	if t.grace != nil {
		// Armed by its page's reader as that page had the ending.
		t.grace.Stop()
		t.grace = nil
	}
	t.mu.Unlock()
}

// unkeep makes t, not yet run, no longer resumable, as forget does, but
// leaves it among the terminals that Close waits for: its page's going
// ends it, and its end forgets it.
func (h *Terminals) unkeep(t *term) {
	h.mu.Lock()
	if h.kept[t.id] == t {
		delete(h.kept, t.id)
	}
	h.mu.Unlock()
	t.mu.Lock()
	t.forgotten = true
	t.mu.Unlock()
}

func (t *term) touch() {
	select {
	case t.active <- struct{}{}:
	default:
	}
}

// run starts the terminal's own goroutines: the input and output
// copies, the idle timer, and the wait for the shell's end.
func (t *term) run() {
	go t.feed()
	go t.pump()
	idled := make(chan struct{})
	go func() {
		defer close(idled)
		timer := time.NewTimer(t.h.cfg.Idle)
		defer timer.Stop()
		for {
			select {
			case <-t.ctx.Done():
				return
			case <-t.active:
				timer.Reset(t.h.cfg.Idle)
			case <-timer.C:
				t.log.Info("terminal idle, closing")
				// A cause, so the page says why: its shell is gone.
				t.cancel(fmt.Errorf("no input or output for %v", t.h.cfg.Idle))
				return
			}
		}
	}()
	go func() {
		werr := t.p.Wait()
		// The last output reaches the page before the exit does; bounded,
		// as a page that does not read holds the copy.
		select {
		case <-t.pumped:
		case <-time.After(time.Second):
		}
		end := endingOf(t.ctx, werr, t.h.cfg.Why)
		t.cancel(nil)
		_ = t.p.Kill(hostgate.SIGKILL)
		t.fl.end() // an output copy held back by the window
		t.mu.Lock()
		t.end = end
		a := t.att
		// Kept with no page, the ending waits for one until the grace
		// runs out, with the output it left; kept with a page, the
		// attachment forgets it once the page has the ending.
		// A forgotten one waits for no page.
		waits := !t.forgotten && (t.grace != nil && a == nil || a != nil && t.id != "")
		t.mu.Unlock()
		if !waits {
			t.h.forget(t)
		}
		if a != nil {
			a.stop(stopEnded)
			t.told = a.told
		}
		<-t.pumped
		<-t.fed
		<-idled
		t.release()
		t.log.Info("terminal closed", "exit", hostgate.ExitCode(werr))
		close(t.finished)
	}()
}

// endingOf says how the terminal ended: "exited" only when the shell did.
func endingOf(ctx context.Context, werr error, why func(error) string) *ending {
	code := hostgate.ExitCode(werr)
	var ee *hostgate.ExitError
	switch cause := context.Cause(ctx); {
	case ctx.Err() != nil && !errors.Is(cause, context.Canceled):
		// Ended from outside (a revoked token, the idle timer).
		text := cause.Error()
		if why != nil {
			text = why(cause)
		}
		b, _ := json.Marshal(control{Type: "error", Message: "terminal closed: " + text})
		return &ending{msg: b, reason: closeReason("terminal closed: " + text)}
	case werr != nil && !errors.As(werr, &ee) && ctx.Err() == nil:
		// The shell's end went unseen (its connection was lost): the
		// close says why too, as one ended from outside does, so the
		// page's status line does not hang on which end came first.
		text := werr.Error()
		if text == "" {
			// The message is omitted when empty, and the page showed
			// "error: undefined".
			text = "the shell's end went unseen: its connection to the host was lost"
		}
		b, _ := json.Marshal(control{Type: "error", Message: text})
		return &ending{msg: b, reason: closeReason("terminal closed: " + text)}
	case ctx.Err() == nil && errors.As(werr, &ee) && ee.Signal != "":
		// The page said "exited (-1)" for a shell a signal ended: a
		// sandbox's shell the memory limit's OOM killer took, or a kill -9.
		b, _ := json.Marshal(control{Type: "exit", Code: &code, Signal: string(ee.Signal)})
		return &ending{msg: b, reason: closeReason("killed by signal " + string(ee.Signal))}
	case ctx.Err() == nil:
		b, _ := json.Marshal(control{Type: "exit", Code: &code})
		return &ending{msg: b, reason: "exited"}
	}
	return &ending{reason: "terminal closed"}
}

func (t *term) ending() *ending {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.end
}

// pump copies the terminal's output to its replay buffer and its page. A
// PTY merges stderr into stdout.
func (t *term) pump() {
	defer close(t.pumped)
	buf := make([]byte, 32<<10)
	for {
		m := t.fl.wait(len(buf))
		if m == 0 {
			return
		}
		n, err := t.p.Stdout().Read(buf[:m])
		if n > 0 {
			t.touch()
			t.out.Lock()
			if t.ring != nil {
				t.ring.add(buf[:n])
			}
			t.fl.wrote(n) // before the write: the page may ack it at once
			t.mu.Lock()
			a := t.att
			t.mu.Unlock()
			// A resuming page not yet replayed to gets this in its
			// replay, in order, and once.
			if a != nil && a.live && a.write(websocket.MessageBinary, buf[:n]) != nil {
				t.detach(a)
			}
			t.out.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// detach takes a off the terminal: a terminal that ends with its page
// ends; a kept one runs on for Config.Keep, or until another page
// resumes it.
func (t *term) detach(a *attachment) {
	t.mu.Lock()
	if t.att != a {
		t.mu.Unlock()
		a.stop(stopGone)
		return
	}
	t.att = nil
	kept := t.id != "" && !t.forgotten
	if kept {
		t.detached, t.leftBy = time.Now(), a
		t.grace = time.AfterFunc(t.h.cfg.Keep, func() { t.expire(a) })
	}
	ended := t.end != nil
	t.mu.Unlock()
	a.stop(stopGone)
	t.fl.detach()
	switch {
	case !kept:
		t.cancel(nil)
	case !ended:
		t.log.Info("terminal page gone; kept for it to come back", "keep", t.h.cfg.Keep)
		t.h.trim(t.caller)
	default:
		// Its ending, and its replay buffer, wait for the page: they
		// count against the bound as a running one does.
		t.h.trim(t.caller)
	}
}

// expire ends a kept terminal whose page did not come back (left by a,
// its last page) in time.
func (t *term) expire(a *attachment) {
	t.mu.Lock()
	if t.att != nil || t.grace == nil || t.leftBy != a {
		t.mu.Unlock()
		return // resumed meanwhile (and maybe left again: a later grace runs)
	}
	t.grace = nil
	ended := t.end != nil
	t.mu.Unlock()
	t.h.forget(t)
	if ended {
		t.h.bury(t, fmt.Sprintf("its shell ended while this page was away, which did not come back within %v", t.h.cfg.Keep))
	} else {
		t.h.bury(t, fmt.Sprintf("closed: this page did not come back within %v", t.h.cfg.Keep))
		t.log.Info("terminal not resumed in time, closing", "keep", t.h.cfg.Keep)
		t.cancel(fmt.Errorf("its page did not come back within %v", t.h.cfg.Keep))
	}
}

// attach gives the terminal to a's page, taking it from the page that had
// it; false if a newer page has it.
func (t *term) attach(a *attachment) bool {
	t.mu.Lock()
	if a.seq < t.seq && t.att != nil {
		t.mu.Unlock()
		return false
	}
	old := t.att
	t.att, t.seq = a, a.seq
	if t.grace != nil {
		t.grace.Stop()
		t.grace = nil
	}
	t.mu.Unlock()
	if old != nil {
		t.log.Info("terminal resumed in another page")
		old.stop(stopTaken)
	}
	return true
}

// replay sends a's page what it has not drawn (from the output offset
// from on) before anything newer, then the ending if there is one.
func (t *term) replay(a *attachment, from int64, acks, paced bool) {
	// A write stuck on a page that does not read (a frozen tab) holds
	// t.out until its own timeout (pageWriteTimeout, for each of up to
	// three writes): the output copy waits on t.out, and with it the
	// terminal's end and the gateway's shutdown (Close). Once a is
	// stopped (the terminal ends, another page takes it), the write is
	// given up after closeWait instead, as serveAttachment gives up a
	// live write's; what the page did not take stays in the ring.
	replayed := make(chan struct{})
	go func() {
		select {
		case <-a.done:
		case <-replayed:
			return
		}
		cut := time.NewTimer(closeWait)
		defer cut.Stop()
		select {
		case <-cut.C:
			a.stopWrites()
		case <-replayed:
		}
	}()
	t.out.Lock()
	total := t.ring.total
	from = min(from, total)
	if held := t.ring.oldest(); from < held {
		b, _ := json.Marshal(control{Type: "skipped", Bytes: held - from})
		_ = a.write(websocket.MessageText, b)
		from = held
	}
	for _, b := range t.ring.since(from) {
		for len(b) > 0 {
			n := min(len(b), 32<<10)
			if a.write(websocket.MessageBinary, b[:n]) != nil {
				break
			}
			b = b[n:]
		}
	}
	close(replayed)
	t.fl.attach(from, acks, paced)
	a.live = true
	t.out.Unlock()
	if t.ending() != nil {
		a.stop(stopEnded)
	}
}

// trim drops the kept terminals of caller left longest without a page
// past Config.MaxKept, then, past Config.MaxKeptAll, those of the caller
// keeping the most. Those whose shell has ended count too (each holds its
// replay buffer for Config.Keep): within a caller's they go first, as
// they cost the page only an exit status, where a running one costs its
// shell.
func (h *Terminals) trim(caller string) {
	h.trimPast(func(t *term) bool { return t.caller == caller }, h.cfg.MaxKept, keptBound{
		ended:  fmt.Sprintf("its shell ended while this page was away, and more than %d terminals of this login were kept", h.cfg.MaxKept),
		closed: fmt.Sprintf("closed: more than %d terminals of this login were kept without their page, this one longest", h.cfg.MaxKept),
		cause:  fmt.Errorf("more than %d terminals were kept without a page", h.cfg.MaxKept),
		log:    "its caller keeps too many without a page",
	})
	h.trimPast(func(*term) bool { return true }, h.cfg.MaxKeptAll, keptBound{
		ended:  fmt.Sprintf("its shell ended while this page was away; the gateway kept over %d terminals without a page, this login the most", h.cfg.MaxKeptAll),
		closed: fmt.Sprintf("closed: the gateway kept more than %d terminals without their page; this login kept the most, and this one longest", h.cfg.MaxKeptAll),
		cause:  fmt.Errorf("the gateway kept more than %d terminals without a page", h.cfg.MaxKeptAll),
		log:    "the gateway keeps too many without a page",
	})
}

// keptBound is what trimPast says of a terminal it drops: to its page's
// resume (ended, closed), as the terminal's cause, and in the log.
type keptBound struct {
	ended, closed string
	cause         error
	log           string
}

// trimPast drops the kept terminals without a page that mine takes,
// past most of them: from the caller keeping the most (the one whose
// oldest was left longest of those keeping as many), ended ones first,
// then those left longest. Oldest of all, a caller keeping many ended
// another's only one, whose page is as likely to come back.
func (h *Terminals) trimPast(mine func(*term) bool, most int, why keptBound) {
	type left struct {
		t     *term
		since time.Time
		ended bool
	}
	var ls []left
	h.mu.Lock()
	for _, t := range h.kept {
		if !mine(t) {
			continue
		}
		t.mu.Lock()
		if t.att == nil && t.grace != nil {
			ls = append(ls, left{t, t.detached, t.end != nil})
		}
		t.mu.Unlock()
	}
	h.mu.Unlock()
	for len(ls) > most {
		// The caller: keeping the most, and of those keeping as many
		// the one whose terminal was left longest.
		type holding struct {
			n      int
			oldest time.Time
		}
		holds := make(map[string]*holding)
		for _, l := range ls {
			c := holds[l.t.caller]
			if c == nil {
				c = &holding{oldest: l.since}
				holds[l.t.caller] = c
			}
			c.n++
			if l.since.Before(c.oldest) {
				c.oldest = l.since
			}
		}
		var caller string
		var top *holding
		for id, c := range holds {
			if top == nil || c.n > top.n || c.n == top.n && c.oldest.Before(top.oldest) {
				caller, top = id, c
			}
		}
		// Its terminal: ended first, then the one left longest.
		oldest := -1
		for i, l := range ls {
			if l.t.caller != caller {
				continue
			}
			if oldest < 0 {
				oldest = i
				continue
			}
			if l.ended != ls[oldest].ended {
				if l.ended {
					oldest = i
				}
				continue
			}
			if l.since.Before(ls[oldest].since) {
				oldest = i
			}
		}
		t := ls[oldest].t
		ls = append(ls[:oldest], ls[oldest+1:]...)
		t.mu.Lock()
		if t.att != nil || t.grace == nil {
			t.mu.Unlock()
			continue
		}
		t.grace.Stop()
		t.grace = nil
		ended := t.end != nil
		t.mu.Unlock()
		h.forget(t)
		if ended {
			h.bury(t, why.ended)
			t.log.Info("ended terminal dropped before its page came back: "+why.log, "max", most)
			continue
		}
		h.bury(t, why.closed)
		t.log.Info("terminal closed: "+why.log, "max", most)
		t.cancel(why.cause)
	}
}

// ring holds the latest size bytes of a terminal's output, by offset.
type ring struct {
	b     []byte // grows to size; then offset o is at o % size
	size  int
	total int64 // bytes ever added
}

func newRing(size int) *ring { return &ring{size: size} }

func (r *ring) add(p []byte) {
	if len(p) >= r.size {
		if len(r.b) < r.size {
			r.b = append(r.b, make([]byte, r.size-len(r.b))...)
		}
		r.total += int64(len(p))
		p = p[len(p)-r.size:]
		at := int((r.total - int64(r.size)) % int64(r.size))
		n := copy(r.b[at:], p)
		copy(r.b, p[n:])
		return
	}
	for len(p) > 0 {
		at := int(r.total % int64(r.size))
		var n int
		if at == len(r.b) && len(r.b) < r.size { // still growing
			n = min(len(p), r.size-len(r.b))
			r.b = append(r.b, p[:n]...)
		} else {
			n = copy(r.b[at:], p)
		}
		r.total += int64(n)
		p = p[n:]
	}
}

// oldest is the offset of the oldest byte held.
func (r *ring) oldest() int64 { return r.total - min(r.total, int64(r.size)) }

// since returns the bytes held from offset from (≥ oldest) on, in order.
func (r *ring) since(from int64) [][]byte {
	n := int(r.total - from)
	if n <= 0 {
		return nil
	}
	at := int(from % int64(r.size))
	if at+n <= len(r.b) {
		return [][]byte{r.b[at : at+n]}
	}
	return [][]byte{r.b[at:], r.b[:n-(len(r.b)-at)]}
}
