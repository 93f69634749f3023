package bicopy

import (
	"bytes"
	"crypto/rand"
	"io"
	"testing"
)

// chunkReader returns its data in reads of at most the given sizes, in
// turn (the last size repeats).
type chunkReader struct {
	data  []byte
	sizes []int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(r.data), r.sizes[0])
	if len(r.sizes) > 1 {
		r.sizes = r.sizes[1:]
	}
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

// sizeWriter keeps what it is given and the size of each write.
type sizeWriter struct {
	buf   bytes.Buffer
	sizes []int
}

func (w *sizeWriter) Write(p []byte) (int, error) {
	w.sizes = append(w.sizes, len(p))
	return w.buf.Write(p)
}

// TestCopyGrowsAndShrinksBuffer: a bulk source is copied in big writes
// once reads fill the small buffer, and back in small ones when the source
// turns interactive; every byte arrives in order.
func TestCopyGrowsAndShrinksBuffer(t *testing.T) {
	data := randBytes(t, 4<<20)
	sizes := []int{1 << 30, 1 << 30, 1 << 30, 1 << 30}
	for range 8 {
		sizes = append(sizes, 100) // interactive: keystrokes
	}
	sizes = append(sizes, 1<<30)
	src := &chunkReader{data: data, sizes: sizes}
	dst := &sizeWriter{}
	n, err := copyHalf(dst, src)
	if err != nil || n != int64(len(data)) {
		t.Fatalf("copied %d, %v; want %d", n, err, len(data))
	}
	if !bytes.Equal(dst.buf.Bytes(), data) {
		t.Fatal("bytes changed or reordered")
	}
	want := []int{smallBuf, bigBuf, bigBuf, bigBuf, 100, 100, 100}
	for i, w := range want {
		if dst.sizes[i] != w {
			t.Fatalf("write %d was %d bytes, want %d (writes %v…)", i, dst.sizes[i], w, dst.sizes[:len(want)])
		}
	}
	// After the small reads the small buffer is back: the next bulk read
	// is bounded by it, then grows again.
	after := dst.sizes[4+8:]
	if after[0] != smallBuf || after[1] != bigBuf {
		t.Fatalf("after the interactive part writes were %v…, want %d then %d", after[:2], smallBuf, bigBuf)
	}
}

// TestCopyKeepsBufferForMessageTails: a source of 33 KiB messages (an SSH
// packet per WebSocket message) whose first read fills the small buffer
// answers the next with the message's tail; the buffer stays big, so the
// following messages pass whole, not as a packet and a sliver each.
func TestCopyKeepsBufferForMessageTails(t *testing.T) {
	const msg = 32<<10 + 52
	data := randBytes(t, 8*msg)
	dst := &sizeWriter{}
	if _, err := copyHalf(dst, &messageReader{data: data, size: msg}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst.buf.Bytes(), data) {
		t.Fatal("bytes changed or reordered")
	}
	want := []int{smallBuf, msg - smallBuf, msg, msg, msg, msg, msg, msg, msg}
	if len(dst.sizes) != len(want) {
		t.Fatalf("writes %v, want %v", dst.sizes, want)
	}
	for i := range want {
		if dst.sizes[i] != want[i] {
			t.Fatalf("writes %v, want %v", dst.sizes, want)
		}
	}
}

// messageReader returns data as messages of size bytes: a read never
// crosses a message boundary.
type messageReader struct {
	data []byte
	size int
	left int // of the current message
}

func (r *messageReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	if r.left == 0 {
		r.left = min(r.size, len(r.data))
	}
	n := copy(p, r.data[:r.left])
	r.data, r.left = r.data[n:], r.left-n
	return n, nil
}

// TestCopyShortWrite: a writer that takes less than it was given fails the
// copy instead of losing bytes silently.
func TestCopyShortWrite(t *testing.T) {
	src := &chunkReader{data: make([]byte, 1000), sizes: []int{1000}}
	if _, err := copyHalf(shortWriter{}, src); err != io.ErrShortWrite {
		t.Fatalf("err = %v, want io.ErrShortWrite", err)
	}
}

type shortWriter struct{}

func (shortWriter) Write(p []byte) (int, error) { return len(p) / 2, nil }

func randBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// countWriter counts writes and bytes.
type countWriter struct{ writes, bytes int }

func (w *countWriter) Write(p []byte) (int, error) { w.writes++; w.bytes += len(p); return len(p), nil }

// BenchmarkCopyHalf copies 64 MiB arriving as SSH-packet-sized messages
// (a caller's WebSocket at the gateway); writes/MiB is what every hop
// behind the copy pays per frame.
func BenchmarkCopyHalf(b *testing.B) {
	const total = 64 << 20
	data := make([]byte, total)
	b.SetBytes(total)
	var w countWriter
	for b.Loop() {
		w = countWriter{}
		if _, err := copyHalf(&w, &messageReader{data: data, size: 32<<10 + 52}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(w.writes)/float64(total>>20), "writes/MiB")
}
