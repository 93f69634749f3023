package bytestream

import (
	"bytes"
	crand "crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"time"
)

// Client frames written here, not by coder/websocket.
//
// RFC 6455 has a client mask every frame it sends. coder/websocket does it
// by copying the payload into its 4 KiB write buffer, masking it there, and
// flushing every 4 KiB to the conn, where the cork copies it again: two
// copies, a mask and eight flushes per 32 KiB SSH packet, on every byte an
// agent sends the gateway and a client sends a host. On a dialed plain-TCP
// WebSocket (ws://, no proxy that speaks anything but plain HTTP) this
// file writes data frames itself, straight into the cork: the header into
// the cork's buffer, and the payload either masked in place and held by
// reference (a write-behind buffer, which is ours) or masked while copied
// (a caller's slice, which must come back unchanged). Where the WebSocket
// is the plaintext of a TLS conn this package's transport made (wss://, or
// ws:// through an https:// proxy) it builds each batch of frames whole
// and gives it to the TLS conn in one write (tlsFrames, writeFramesTLS):
// 16 KiB records, where coder/websocket's 4 KiB flushes were a record
// each. Through a proxy's CONNECT tunnel the frames stay coder/websocket's.
//
// coder/websocket still writes its own control frames (pong, close) to the
// same conn. Each is one Write of the conn (it flushes its buffer at the
// end of every frame, and a control frame fits the buffer), and the cork,
// or tlsFrames, takes a Write whole under its mutex, so a control frame
// lands between two data frames, never inside one. Nothing else on the conn goes through
// coder/websocket's data path.

// newMaskKeys is the source of a conn's mask keys: ChaCha8, seeded from
// crypto/rand, so keys are unpredictable as RFC 6455 section 5.3 asks,
// without a getrandom call per frame.
func newMaskKeys() *rand.ChaCha8 {
	var seed [32]byte
	_, _ = crand.Read(seed[:]) // never returns an error (Go 1.24+)
	return rand.NewChaCha8(seed)
}

// maxClientHeader is a masked frame's longest header: 2 bytes, an 8-byte
// length, a 4-byte key.
const maxClientHeader = 14

// clientHeader puts the header of a final, masked binary frame of n bytes
// into b (at least maxClientHeader long) and returns its length.
func clientHeader(b []byte, n int, key uint32) int {
	b[0] = 0x80 | 0x2 // FIN, binary
	i := 2
	switch {
	case n < 126:
		b[1] = 0x80 | byte(n)
	case n <= 0xffff:
		b[1] = 0x80 | 126
		binary.BigEndian.PutUint16(b[2:], uint16(n))
		i = 4
	default:
		b[1] = 0x80 | 127
		binary.BigEndian.PutUint64(b[2:], uint64(n))
		i = 10
	}
	binary.LittleEndian.PutUint32(b[i:], key)
	return i + 4
}

// maskCopy writes src masked with key (RFC 6455 section 5.3, the key's
// bytes in header order, as little-endian) to dst, which may be src
// itself and must be at least as long; the payload starts at src[0].
func maskCopy(dst, src []byte, key uint32) {
	dst = dst[:len(src)]
	k := uint64(key)<<32 | uint64(key)
	i := 0
	for ; i+32 <= len(src); i += 32 {
		d, s := dst[i:i+32], src[i:i+32]
		binary.LittleEndian.PutUint64(d, binary.LittleEndian.Uint64(s)^k)
		binary.LittleEndian.PutUint64(d[8:], binary.LittleEndian.Uint64(s[8:])^k)
		binary.LittleEndian.PutUint64(d[16:], binary.LittleEndian.Uint64(s[16:])^k)
		binary.LittleEndian.PutUint64(d[24:], binary.LittleEndian.Uint64(s[24:])^k)
	}
	for ; i+8 <= len(src); i += 8 {
		binary.LittleEndian.PutUint64(dst[i:], binary.LittleEndian.Uint64(src[i:])^k)
	}
	for ; i < len(src); i++ {
		dst[i] = src[i] ^ byte(key>>(8*(i%4)))
	}
}

// appendFrame adds a masked frame of p to what the cork holds, flushing
// first if it does not fit. inPlace: p is the writer's to change, and is
// masked where it lies and held by reference; else it is masked into the
// cork's buffer. The cork is on (corkOn), so p stays valid until uncork.
func (c *corkConn) appendFrame(p []byte, key uint32, inPlace bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.watch.closeSent {
		// coder/websocket sent a close frame (Close, or a protocol
		// error it closed the conn for): no data frame may follow.
		return net.ErrClosed
	}
	need := maxClientHeader
	if !inPlace {
		need += len(p)
	}
	if len(c.vec)+2 > maxCorkPieces || len(*c.buf)+need > cap(*c.buf) {
		if err := c.flushLocked(); err != nil {
			return err
		}
	}
	start := len(*c.buf)
	var h [maxClientHeader]byte
	*c.buf = append(*c.buf, h[:clientHeader(h[:], len(p), key)]...)
	if inPlace {
		maskCopy(p, p, key)
	} else {
		end := len(*c.buf) + len(p)
		*c.buf = (*c.buf)[:end] // fits: flushed above if not, and one frame fits an empty buffer
		maskCopy((*c.buf)[end-len(p):end], p, key)
	}
	if c.open >= 0 && len(c.vec) > 0 && c.open+len(c.vec[len(c.vec)-1]) == start {
		c.vec[len(c.vec)-1] = (*c.buf)[c.open:] // contiguous with the last copy
	} else {
		c.vec = append(c.vec, (*c.buf)[start:])
		c.open = start
	}
	if inPlace {
		c.vec = append(c.vec, p)
		c.open = -1
	}
	return nil
}

// writeFrames writes p as masked binary messages of at most MaxMessageSize
// bytes in one corked call, as writeParts does through coder/websocket:
// into the cork where it is the WebSocket's own conn (own: p may be masked
// in place, see appendFrame), or to the TLS conn whose plaintext the
// WebSocket is (tlsf, writeFramesTLS).
func (c *wsConn) writeFrames(p []byte, own bool) (int, error) {
	mc := c.Conn.(*msgConn)
	mc.writeMu.Lock()
	defer mc.writeMu.Unlock()
	if mc.wd.expired.Load() {
		return 0, fmt.Errorf("bytestream: websocket write: %w", os.ErrDeadlineExceeded)
	}
	var d time.Time
	if t := c.writeDeadline.Load(); t != nil {
		d = *t
	}
	var (
		n   int
		err error
	)
	if c.tlsf != nil {
		n, err = c.writeFramesTLS(p, d)
	} else {
		copied := len(p)
		if own {
			copied = 0 // only headers are copied
		}
		c.cork.corkFor(nil, copied)
		for len(p) > 0 && err == nil {
			chunk := p[:min(len(p), MaxMessageSize)]
			if err = c.cork.appendFrame(chunk, uint32(c.keys.Uint64()), own); err == nil {
				n += len(chunk)
				p = p[len(chunk):]
			}
		}
		if ferr := c.cork.uncork(d); ferr != nil && err == nil {
			err = ferr
		}
	}
	if err != nil {
		// Frames are half sent: the stream cannot continue.
		_ = c.ws.CloseNow()
		return 0, deadlineErr(fmt.Errorf("bytestream: websocket write: %w", err), &c.writeDeadline)
	}
	return n, nil
}

// writeFramesTLS is writeFrames over TLS: the frames of up to wbMax bytes
// at a time are built whole (header, then the payload masked while
// copied) and handed to the TLS conn in one write, which seals them in
// records of up to 16 KiB (smaller while crypto/tls's record sizing
// starts a conn); coder/websocket's 4 KiB flushes were a record each. The
// TCP conn is corked for it, so the records leave in one write.
func (c *wsConn) writeFramesTLS(p []byte, deadline time.Time) (int, error) {
	bp := tlsFrameBufs.Get().(*[]byte)
	defer tlsFrameBufs.Put(bp)
	n := 0
	for len(p) > 0 {
		batch := p[:min(len(p), wbMax)]
		b := (*bp)[:0]
		for q := batch; len(q) > 0; {
			chunk := q[:min(len(q), MaxMessageSize)]
			key := uint32(c.keys.Uint64())
			var h [maxClientHeader]byte
			b = append(b, h[:clientHeader(h[:], len(chunk), key)]...)
			start := len(b)
			b = b[:start+len(chunk)] // fits: the buffer holds wbMax and four headers
			maskCopy(b[start:], chunk, key)
			q = q[len(chunk):]
		}
		c.cork.corkFor(nil, len(b))
		err := c.tlsf.writeFrames(b)
		if ferr := c.cork.uncork(deadline); ferr != nil && err == nil {
			err = ferr
		}
		if err != nil {
			return n, err
		}
		n += len(batch)
		p = p[len(batch):]
	}
	return n, nil
}

// tlsFrameBufs hold the frames of one writeFramesTLS batch.
var tlsFrameBufs = sync.Pool{New: func() any {
	b := make([]byte, 0, wbMax+(wbMax/MaxMessageSize)*maxClientHeader)
	return &b
}}

// frameWatch follows what coder/websocket writes to a conn that this
// package may write data frames to. plain: the conn's first write is an
// HTTP GET in the clear, so the conn carries the WebSocket itself (not
// TLS, or a proxy's CONNECT, under it) and data frames can be written to
// it. After the handshake's text every write of coder/websocket's is one
// whole control frame, and text never starts with 0x88; closeSent: one was
// a close frame, after which RFC 6455 allows no data frame.
type frameWatch struct {
	wrote, plain, closeSent bool
}

// saw notes a write of coder/websocket's.
func (w *frameWatch) saw(p []byte) {
	if !w.wrote {
		w.wrote = true
		w.plain = bytes.HasPrefix(p, []byte("GET "))
	}
	if w.plain && len(p) > 0 && p[0] == 0x88 { // FIN, close
		w.closeSent = true
	}
}

// tlsFrames is a TLS conn corkClient made: to a wss:// gateway, or to an
// https:// proxy. Where its first plaintext is the handshake's GET (the
// gateway's, or a ws:// one's sent to the proxy) the WebSocket is its
// plaintext and data frames are written to it. coder/websocket writes its
// handshake and control frames through Write, where the plaintext shows
// (frameWatch); data frames go through writeFrames, in order with them.
type tlsFrames struct {
	*tls.Conn
	tcp *corkConn // the TCP conn under it

	mu    sync.Mutex // serializes writes, so the watch sees them in order
	watch frameWatch
}

func (c *tlsFrames) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.watch.saw(p)
	return c.Conn.Write(p)
}

// writeFramesHere is corkConn.writeFramesHere for the TLS conn.
func (c *tlsFrames) writeFramesHere() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.watch.plain
}

// writeFrames writes whole data frames, unless a close frame went first.
func (c *tlsFrames) writeFrames(b []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.watch.closeSent {
		return net.ErrClosed
	}
	_, err := c.Conn.Write(b)
	return err
}
