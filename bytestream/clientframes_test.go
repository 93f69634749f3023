package bytestream

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// TestClientFramesSizes: a dialed ws:// conn writes its frames itself, and
// the accepting side (coder/websocket) reads every header form — 7-bit,
// 16-bit and 64-bit lengths — back intact.
func TestClientFramesSizes(t *testing.T) {
	a, b := wsPair(t)
	if a.(*wsConn).keys == nil {
		t.Fatal("a dialed ws:// conn does not write its own frames")
	}
	for _, n := range []int{1, 125, 126, 127, 0xffff, 0x10000, MaxMessageSize + 1, wbMax, 3*wbMax + 7} {
		p := randomData(uint64(n), n)
		keep := bytes.Clone(p)
		done := make(chan error, 1)
		go func() { _, err := a.Write(p); done <- err }()
		got := make([]byte, n)
		if _, err := io.ReadFull(b, got); err != nil {
			t.Fatalf("%d bytes: read: %v", n, err)
		}
		if err := <-done; err != nil {
			t.Fatalf("%d bytes: write: %v", n, err)
		}
		if !bytes.Equal(got, keep) {
			t.Fatalf("%d bytes: received bytes differ from those written", n)
		}
		if !bytes.Equal(p, keep) {
			t.Fatalf("%d bytes: the caller's buffer was changed (masked in place?)", n)
		}
	}
}

// TestClientFramesWithControlFrames: while the client streams, the server
// pings it without pause, so coder/websocket writes pongs to the same conn
// between (never inside) the frames written here; every byte arrives in
// order, and no write of the caller's is changed. The stream goes on
// until 20 pings were answered during it (at most 256 MiB).
func TestClientFramesWithControlFrames(t *testing.T) {
	a, b := wsPair(t)
	ws := b.(*wsConn).ws
	go func() { _, _ = io.Copy(io.Discard, a) }() // reads the pings, so pongs are written

	ctx, cancel := context.WithCancel(testCtx(t))
	var pings atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ws.Ping(ctx) == nil {
			pings.Add(1)
		}
	}()
	defer func() { cancel(); wg.Wait() }()

	type result struct {
		written int
		err     error
	}
	done := make(chan result, 1)
	go func() {
		sizes := rand.New(rand.NewPCG(3, 3))
		src := rand.NewChaCha8([32]byte{7})
		written := 0
		for pings.Load() < 20 || written < 4<<20 {
			if written >= 256<<20 {
				a.Close()
				done <- result{err: fmt.Errorf("only %d pings answered in %d MiB", pings.Load(), written>>20)}
				return
			}
			p := make([]byte, 1+sizes.IntN(3*wbMax))
			_, _ = src.Read(p)
			keep := bytes.Clone(p)
			if _, err := a.Write(p); err != nil {
				a.Close()
				done <- result{err: err}
				return
			}
			if !bytes.Equal(p, keep) {
				a.Close() // ends the reader
				done <- result{err: errors.New("the caller's buffer was changed")}
				return
			}
			written += len(p)
		}
		done <- result{written, a.Close()} // the reader sees EOF after the last byte
	}()

	want := rand.NewChaCha8([32]byte{7})
	got, exp := make([]byte, 64<<10), make([]byte, 64<<10)
	read := 0
	for {
		n, err := b.Read(got)
		if n > 0 {
			_, _ = want.Read(exp[:n])
			if !bytes.Equal(got[:n], exp[:n]) {
				t.Fatalf("stream corrupted after %d bytes", read)
			}
			read += n
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			if r := <-done; r.err != nil {
				t.Fatal(r.err)
			}
			t.Fatalf("read after %d bytes: %v", read, err)
		}
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if read != r.written {
		t.Fatalf("read %d bytes, %d written", read, r.written)
	}
	t.Logf("%d pings answered during %d MiB", pings.Load(), read>>20)
}

// TestClientFramesOnlyOnPlainHTTP: frames go straight to the TCP conn only
// when its first bytes are the HTTP upgrade itself; under TLS, or after a
// proxy's CONNECT (TLS follows), they would bypass the encryption.
func TestClientFramesOnlyOnPlainHTTP(t *testing.T) {
	for _, tc := range []struct {
		first string
		want  bool
	}{
		{"GET /v1/agents/connect HTTP/1.1\r\nHost: gw\r\n\r\n", true},
		{"GET http://gw/v1/agents/connect HTTP/1.1\r\n\r\n", true}, // a plain HTTP proxy
		{"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", false},    // TLS ClientHello
		{"CONNECT gw:443 HTTP/1.1\r\nHost: gw:443\r\n\r\n", false},
		{"\x05\x01\x00", false}, // SOCKS5
	} {
		x, y := net.Pipe()
		go func() { _, _ = io.Copy(io.Discard, y) }()
		c := &corkConn{Conn: x}
		if _, err := c.Write([]byte(tc.first)); err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write([]byte("GET / HTTP/1.1\r\n\r\n")) // only the first write counts
		if got := c.carriesFrames(); got != tc.want {
			t.Errorf("first write %q: carriesFrames = %v, want %v", tc.first, got, tc.want)
		}
		x.Close()
		y.Close()
	}
}

// TestClientFramesAfterClose: a write after Close fails instead of
// putting a data frame after the close frame.
func TestClientFramesAfterClose(t *testing.T) {
	a, b := wsPair(t)
	go func() { _, _ = io.Copy(io.Discard, b) }()
	closeBoth(a, b)
	if _, err := a.(*wsConn).writeFrames([]byte("late"), false); err == nil {
		t.Fatal("a frame was written after Close")
	}
}

// maskRef is RFC 6455 section 5.3, byte by byte.
func maskRef(p []byte, key [4]byte) {
	for i := range p {
		p[i] ^= key[i%4]
	}
}

func FuzzMaskCopy(f *testing.F) {
	f.Add([]byte("hello, world"), uint32(0x12345678))
	f.Add(make([]byte, 100), uint32(0xffffffff))
	f.Add([]byte{}, uint32(1))
	f.Fuzz(func(t *testing.T, p []byte, key uint32) {
		var k [4]byte
		binary.LittleEndian.PutUint32(k[:], key) // the order the header carries it in
		want := bytes.Clone(p)
		maskRef(want, k)

		dst := make([]byte, len(p)+3)
		src := bytes.Clone(p)
		maskCopy(dst, src, key)
		if !bytes.Equal(dst[:len(p)], want) || !bytes.Equal(src, p) {
			t.Fatal("masked copy differs from RFC 6455's masking, or changed its source")
		}
		maskCopy(src, src, key)
		if !bytes.Equal(src, want) {
			t.Fatal("masking in place differs from RFC 6455's masking")
		}
		maskCopy(src, src, key)
		if !bytes.Equal(src, p) {
			t.Fatal("masking twice did not restore the bytes")
		}
	})
}

func TestClientHeader(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want []byte
	}{
		{0, []byte{0x82, 0x80}},
		{125, []byte{0x82, 0x80 | 125}},
		{126, []byte{0x82, 0x80 | 126, 0, 126}},
		{0xffff, []byte{0x82, 0x80 | 126, 0xff, 0xff}},
		{0x10000, []byte{0x82, 0x80 | 127, 0, 0, 0, 0, 0, 1, 0, 0}},
	} {
		var b [maxClientHeader]byte
		n := clientHeader(b[:], tc.n, 0x04030201)
		want := append(tc.want, 1, 2, 3, 4)
		if !bytes.Equal(b[:n], want) {
			t.Errorf("header for %d bytes = % x, want % x", tc.n, b[:n], want)
		}
	}
}

// BenchmarkMask: the masked copy against what coder/websocket's write
// path does per byte (a copy into its buffer, then masking there).
func BenchmarkMask(b *testing.B) {
	src := randomData(1, 32<<10)
	dst := make([]byte, len(src))
	b.Run("maskCopy", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			maskCopy(dst, src, 0x01020304)
		}
	})
	b.Run("inPlace", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			maskCopy(dst, dst, 0x01020304)
		}
	})
}
