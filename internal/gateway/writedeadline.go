package gateway

import (
	"bufio"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// writeTimeout is how long one write of an answer may wait for the client
// to take bytes (a variable for tests); the preview proxy bounds its own
// writes the same.
var writeTimeout = time.Minute

// boundWrites bounds each write of every answer by writeTimeout, as
// boundBodies bounds the body's reads. The server sets no WriteTimeout
// (it would cut hijacked WebSockets and answers that come after a long
// exec), and without a bound a client that stops reading (a process
// frozen, a peer that keeps its window shut) an answer larger than the
// sockets' buffers take, a long list, held its handler's goroutine and
// the unwritten answer for as long as the connection stayed open, which a
// live peer's kernel keeps for ever. A write that waits longer fails, and
// net/http closes the connection.
//
// The deadline is armed before each write (of at most writeChunk), so an
// answer idle between writes, or a slow client, is not cut, and once more
// as the handler returns, for net/http's flush of what it buffered. It is
// cleared at each request's start (one left armed by the request before
// on a kept-alive connection) and on a hijack, so a WebSocket starts
// without one.
func boundWrites(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tw := &timedWriter{ResponseWriter: w, rc: http.NewResponseController(w)}
		_ = tw.rc.SetWriteDeadline(time.Time{})
		next.ServeHTTP(tw, r)
		if !tw.hijacked.Load() {
			tw.arm()
		}
	})
}

// timedWriter arms the write deadline before each write through it.
type timedWriter struct {
	http.ResponseWriter
	rc       *http.ResponseController
	hijacked atomic.Bool
}

func (t *timedWriter) arm() { _ = t.rc.SetWriteDeadline(time.Now().Add(writeTimeout)) }

func (t *timedWriter) WriteHeader(code int) {
	t.arm()
	t.ResponseWriter.WriteHeader(code)
}

// Write writes p a writeChunk at a time, each under its own deadline: the
// bound is on a client that takes nothing, not on a slow one taking a
// large answer (an exec's output is one Write of megabytes).
func (t *timedWriter) Write(p []byte) (n int, err error) {
	for {
		c := p[:min(len(p), writeChunk)]
		t.arm()
		m, err := t.ResponseWriter.Write(c)
		n += m
		if err != nil || len(c) == len(p) {
			return n, err
		}
		p = p[len(c):]
	}
}

// writeChunk is the most one deadline covers: 64 KiB a minute is a
// client reading at 1 KiB/s.
const writeChunk = 64 << 10

// FlushError serves http.ResponseController's Flush, Flush http.Flusher's.
func (t *timedWriter) FlushError() error {
	t.arm()
	return t.rc.Flush()
}

func (t *timedWriter) Flush() { _ = t.FlushError() }

// Hijack hands the connection over without a deadline: a WebSocket's
// writes have their own bounds (relayWriteTimeout, the terminal's).
func (t *timedWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := t.rc.Hijack()
	if err != nil {
		return c, rw, err
	}
	t.hijacked.Store(true)
	_ = c.SetWriteDeadline(time.Time{})
	return c, rw, nil
}

// Unwrap lets http.ResponseController reach the connection (read
// deadlines, full duplex).
func (t *timedWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }
