// Copyright 2026 The hostgate Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package ssh

import (
	"sync"
	"sync/atomic"
	"time"
)

// deadline is a channel's read or write deadline (hostgate, change 9 in
// HOSTGATE.md): what a net.Conn's SetReadDeadline or SetWriteDeadline sets.
// Its waiters wait on cond (the read buffer's, or the send window's) and
// check passed before each wait; when the deadline passes, passed is set
// and cond broadcast under its lock, so no waiter misses it between its
// check and its wait.
//
// One timer per deadline, made on the first deadline in the future and
// reset after: an http.Server moves a connection's deadlines on every
// request. A Read or Write with no deadline set pays one atomic load.
type deadline struct {
	cond *sync.Cond

	// passed says the deadline has passed: blocked and later calls fail
	// with os.ErrDeadlineExceeded until it is moved or cleared.
	passed atomic.Bool

	mu     sync.Mutex // guards the fields below; never held with cond.L
	at     time.Time
	timer  *time.Timer
	closed bool // the channel is closed: arm no timer
}

// set makes t the deadline: zero clears it, a time not after now passes it
// at once (waking a blocked call), a later one arms the timer.
func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	d.at = t
	passed := false
	if !t.IsZero() {
		if wait := time.Until(t); wait <= 0 {
			passed = true
		} else if !d.closed {
			if d.timer == nil {
				d.timer = time.AfterFunc(wait, d.fire)
			} else {
				d.timer.Reset(wait)
			}
		}
	}
	if (t.IsZero() || passed) && d.timer != nil {
		d.timer.Stop()
	}
	d.passed.Store(passed)
	d.mu.Unlock()
	if passed {
		d.wake()
	}
}

// fire runs when the timer goes off. The deadline may have moved since it
// was armed (a timer already running when Reset was called runs anyway),
// or the wall clock stepped back: then it waits on for the deadline now set.
func (d *deadline) fire() {
	d.mu.Lock()
	if d.at.IsZero() || d.closed {
		d.mu.Unlock()
		return
	}
	if wait := time.Until(d.at); wait > 0 {
		d.timer.Reset(wait)
		d.mu.Unlock()
		return
	}
	d.passed.Store(true)
	d.mu.Unlock()
	d.wake()
}

// wake wakes the calls waiting on cond, under its lock: one that has just
// seen passed unset is in Wait by the time the lock is free.
func (d *deadline) wake() {
	d.cond.L.Lock()
	d.cond.Broadcast()
	d.cond.L.Unlock()
}

// stop releases the timer when the channel closes; nothing waits on a
// closed channel's deadlines (its reads and writes end by themselves).
func (d *deadline) stop() {
	d.mu.Lock()
	d.closed = true
	if d.timer != nil {
		d.timer.Stop()
	}
	d.mu.Unlock()
}
