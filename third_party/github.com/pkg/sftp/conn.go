package sftp

import (
	"bytes"
	"context"
	"encoding"
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
)

// conn implements a bidirectional channel on which client and server
// connections are multiplexed.
type conn struct {
	io.Reader
	io.WriteCloser
	// this is the same allocator used in packet manager
	alloc *allocator
	// sendMu serialises the packets written (hostgate: change 29; it
	// was a sync.Mutex).
	sendMu sendLock
}

// sendLock is a lock that a request with a ctx stops waiting for when
// its ctx ends (hostgate: change 29): a channel of one slot, full while
// held. The lock may be held for as long as the peer does not read (a
// send waiting on the SSH channel's window, or the rest of a packet cut
// short, change 16), and a sync.Mutex cannot be waited for with a select.
type sendLock chan struct{}

func newSendLock() sendLock { return make(sendLock, 1) }

func (l sendLock) lock() { l <- struct{}{} }

func (l sendLock) unlock() { <-l }

// tryLock takes the lock if nobody holds it.
func (l sendLock) tryLock() bool {
	select {
	case l <- struct{}{}:
		return true
	default:
		return false
	}
}

// lockContext takes the lock, or returns ctx's error once ctx ends. A
// ctx already ended fails it even with the lock free, so that of the
// requests one caller sends in turn none goes out after one that failed.
func (l sendLock) lockContext(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case l <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// the orderID is used in server mode if the allocator is enabled.
// For the client mode just pass 0.
// It returns io.EOF if the connection is closed and
// there are no more packets to read.
func (c *conn) recvPacket(orderID uint32) (fxp, []byte, error) {
	return recvPacket(c, c.alloc, orderID, nil)
}

func (c *conn) sendPacket(m encoding.BinaryMarshaler) error {
	c.sendMu.lock()
	defer c.sendMu.unlock()

	return sendPacket(c, m)
}

// contextWriter is a writer whose waits a ctx can end: the stdin of an
// SSH session of hostgate's x/crypto copy (its change 16).
type contextWriter interface {
	WriteContext(ctx context.Context, p []byte) (int, error)
}

// sendPacketContext is sendPacket whose wait for the send lock (hostgate:
// change 29) and, to a contextWriter, whose write give up when ctx (nil
// for none) ends (change 16); see sendPacketHeld.
func (c *conn) sendPacketContext(ctx context.Context, m encoding.BinaryMarshaler) error {
	if ctx == nil {
		return c.sendPacket(m)
	}
	if err := c.sendMu.lockContext(ctx); err != nil {
		return err
	}
	return c.sendPacketHeld(ctx, m)
}

// sendPacketHeld sends m with the send lock held by its caller, and lets
// the lock go. A packet cut short by ctx's end (hostgate: change 16)
// cannot simply stop: the peer would take the next packet's bytes for
// the rest of this one. So its rest is copied (it may be the caller's
// data, which it reuses once the call returned) and written by a
// goroutine that keeps the lock until it is out, when the server reads
// again, or the write fails with the connection; the request counts as
// sent. The requests that follow wait for it, as they waited behind the
// packet before (those with a ctx no longer than it, change 29).
func (c *conn) sendPacketHeld(ctx context.Context, m encoding.BinaryMarshaler) error {
	cw, ok := c.WriteCloser.(contextWriter)
	if ctx == nil || !ok {
		defer c.sendMu.unlock()
		return sendPacket(c, m)
	}
	header, payload, err := marshalPacket(m)
	if err != nil {
		c.sendMu.unlock()
		return fmt.Errorf("binary marshaller failed: %w", err)
	}
	binary.BigEndian.PutUint32(header[:4], uint32(len(header)+len(payload)-4))
	n, err := cw.WriteContext(ctx, header)
	if err == nil && len(payload) > 0 {
		var m int
		m, err = cw.WriteContext(ctx, payload)
		n += m
	}
	if err == nil || n == 0 || ctx.Err() == nil {
		// Sent, nothing of it sent, or the writer failed on its own
		// (the stream is over then).
		c.sendMu.unlock()
		if err != nil {
			return fmt.Errorf("failed to send packet: %w", err)
		}
		return nil
	}
	rest := make([]byte, 0, len(header)+len(payload)-n)
	if n < len(header) {
		rest = append(append(rest, header[n:]...), payload...)
	} else {
		rest = append(rest, payload[n-len(header):]...)
	}
	go func() {
		defer c.sendMu.unlock()
		_, _ = c.WriteCloser.Write(rest)
	}()
	// Sent, as far as the caller knows: its reply will come (or the
	// connection's end), and must find the request's entry in inflight:
	// a tombstone if ctx was a File's and Abort ended it, else the
	// request's own channel, with room for the reply nobody waits for.
	return nil
}

// Close closes the writer. hostgate (change 31): with the send lock when
// it is free, else at once, beside the send that holds it: that send may
// be waiting on a window a host that stopped reading never grants (or be
// change 16's rest of a packet cut short), and Close waited for the lock
// as long, until the connection ended. Closing the writer is what makes
// such a send fail: the fork's SSH channel ends a write waiting for window
// on Close and on CloseWrite (a session's stdin), as a pipe or a net.Conn
// ends a blocked Write on Close. The packet it cuts short does not matter:
// nothing follows it on the stream.
//
// Beside a send, only what the writer writes to is closed
// (closeBeneath): the writer itself (a server's reply batch) is the
// send's, which it reads and writes unlocked.
func (c *conn) Close() error {
	if c.sendMu.tryLock() {
		defer c.sendMu.unlock()
		return c.WriteCloser.Close()
	}
	if b, ok := c.WriteCloser.(interface{ closeBeneath() error }); ok {
		return b.closeBeneath()
	}
	return c.WriteCloser.Close()
}

type clientConn struct {
	conn
	wg sync.WaitGroup

	wait func() error // if non-nil, call this during Wait() to get a possible remote status error.

	sync.Mutex                        // protects inflight and Files' aborted
	inflight   map[uint32]inflightReq // outstanding requests

	closed chan struct{}
	err    error

	// end, when not nil, ends what the client runs over (hostgate:
	// change 32): NewClientSession's session, whose Close ends the
	// receive loop's read at once.
	end func() error
}

// Wait blocks until the conn has shut down, and return the error
// causing the shutdown. It can be called concurrently from multiple
// goroutines.
func (c *clientConn) Wait() error {
	<-c.closed

	if c.wait == nil {
		// Only return this error if c.wait won't return something more useful.
		return c.err
	}

	if err := c.wait(); err != nil {

		// TODO: when https://github.com/golang/go/issues/35025 is fixed,
		// we can remove this if block entirely.
		// Right now, it’s always going to return this, so it is not useful.
		// But we have this code here so that as soon as the ssh library is updated,
		// we can return a possibly more useful error.
		if err.Error() == "ssh: session not started" {
			return c.err
		}

		return err
	}

	// c.wait returned no error; so, let's return something maybe more useful.
	return c.err
}

// Close closes the SFTP session.
//
// hostgate (change 32): over NewClientSession's session it also closes
// the session, after the EOF of conn.Close, so that the wait for the
// receive loop ends at once. It waited for the host to end the session,
// which a host that stopped answering never does: Close hung for as
// long as the connection lasted, and the calls waiting for replies with it.
func (c *clientConn) Close() error {
	defer c.wg.Wait()
	err := c.conn.Close()
	if c.end != nil {
		_ = c.end()
	}
	return err
}

// recv continuously reads from the server and forwards responses to the
// appropriate channel.
func (c *clientConn) recv() error {
	defer c.conn.Close()

	for {
		// hostgate: from the channel itself, so that recvPacket
		// finds its ReadShared (change 6).
		var rb recvBufs
		typ, data, err := recvPacket(c.conn.Reader, c.alloc, 0, &rb)
		if err != nil {
			return err
		}
		sid, _, err := unmarshalUint32Safe(data)
		if err != nil {
			rb.release()
			return err
		}

		ch, ok := c.getChannel(sid)
		if ok && ch == nil {
			// hostgate (change 15): the reply to a request of a
			// File that Abort failed; nobody waits for it.
			rb.release()
			continue
		}
		if !ok {
			// This is an unexpected occurrence. Send the error
			// back to all listeners so that they terminate
			// gracefully.
			rb.release()
			return fmt.Errorf("sid not found: %d", sid)
		}

		ch <- result{typ: typ, data: data, page: rb.page, refs: rb.refs}
	}
}

// inflightReq is a request waiting for its reply (hostgate: change 15).
type inflightReq struct {
	ch chan<- result // nil: its File was aborted, the reply is dropped
	f  *File         // the File whose request it is, if any
}

// hostgate (change 15): owner, when not nil, is the File whose request it
// is; once Abort failed owner, the request fails with its error unsent.
func (c *clientConn) putChannel(ch chan<- result, sid uint32, owner *File) bool {
	c.Lock()
	defer c.Unlock()

	select {
	case <-c.closed:
		// already closed with broadcastErr, return error on chan.
		ch <- result{err: ErrSSHFxConnectionLost}
		return false
	default:
	}
	if owner != nil && owner.aborted != nil {
		ch <- result{err: owner.aborted}
		return false
	}

	c.inflight[sid] = inflightReq{ch: ch, f: owner}
	return true
}

// getChannel takes sid's channel out of inflight: nil and true for the
// request of an aborted File (hostgate: change 15).
func (c *clientConn) getChannel(sid uint32) (chan<- result, bool) {
	c.Lock()
	defer c.Unlock()

	r, ok := c.inflight[sid]
	delete(c.inflight, sid)

	return r.ch, ok
}

// abort fails f's requests in flight and every later one with err, at
// once (hostgate: change 15): their channels leave inflight for a
// tombstone, so that a reply that still comes is dropped (and its page or
// packets given back) rather than taken for an unknown id, which ends
// the connection. It reports whether f was aborted before.
func (c *clientConn) abort(f *File, err error) bool {
	c.Lock()
	if f.aborted != nil {
		c.Unlock()
		return true
	}
	f.aborted = err
	f.abortCancel(err)
	var chs []chan<- result
	for sid, r := range c.inflight {
		if r.f == f && r.ch != nil {
			chs = append(chs, r.ch)
			c.inflight[sid] = inflightReq{}
		}
	}
	c.Unlock()
	// Outside the lock, as recv sends: each channel has room for, or a
	// reader of, the reply this error stands for.
	for _, ch := range chs {
		ch <- result{err: err}
	}
	return false
}

// result captures the result of receiving the a packet from the server
type result struct {
	typ  fxp
	data []byte
	err  error
	page *respPage // hostgate: data's buffer if it came from respPages
	// hostgate: a data reply's data, left in the SSH channel's packets
	// (change 6); data is then the reply's id and data length only.
	refs *dataRefs
}

// hostgate: respPage holds one response of the client's; respPages
// recycles them between responses of pagedMin bytes or more (read
// replies). A result that is never released leaves its page to the GC.
//
// hostgate (change 9): a page is as large as the smallest of
// pageSizes that holds its reply, not always maxMsgLength: a reply of 32
// KiB (a server that answers 32 KiB reads, its requests 32 KiB) took a
// 256 KiB page, so the replies in flight held eight times their bytes
// (255 requests of WriteTo: 64 MiB for 8 MiB asked).
type respPage struct {
	buf   []byte
	class int // its index in pageSizes
}

const pagedMin = 32 << 10

// pageSizes are the sizes of respPages' pages: the replies to reads of
// 32, 64 and 128 KiB and their header (9 bytes, a KiB left), and the
// largest message. A reply between two takes at most twice its size.
var pageSizes = [...]int{33 << 10, 65 << 10, 129 << 10, maxMsgLength}

var respPages [len(pageSizes)]sync.Pool

// pagedBytes is the size of the pages taken and not given back (a page
// left to the GC stays counted): what the replies in flight hold.
var pagedBytes atomic.Int64

// getPage returns a page of at least n bytes (n <= maxMsgLength).
func getPage(n int) *respPage {
	c := 0
	for pageSizes[c] < n {
		c++
	}
	pagedBytes.Add(int64(pageSizes[c]))
	if p, ok := respPages[c].Get().(*respPage); ok {
		return p
	}
	return &respPage{buf: make([]byte, pageSizes[c]), class: c}
}

// put gives p back; nothing may use its bytes after.
func (p *respPage) put() {
	pagedBytes.Add(-int64(len(p.buf)))
	respPages[p.class].Put(p)
}

// hostgate: release gives r's page back; nothing may use r.data after.
func (r *result) release() {
	if r.page != nil {
		r.page.put()
		r.page = nil
	}
	if r.refs != nil {
		r.refs.release()
		r.refs = nil
	}
}

type idmarshaler interface {
	id() uint32
	encoding.BinaryMarshaler
}

func (c *clientConn) sendPacket(ctx context.Context, ch chan result, p idmarshaler) (fxp, []byte, error) {
	return c.sendPacketFor(ctx, nil, ch, p)
}

// sendPacketFor is sendPacket for a request of owner's (hostgate: change 15).
func (c *clientConn) sendPacketFor(ctx context.Context, owner *File, ch chan result, p idmarshaler) (fxp, []byte, error) {
	if cap(ch) < 1 {
		ch = make(chan result, 1)
	}

	_ = c.dispatchContext(ctx, owner, ch, p) // its error is ch's

	select {
	case <-ctx.Done():
		return 0, nil, ctx.Err()
	case s := <-ch:
		s.flatten() // hostgate: a data reply in the channel's packets
		if s.page != nil {
			// hostgate: the caller keeps data; give it its own copy
			// and the page back (readChunkAt avoids this copy).
			data := bytes.Clone(s.data)
			s.release()
			return s.typ, data, s.err
		}
		return s.typ, s.data, s.err
	}
}

// dispatchRequest should ideally only be called by race-detection tests outside of this file,
// where you have to ensure two packets are in flight sequentially after each other.
func (c *clientConn) dispatchRequest(ch chan<- result, p idmarshaler) {
	c.dispatch(context.Background(), nil, ch, p, false)
}

// dispatchFor is dispatchRequest for a request of owner's, which
// owner's Abort fails (hostgate: change 15).
func (c *clientConn) dispatchFor(owner *File, ch chan<- result, p idmarshaler) {
	c.dispatch(context.Background(), owner, ch, p, false)
}

// dispatchContext is dispatchFor whose send waits no longer than ctx
// (hostgate: change 29): a request that could not start before ctx ended
// fails unsent with ctx's error. A File's requests are bounded by the
// File's Abort instead (change 16); they take no ctx of their own.
//
// It returns the error of a request that failed to be sent, which it
// also gave ch.
func (c *clientConn) dispatchContext(ctx context.Context, owner *File, ch chan<- result, p idmarshaler) error {
	return c.dispatch(ctx, owner, ch, p, false)
}

// dispatchHeld is dispatchRequest by a caller that took the send lock
// (sendLock.tryLock), which it lets go (hostgate: change 29).
func (c *clientConn) dispatchHeld(ch chan<- result, p idmarshaler) {
	c.dispatch(context.Background(), nil, ch, p, true)
}

func (c *clientConn) dispatch(ctx context.Context, owner *File, ch chan<- result, p idmarshaler, held bool) error {
	sid := p.id()

	if !c.putChannel(ch, sid, owner) {
		// already closed, or owner aborted.
		if held {
			c.conn.sendMu.unlock()
		}
		return nil
	}

	if owner != nil {
		ctx = owner.abortCtx
	} else if ctx != nil && ctx.Done() == nil {
		ctx = nil // never ends: the plain send
	}
	var err error
	if held {
		err = c.conn.sendPacketHeld(ctx, p)
	} else {
		err = c.conn.sendPacketContext(ctx, p)
	}
	if err != nil {
		if owner == nil && ctx != nil && ctx.Err() != nil {
			// Unsent (or the stream failed) as ctx ended: the
			// caller's Wait says ctx's error, as its select would.
			err = ctx.Err()
		}
		if ch, ok := c.getChannel(sid); ok && ch != nil {
			ch <- result{err: err}
		}
	}
	return err
}

// broadcastErr sends an error to all goroutines waiting for a response.
func (c *clientConn) broadcastErr(err error) {
	c.Lock()
	defer c.Unlock()

	bcastRes := result{err: ErrSSHFxConnectionLost}
	for sid, r := range c.inflight {
		if r.ch == nil {
			continue // hostgate (change 15): its File's Abort answered it
		}
		r.ch <- bcastRes

		// Replace the chan in inflight,
		// we have hijacked this chan,
		// and this guarantees always-only-once sending.
		c.inflight[sid] = inflightReq{ch: make(chan<- result, 1)}
	}

	c.err = err
	close(c.closed)
}

type serverConn struct {
	conn
}

func (s *serverConn) sendError(id uint32, err error) error {
	return s.sendPacket(statusFromError(id, err))
}
