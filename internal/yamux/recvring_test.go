package yamux

import (
	"bytes"
	"io"
	"math/rand/v2"
	"runtime"
	"testing"
)

// hostgate: a stream whose reader lags its peer by more than half of what
// it holds keeps one receive buffer. bytes.Buffer, which upstream keeps
// the unread bytes in, allocated a new one of about its own size at every
// frame that reached its end: here 24 MiB for 64 MiB received.
// Frames go to the stream as the session's receive loop hands them over
// (readData), in one goroutine with the reads, so the lag is exact.
func TestLaggingReaderKeepsItsBuffer(t *testing.T) {
	conf := testConfData()
	conf.MaxStreamWindowSize = 16 << 20 // room for the lag below
	cc, sc := testConnTCP(t)
	client, server := testClientServerConfig(t, cc, sc, conf, conf)
	stream, err := client.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Write([]byte{0}); err != nil { // the open reaches the server with it
		t.Fatal(err)
	}
	ss, err := server.AcceptStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(ss, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}

	const frame = 64 << 10
	chunk := make([]byte, frame)
	hdr := header(make([]byte, headerSize))
	hdr.encode(typeData, 0, ss.id, frame)
	var sent, got uint64
	deliver := func() {
		for i := range chunk {
			chunk[i] = byte(sent + uint64(i))
		}
		sent += frame
		if err := ss.readData(hdr, 0, bytes.NewReader(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, frame)
	read := func() {
		n, err := io.ReadFull(ss, buf)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if buf[i] != byte(got+uint64(i)) {
				t.Fatalf("byte %d: got %d, want %d", got+uint64(i), buf[i], byte(got+uint64(i)))
			}
		}
		got += uint64(n)
	}

	// 6 MiB unread, then a frame in for each frame read.
	for range 96 {
		deliver()
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 1024 {
		read()
		deliver()
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 2<<20 {
		t.Errorf("receiving 64 MiB 6 MiB ahead of the reader allocated %.1f MiB; want under 2 (the buffer it has)", float64(alloc)/(1<<20))
	}
}

// TestRecvRing checks the ring against a plain slice: frames and reads of
// random sizes, wrapping and growing.
func TestRecvRing(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q *recvRing
	var want []byte
	next := byte(0)
	for range 20000 {
		if rng.IntN(2) == 0 {
			n := rng.IntN(5000)
			p := make([]byte, n)
			for i := range p {
				p[i] = next
				next++
			}
			if q == nil {
				q = newRecvRing(n + 1)
			}
			// A reader that hands out at most 700 bytes a call, as a
			// WebSocket message reader may.
			got, err := q.fill(&shortReader{bytes.NewReader(p), 700}, n)
			if err != nil || got != n {
				t.Fatalf("fill(%d) = %d, %v", n, got, err)
			}
			want = append(want, p...)
		} else if q != nil {
			p := make([]byte, rng.IntN(7000))
			n, _ := q.Read(p)
			if n != len(p) && n != len(want) || !bytes.Equal(p[:n], want[:n]) {
				t.Fatalf("read %d of %d: got %d bytes, not the next ones", len(p), len(want), n)
			}
			want = want[n:]
		}
		if q != nil && q.Len() != len(want) {
			t.Fatalf("Len = %d, want %d", q.Len(), len(want))
		}
	}
}

// TestRecvRingShortFrame: a frame cut short by the end of the conn is what
// was read of it, without an error, as io.Copy had it (the next header read
// then fails).
func TestRecvRingShortFrame(t *testing.T) {
	q := newRecvRing(8)
	n, err := q.fill(bytes.NewReader([]byte("abc")), 8)
	if n != 3 || err != nil || q.Len() != 3 {
		t.Fatalf("fill = %d, %v; Len %d", n, err, q.Len())
	}
}

type shortReader struct {
	r   io.Reader
	max int
}

func (s *shortReader) Read(p []byte) (int, error) {
	if len(p) > s.max {
		p = p[:s.max]
	}
	return s.r.Read(p)
}
