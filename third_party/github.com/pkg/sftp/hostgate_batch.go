package sftp

// hostgate: change 23 (HOSTGATE.md). The server wrote every reply on its
// own, and an SSH channel cuts each Write into packets of the peer's
// largest size: OpenSSH's sftp reads in 32 KiB requests over a channel of
// 32 KiB packets, so each 32,781-byte data reply went out as a full packet
// and a 13-byte one, twice the packets (and their seals, MACs and the
// client's wake-ups) that sshd's sftp-server sends for the same bytes.
// The server's packet manager now writes the replies it has ready into
// one buffer, which goes out whole when full or when no more replies are
// waiting; a reply of half the buffer or more goes out as it is, without
// a copy (hostgate's own client's 255 KiB reads).

import (
	"io"
	"sync"
)

// replyBatchMax is the batch buffer's size: a whole number of 32 KiB
// packets, OpenSSH's channel packet size, so a full batch is cut into
// full packets.
const replyBatchMax = 256 << 10

// Batch buffers are held only while a batch is being gathered: an idle
// session holds none.
var replyBatchPool = sync.Pool{New: func() any {
	b := make([]byte, 0, replyBatchMax)
	return &b
}}

// replyBatch is a server connection's writer. Its user holds the conn's
// lock.
type replyBatch struct {
	w   io.WriteCloser
	buf *[]byte // the batch gathered; nil while it is empty
}

func (b *replyBatch) Write(p []byte) (int, error) {
	if len(p) >= replyBatchMax/2 {
		if err := b.flush(); err != nil {
			return 0, err
		}
		return b.w.Write(p)
	}
	n := 0
	for len(p) > 0 {
		if b.buf == nil {
			b.buf = replyBatchPool.Get().(*[]byte)
		}
		buf := *b.buf
		k := min(len(p), cap(buf)-len(buf))
		*b.buf = append(buf, p[:k]...)
		p, n = p[k:], n+k
		if len(*b.buf) == cap(*b.buf) {
			if err := b.flush(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// flush writes the batch gathered, if any.
func (b *replyBatch) flush() error {
	if b.buf == nil {
		return nil
	}
	buf := b.buf
	b.buf = nil
	_, err := b.w.Write(*buf)
	*buf = (*buf)[:0]
	replyBatchPool.Put(buf)
	return err
}

// closeBeneath closes what the batch writes to and leaves the batch to
// the send that holds the conn's lock (change 31's Close beside it): its
// buffer goes back to the pool from that send's flush, or not at all.
func (b *replyBatch) closeBeneath() error { return b.w.Close() }

func (b *replyBatch) Close() error {
	if b.buf != nil {
		*b.buf = (*b.buf)[:0]
		replyBatchPool.Put(b.buf)
		b.buf = nil
	}
	return b.w.Close()
}

// newServerConn is a server's connection over rwc, its replies batched.
func newServerConn(rwc io.ReadWriteCloser) *serverConn {
	return &serverConn{conn: conn{Reader: rwc, WriteCloser: &replyBatch{w: rwc}, sendMu: newSendLock()}}
}

// flushReplies writes the replies batched so far: the packet manager
// calls it when no more are ready.
func (s *serverConn) flushReplies() error {
	s.sendMu.lock()
	defer s.sendMu.unlock()
	if b, ok := s.WriteCloser.(*replyBatch); ok {
		return b.flush()
	}
	return nil
}
