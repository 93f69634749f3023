// Copyright 2012 The Go Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package ssh

import (
	"io"
	"os"
	"sync"
	"sync/atomic"
)

// buffer provides a linked list buffer for data exchange
// between producer and consumer. Theoretically the buffer is
// of unlimited capacity as it does no allocation of its own.
type buffer struct {
	// protects concurrent access to head, tail and closed
	*sync.Cond

	head *element // the buffer that will be read first
	tail *element // the buffer that will be read last

	closed bool
	// hostgate: dropped is set by drop: writes are discarded.
	dropped bool
	// hostgate: the channel's read deadline, for its data buffer only
	// (change 9): stderr is read by a goroutine of its own (tcpip.go's
	// discard) that a net.Conn's read deadline must not end.
	deadline *deadline

	// hostgate: elements Read has finished with, for write and
	// writePacket to reuse (change 14): upstream allocated one per
	// packet received. At most maxSpareElements, linked by next.
	spare  *element
	spares int
}

// maxSpareElements bounds the elements a buffer keeps for reuse: enough
// for what one large Read frees (a 255 KiB SFTP reply spans 8 data
// packets) and little memory for a channel that goes idle.
const maxSpareElements = 16

// newElement returns a cleared element, a spare one if there is one.
// Called with b.Cond.L held.
func (b *buffer) newElement() *element {
	e := b.spare
	if e == nil {
		return new(element)
	}
	b.spare, e.next = e.next, nil
	b.spares--
	return e
}

// recycle keeps e, which the buffer no longer links, for newElement.
// Called with b.Cond.L held.
func (b *buffer) recycle(e *element) {
	if b.spares == maxSpareElements {
		return
	}
	*e = element{next: b.spare}
	b.spare = e
	b.spares++
}

// An element represents a single link in a linked list.
type element struct {
	buf  []byte
	next *element
	// hostgate: the whole packet buf is part of, given back to
	// dataPackets once buf has been read (see writePacket).
	packet []byte
	// hostgate: set once readShared has handed part of buf out by
	// reference (change 15): packet then goes back when the buffer and
	// every holder of a part have released it.
	shared *sharedPacket
}

// releaseHead gives back the packet of b.head, whose buf is drained: at
// once, or, if parts of it were handed out (readShared), when the last of
// their holders releases it. Called with b.Cond.L held.
func (b *buffer) releaseHead() {
	e := b.head
	switch {
	case e.shared != nil:
		e.shared.Release()
	case e.packet != nil:
		releasePacket(e.packet)
	}
	e.shared, e.packet = nil, nil
}

// newBuffer returns an empty buffer that is not closed.
func newBuffer() *buffer {
	e := new(element)
	b := &buffer{
		Cond: newCond(),
		head: e,
		tail: e,
	}
	return b
}

// write makes buf available for Read to receive.
// buf must not be modified after the call to write.
func (b *buffer) write(buf []byte) {
	b.Cond.L.Lock()
	if b.dropped {
		b.Cond.L.Unlock()
		return
	}
	e := b.newElement()
	e.buf = buf
	b.tail.next = e
	b.tail = e
	b.Cond.Signal()
	b.Cond.L.Unlock()
}

// writePacket is write for data that is part of packet, which the buffer
// then owns: once Read has copied all of data out, packet goes back to
// dataPackets for a later packet to reuse. hostgate: upstream lets the
// garbage collector reclaim every received packet; at hundreds of MiB/s
// that is a 32 KiB allocation, zeroed, per packet, and the collections
// they cause.
func (b *buffer) writePacket(data, packet []byte) {
	b.Cond.L.Lock()
	if b.dropped {
		// hostgate: nobody reads a dropped buffer; the channel's
		// window is not given back for it either, so its peer sends
		// at most what the window had left.
		b.Cond.L.Unlock()
		releasePacket(packet)
		return
	}
	e := b.newElement()
	e.buf, e.packet = data, packet
	b.tail.next = e
	b.tail = e
	b.Cond.Signal()
	b.Cond.L.Unlock()
}

// eof closes the buffer. Reads from the buffer once all
// the data has been consumed will receive io.EOF.
func (b *buffer) eof() {
	b.Cond.L.Lock()
	b.closed = true
	b.Cond.Signal()
	b.Cond.L.Unlock()
}

// drop closes the buffer and discards what it holds and what is written
// to it from now on, giving recycled packets back: hostgate, for a channel
// closed on this side, whose data nobody will read (see channel.Close).
// Reads return io.EOF at once.
func (b *buffer) drop() {
	b.Cond.L.Lock()
	b.dropped = true
	for e := b.head; e != nil; e = e.next {
		switch {
		case e.shared != nil:
			e.shared.Release()
		case e.packet != nil:
			releasePacket(e.packet)
		}
		e.shared, e.packet = nil, nil
		e.buf = nil
	}
	e := new(element)
	b.head, b.tail = e, e
	b.closed = true
	b.Cond.Broadcast()
	b.Cond.L.Unlock()
}

// empty reports whether b holds no data (hostgate: adjustWindow's
// growth).
func (b *buffer) empty() bool {
	b.Cond.L.Lock()
	defer b.Cond.L.Unlock()
	return len(b.head.buf) == 0 && b.head == b.tail
}

// Read reads data from the internal buffer in buf.  Reads will block
// if no data is available, or until the buffer is closed.
func (b *buffer) Read(buf []byte) (n int, err error) {
	b.Cond.L.Lock()
	defer b.Cond.L.Unlock()

	// hostgate: past the read deadline a Read fails at once, data
	// buffered or not, as a TCP conn's does; the data stays for the next
	// Read.
	if b.deadline != nil && b.deadline.passed.Load() {
		return 0, os.ErrDeadlineExceeded
	}
	for len(buf) > 0 {
		// if there is data in b.head, copy it
		if len(b.head.buf) > 0 {
			r := copy(buf, b.head.buf)
			buf, b.head.buf = buf[r:], b.head.buf[r:]
			n += r
			if len(b.head.buf) == 0 {
				b.releaseHead()
			}
			continue
		}
		// if there is a next buffer, make it the head
		if len(b.head.buf) == 0 && b.head != b.tail {
			old := b.head
			b.head = b.head.next
			b.recycle(old)
			continue
		}

		// if at least one byte has been copied, return
		if n > 0 {
			break
		}

		// if nothing was read, and there is nothing outstanding
		// check to see if the buffer is closed.
		if b.closed {
			err = io.EOF
			break
		}
		if b.deadline != nil && b.deadline.passed.Load() {
			return 0, os.ErrDeadlineExceeded
		}
		// out of buffers, wait for producer
		b.Cond.Wait()
	}
	return
}

// readShared is Read without the copy (hostgate, change 15): it waits as
// Read does and returns up to max bytes of the packet at the head of the
// buffer, where they lie, with what to give them back by. The bytes are
// the caller's to read until it calls release.Release, exactly once; the
// packet is reused only when every part handed out has been released and
// the buffer has moved past it. One call returns bytes of one packet.
func (b *buffer) readShared(max int) (p []byte, release interface{ Release() }, err error) {
	b.Cond.L.Lock()
	defer b.Cond.L.Unlock()

	if b.deadline != nil && b.deadline.passed.Load() {
		return nil, nil, os.ErrDeadlineExceeded
	}
	if max <= 0 {
		return nil, nil, nil
	}
	for {
		e := b.head
		if len(e.buf) > 0 {
			n := min(max, len(e.buf))
			p, e.buf = e.buf[:n:n], e.buf[n:]
			switch {
			case e.shared != nil:
				e.shared.refs.Add(1)
				release = e.shared
			case e.packet != nil:
				s := sharedPackets.Get().(*sharedPacket)
				s.packet = e.packet
				s.refs.Store(2) // the buffer's and the caller's
				e.shared = s
				release = s
			default:
				// Allocated for this packet alone (upstream's way):
				// nothing reuses it, the garbage collector frees it.
				release = noRelease{}
			}
			if len(e.buf) == 0 {
				b.releaseHead()
			}
			return p, release, nil
		}
		if e != b.tail {
			b.head = e.next
			b.recycle(e)
			continue
		}
		if b.closed {
			return nil, nil, io.EOF
		}
		if b.deadline != nil && b.deadline.passed.Load() {
			return nil, nil, os.ErrDeadlineExceeded
		}
		b.Cond.Wait()
	}
}

// noRelease releases bytes nothing reuses.
type noRelease struct{}

func (noRelease) Release() {}

// sharedPacket counts the holders of a received packet parts of which
// were handed out by reference: the channel's buffer, until it has moved
// past the packet, and each part's holder, until it calls Release.
type sharedPacket struct {
	packet []byte
	refs   atomic.Int32
}

var sharedPackets = sync.Pool{New: func() any { return new(sharedPacket) }}

// Release drops one holder; the last gives the packet back to
// dataPackets. A Release more than the holders panics: the packet may
// already hold another's data.
func (s *sharedPacket) Release() {
	switch n := s.refs.Add(-1); {
	case n == 0:
		releasePacket(s.packet)
		s.packet = nil
		sharedPackets.Put(s)
	case n < 0:
		panic("ssh: shared packet released more often than handed out")
	}
}
