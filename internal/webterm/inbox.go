package webterm

import "sync"

// inboxMax bounds the input a terminal holds for its shell: what the
// page sent that the shell has not taken yet.
const inboxMax = 256 << 10

// inbox is a terminal's input on its way to the shell. The page's
// socket is read into it, not straight into the shell's stdin, so a
// shell that takes no input holds back neither the page's pongs (a page
// that has gone is still found out), nor its acks (output goes on: a
// program printing without reading, under a paste it has not taken,
// stopped for good once the page's acks waited behind the paste), nor
// its resizes. Only past inboxMax does the page's reader wait.
type inbox struct {
	mu     sync.Mutex
	buf    []byte
	closed bool
	ready  chan struct{} // input came: the feeder takes it
	room   chan struct{} // the feeder took input: a waiting reader puts
	// Bytes ever put, and of them passed on: written to the shell's
	// stdin by the feeder. What lies between waits for the shell, which
	// a page is told while it does (Terminals.noteInputWait).
	putN, passedN int64
}

func newInbox() *inbox {
	return &inbox{ready: make(chan struct{}, 1), room: make(chan struct{}, 1)}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// put adds p (at most MaxMessage bytes) to the input, waiting while the
// inbox is full, until stop closes: then it reports false. blocked is
// told when put starts and stops waiting.
func (b *inbox) put(p []byte, stop <-chan struct{}, blocked func(bool)) bool {
	for waited := false; ; {
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return false
		}
		if len(b.buf) == 0 || len(b.buf)+len(p) <= inboxMax {
			b.buf = append(b.buf, p...)
			b.putN += int64(len(p))
			b.mu.Unlock()
			signal(b.ready)
			if waited {
				blocked(false)
			}
			return true
		}
		b.mu.Unlock()
		if !waited {
			waited = true
			blocked(true)
		}
		select {
		case <-b.room:
		case <-stop:
			blocked(false)
			return false
		}
	}
}

// take waits for input and returns all of it, appended to into[:0], or
// false once the inbox is closed or stop closes.
func (b *inbox) take(into []byte, stop <-chan struct{}) ([]byte, bool) {
	for {
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return nil, false
		}
		if len(b.buf) > 0 {
			into = append(into[:0], b.buf...)
			b.buf = b.buf[:0]
			if cap(b.buf) > inboxMax {
				b.buf = nil
			}
			b.mu.Unlock()
			signal(b.room)
			return into, true
		}
		b.mu.Unlock()
		select {
		case <-b.ready:
		case <-stop:
			return nil, false
		}
	}
}

// passed counts n bytes the feeder wrote to the shell.
func (b *inbox) passed(n int) {
	b.mu.Lock()
	b.passedN += int64(n)
	b.mu.Unlock()
}

// counts returns the bytes ever put, and of them passed on to the shell.
func (b *inbox) counts() (put, passed int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.putN, b.passedN
}

// close drops what is left and ends put and take.
func (b *inbox) close() {
	b.mu.Lock()
	b.closed, b.buf = true, nil
	b.mu.Unlock()
	signal(b.ready)
	signal(b.room)
}

// feed writes the terminal's input to its shell until the terminal ends
// or the shell's stdin fails.
func (t *term) feed() {
	defer close(t.fed)
	defer t.in.close() // a page's reader waiting for room stops waiting
	var buf []byte
	for {
		var ok bool
		if buf, ok = t.in.take(buf, t.ctx.Done()); !ok {
			return
		}
		n, err := t.p.Stdin().Write(buf)
		t.in.passed(n)
		if cap(buf) > MaxMessage {
			buf = nil // a paste's buffer is not kept for keystrokes
		}
		if err != nil {
			return
		}
	}
}
