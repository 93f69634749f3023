// Copyright 2026 The hostgate Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package ssh

import (
	"io"
	"sync"
	"sync/atomic"
)

// hostgate (change 13): a forwarded connection's channel gets no requests
// and no extended data from any peer we know, yet upstream started two
// goroutines per channel to answer and drop them (DiscardRequests and a
// copy of Stderr to io.Discard), each woken again when the channel
// closes. On a process that goes idle between small forwarded requests,
// every goroutine started or woken is a thread wake-up, the bulk of such a
// request's cost. lazyDiscard starts each only when the first request, or
// the first extended data, arrives.
type lazyDiscard struct {
	on        atomic.Bool
	reqs, ext sync.Once
}

// DiscardLazily answers the requests of ch (reqs, as Accept or OpenChannel
// returned them) with false and reads and drops its extended data, as `go
// DiscardRequests(reqs)` and `go io.Copy(io.Discard, ch.Stderr())` do, but
// starts each goroutine only when something arrives for it. For a Channel
// not of this package it starts both at once.
func DiscardLazily(ch Channel, reqs <-chan *Request) {
	c, ok := ch.(*channel)
	if !ok || c.incomingRequests != reqs {
		go DiscardRequests(reqs)
		go io.Copy(io.Discard, ch.Stderr())
		return
	}
	c.discard.on.Store(true)
	// What the mux goroutine queued before on was set, it did not start a
	// goroutine for; it checks on after queueing, so either it sees on or
	// this sees what it queued.
	c.startDiscards(len(c.incomingRequests) > 0, !c.extPending.empty())
}

// startDiscards starts the goroutine that answers requests (reqs) and the
// one that drops extended data (ext), each once, if DiscardLazily was
// called. The mux goroutine calls it after queueing either.
func (ch *channel) startDiscards(reqs, ext bool) {
	if !ch.discard.on.Load() {
		return
	}
	if reqs {
		ch.discard.reqs.Do(func() { go DiscardRequests(ch.incomingRequests) })
	}
	if ext {
		ch.discard.ext.Do(func() { go io.Copy(io.Discard, ch.Stderr()) })
	}
}
