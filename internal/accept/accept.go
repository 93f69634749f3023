// Package accept owns the one policy every accept loop of hostgate's
// follows: a listener's temporary failure (EMFILE, ENFILE: the process or
// the machine out of descriptors for a moment) is waited out with a
// back-off, as net/http's Serve does, never taken for the listener's end.
// A loop that ended on it left a forward's port bound with nothing
// accepting (an agent's `ssh -R`), or ended a local forward for good,
// because of a descriptor shortage that was over a millisecond later.
package accept

import (
	"context"
	"errors"
	"net"
	"syscall"
	"time"
)

// Back-off bounds: net/http's.
const (
	firstWait = 5 * time.Millisecond
	maxWait   = time.Second
)

// Next returns ln's next connection. A temporary failure is waited out:
// 5 ms, doubling to 1 s between tries, with retry (when not nil) told
// each one first, so that the loop's owner can log it. Any other failure
// is returned at once, as is a temporary one whose wait ctx ended.
func Next(ctx context.Context, ln net.Listener, retry func(err error, wait time.Duration)) (net.Conn, error) {
	var wait time.Duration
	for {
		c, err := ln.Accept()
		if err == nil || !Temporary(err) || ctx.Err() != nil {
			return c, err
		}
		wait = min(max(2*wait, firstWait), maxWait)
		if retry != nil {
			retry(err, wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, err
		}
	}
}

// Temporary reports whether err is an accept failure worth waiting out:
// the error's own Temporary (as net/http asks: EMFILE, ENFILE), or the
// kernel out of buffers or memory for the new socket; never one of a
// closed listener.
func Temporary(err error) bool {
	if errors.Is(err, net.ErrClosed) {
		return false
	}
	if errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM) {
		return true
	}
	var te interface{ Temporary() bool }
	return errors.As(err, &te) && te.Temporary()
}
