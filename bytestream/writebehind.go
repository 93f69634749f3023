package bytestream

import (
	"errors"
	"net"
	"sync"
	"time"
)

// wbMax bounds what a write-behind conn holds unsent: four messages. A
// Write that would pass it waits for the flusher, so a peer that stops
// reading still stalls the writer (and trips a mux write timeout).
const wbMax = 4 * MaxMessageSize

// wbIdle is the flusher's tick: it exits at a tick that finds no burst
// since the one before, so one to two wbIdle after the last. Long against
// the gaps between the messages of a busy conn, short enough that a conn
// dropped without Close does not keep it.
const wbIdle = 100 * time.Millisecond

// wbCloseWait bounds how long Close waits for held bytes to reach the
// peer before it closes the conn anyway.
const wbCloseWait = 5 * time.Second

// wbBufs holds write-behind buffers between bursts: an idle conn holds
// none.
var wbBufs = sync.Pool{New: func() any { b := make([]byte, 0, wbMax); return &b }}

// writeBehind turns a writer's many small writes into few large ones. An
// SSH connection writes each 32 KiB packet on its own, encrypting the next
// only after the last is in the kernel; here Write copies p and returns,
// and a flusher goroutine writes whatever collected meanwhile as one call.
// Encryption on one core overlaps the syscall on the other, and every hop
// behind (gateway, yamux, agent) sees fewer, larger messages: on this
// 2-core machine, three alternating scripts/bench rounds (medians) moved
// bulk from 0.64x to 0.67x OpenSSH, SFTP download 0.42x -> 0.50x, upload
// 0.54x -> 0.66x (issue 7). A failed write is reported by the next Write
// (as a kernel send buffer would); Close first waits, bounded, for held
// bytes to go out.
//
// The flusher starts at the first write and waits between bursts until
// Close, a failed write, or about wbIdle without a burst. It used to start
// afresh per burst, each time on a new goroutine's 2 KiB stack that grew
// by copying on the way down the WebSocket write path: with small
// forwarded connections, a burst per SSH message, stack growth
// (runtime.newstack) was in 7% of the agent's CPU samples in perf (5%
// after: the goroutines per forwarded channel still grow theirs).
// BenchmarkSmallRoundTrip, 8 interleaved runs each: 31.6 -> 28.4 us and
// 34.3 -> 30.9 us of CPU per 100-byte round trip (medians).
type writeBehind struct {
	write func([]byte) (int, error) // the conn's message writer
	// writeOwn, if set, writes the flusher's buffers: they are the
	// flusher's own until it returns, so it may change them (mask them
	// in place; see clientframes.go).
	writeOwn func([]byte) (int, error)
	abort    func() error  // closes the conn without waiting
	idle     time.Duration // wbIdle; tests change it

	mu       sync.Mutex
	cond     sync.Cond   // signalled when buf drains or the flusher stops
	buf      *[]byte     // bytes not yet handed to write; nil when none
	flushing bool        // the flusher, or a large Write, is writing
	kicked   bool        // the flusher has held bytes to write
	running  bool        // the flusher goroutine exists
	kick     sync.Cond   // wakes an idle flusher: kicked, closed, retired or failed
	retire   bool        // a tick found the flusher idle: it exits
	writes   int         // writes since the last tick
	gen      uint64      // counts flushers started; a tick knows its own
	ticker   *time.Timer // the running flusher's tick
	err      error       // the first write error; sticky
	closed   bool
}

func newWriteBehind(write func([]byte) (int, error), abort func() error) *writeBehind {
	w := &writeBehind{write: write, abort: abort, idle: wbIdle}
	w.cond.L = &w.mu
	w.kick.L = &w.mu
	return w
}

func (w *writeBehind) pending() int {
	if w.buf == nil {
		return 0
	}
	return len(*w.buf)
}

// Write holds p for the flusher. A p of wbMax or more is written by the
// caller itself once everything before it is out, so order is kept and
// memory stays bounded.
func (w *writeBehind) Write(p []byte) (int, error) { return w.writeJoined(p, nil) }

// writeJoined writes a then b as Write would write them joined: muxConn
// joins a frame's header to its body here, in the buffer the bytes are
// copied into anyway, instead of in a copy of the body made first. With b
// non-empty, len(a)+len(b) must be below wbMax (muxConn joins larger
// frames itself).
func (w *writeBehind) writeJoined(a, b []byte) (int, error) {
	w.mu.Lock()
	for w.err == nil && !w.closed && w.pending() > 0 && w.pending()+len(a)+len(b) > wbMax {
		w.cond.Wait()
	}
	if w.err != nil {
		defer w.mu.Unlock()
		return 0, w.err
	}
	if w.closed {
		w.mu.Unlock()
		return 0, net.ErrClosed
	}
	if len(a) >= wbMax { // b is empty (see above)
		for w.err == nil && !w.closed && w.flushing {
			w.cond.Wait()
		}
		if w.err != nil {
			defer w.mu.Unlock()
			return 0, w.err
		}
		if w.closed { // drain returned while this waited
			w.mu.Unlock()
			return 0, net.ErrClosed
		}
		// Nothing is held and nothing is being written: write in place,
		// marked as flushing so that other writers queue behind.
		w.flushing = true
		w.mu.Unlock()
		n, err := w.write(a)
		w.mu.Lock()
		w.flushing = false
		if err != nil && w.err == nil {
			w.err = err
		}
		if w.pending() > 0 && w.err == nil {
			w.startFlush() // written by another caller meanwhile
		}
		w.cond.Broadcast()
		w.mu.Unlock()
		return n, err
	}
	if w.buf == nil {
		w.buf = wbBufs.Get().(*[]byte)
	}
	*w.buf = append(append(*w.buf, a...), b...)
	if !w.flushing {
		w.startFlush()
	}
	w.mu.Unlock()
	return len(a) + len(b), nil
}

// startFlush hands the held bytes to the flusher, starting it if need be;
// w.mu held, nothing being written.
func (w *writeBehind) startFlush() {
	w.flushing = true
	w.kicked = true
	if w.running {
		w.kick.Signal()
		return
	}
	w.running = true
	w.writes = 0
	w.gen++
	gen := w.gen
	w.ticker = time.AfterFunc(w.idle, func() { w.tick(gen) })
	go w.flush()
}

// tick retires the flusher of generation gen if it wrote nothing since the
// last tick, else waits for the next. A retired flusher exits when next
// idle, even if a kick comes first (the tick is not re-armed). A timer that ticks, rather than one
// re-armed per burst, keeps the timer off the path of every message: a
// flusher that selected on a timer channel as well as its kick took a
// tenth longer per small round trip (BenchmarkSmallRoundTrip).
func (w *writeBehind) tick(gen uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.running || w.gen != gen {
		return // that flusher is gone
	}
	if w.writes == 0 && !w.kicked {
		w.retire = true
		w.kick.Signal()
		return
	}
	w.writes = 0
	w.ticker.Reset(w.idle)
}

// flush writes what collects whenever kicked, until the conn is closed, a
// write fails, or a tick finds it idle (between one and two w.idle).
func (w *writeBehind) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		for !w.kicked && !w.closed && !w.retire && w.err == nil {
			w.kick.Wait()
		}
		if !w.kicked || w.err != nil {
			break // closed or retired with nothing held, or failed
		}
		w.kicked = false
		for w.pending() > 0 && w.err == nil {
			w.writes++ // per write: a flusher busy past a tick is not idle
			out := w.buf
			w.buf = nil
			w.mu.Unlock()
			write := w.write
			if w.writeOwn != nil {
				write = w.writeOwn
			}
			_, err := write(*out)
			*out = (*out)[:0]
			wbBufs.Put(out)
			w.mu.Lock()
			if err != nil && w.err == nil {
				w.err = err
			}
			w.cond.Broadcast()
		}
		w.flushing = false
		w.cond.Broadcast()
	}
	if w.buf != nil && w.err != nil {
		*w.buf = (*w.buf)[:0]
		wbBufs.Put(w.buf)
		w.buf = nil
	}
	if w.kicked { // failed before taking the kick: flushing is ours
		w.kicked = false
		w.flushing = false
	}
	w.ticker.Stop()
	w.retire = false
	w.running = false
	w.cond.Broadcast()
}

// drain marks w closed and waits, at most wbCloseWait, for held bytes to
// be written. Past the wait it aborts the conn, which fails the flusher's
// write, and still waits for the flusher to stop.
func (w *writeBehind) drain() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	w.kick.Signal()
	if !w.running && !w.flushing {
		return
	}
	t := time.AfterFunc(wbCloseWait, func() {
		_ = w.abort()
		w.mu.Lock()
		if w.err == nil {
			w.err = errWriteBehindClosed
		}
		w.kick.Signal()
		w.cond.Broadcast()
		w.mu.Unlock()
	})
	defer t.Stop()
	for w.running || w.flushing {
		w.cond.Wait()
	}
}

var errWriteBehindClosed = errors.New("bytestream: closed with bytes unsent")
