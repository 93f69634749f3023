package yamux

import "io"

// hostgate: recvRing replaces the bytes.Buffer upstream keeps a stream's
// received, unread bytes in.
//
// bytes.Buffer slides its unread bytes to the front only while they fill
// less than half of it; past that it allocates a new, zeroed buffer of
// about the old size plus the frame and copies them over. On the gateway a
// relay that lags its host by more than half the buffer (a caller slower
// than the agent, for a while) met that at every frame that reached the end
// of the buffer: in BenchmarkThroughput/websocket+yamux/window=4M the
// zeroing alone was 6% of the CPU, as much as the unmasking. A ring never
// moves what it holds; it grows, by doubling, only when the unread bytes
// and the next frame do not fit, so the stream window bounds it.
type recvRing struct {
	buf  []byte
	r, n int // the unread bytes are n bytes from buf[r], wrapping at len(buf)
}

func newRecvRing(size int) *recvRing { return &recvRing{buf: make([]byte, size)} }

// Len is the number of unread bytes.
func (q *recvRing) Len() int { return q.n }

// Cap is the ring's size.
func (q *recvRing) Cap() int { return len(q.buf) }

// Read moves up to len(p) unread bytes to p.
func (q *recvRing) Read(p []byte) (int, error) {
	if q.n == 0 {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	k := 0
	for k < len(p) && q.n > 0 {
		end := q.r + q.n
		if end > len(q.buf) {
			end = len(q.buf) // the rest is at the front
		}
		c := copy(p[k:], q.buf[q.r:end])
		k += c
		q.r += c
		q.n -= c
		if q.r == len(q.buf) {
			q.r = 0
		}
	}
	if q.n == 0 {
		q.r = 0 // the next frame lands in one piece
	}
	return k, nil
}

// fill reads up to n bytes from src into the ring, growing it first if
// they do not fit. Like io.Copy, it stops without an error at src's EOF.
func (q *recvRing) fill(src io.Reader, n int) (int, error) {
	if q.n+n > len(q.buf) {
		q.grow(q.n + n)
	}
	total := 0
	for total < n {
		w := q.r + q.n
		if w >= len(q.buf) {
			w -= len(q.buf)
		}
		end := len(q.buf) // free: buf[w:] and then buf[:r]
		if w < q.r {
			end = q.r // free: buf[w:r]
		}
		if end > w+n-total {
			end = w + n - total
		}
		c, err := src.Read(q.buf[w:end])
		q.n += c
		total += c
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// grow makes room for at least need bytes, the unread ones moved to the
// front.
func (q *recvRing) grow(need int) {
	size := 2 * len(q.buf) // the package's min and max are uint32's
	if size < need {
		size = need
	}
	nb := make([]byte, size)
	n := q.n
	_, _ = q.Read(nb[:n])
	q.buf, q.r, q.n = nb, 0, n
}
