package bytestream

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/coder/websocket"
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
		if got := c.writeFramesHere(); got != tc.want {
			t.Errorf("first write %q: writeFramesHere = %v, want %v", tc.first, got, tc.want)
		}
		x.Close()
		y.Close()
	}
}

// TestClientFramesEndAtCloseFrame: once coder/websocket has sent a close
// frame (here: the server sent a text message, which the client refuses
// by closing), no data frame follows it on the wire (RFC 6455 section
// 5.5.1), though a writer is streaming the whole time. A proxy records
// what the client sends.
func TestClientFramesEndAtCloseFrame(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		c.SetReadLimit(1 << 30)
		if _, _, err := c.Read(r.Context()); err != nil { // data is flowing
			return
		}
		_ = c.Write(r.Context(), websocket.MessageText, []byte("x"))
		for {
			if _, _, err := c.Read(r.Context()); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	rec := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			rec <- nil
			return
		}
		defer c.Close()
		s, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
		if err != nil {
			rec <- nil
			return
		}
		go func() { _, _ = io.Copy(c, s); c.Close() }()
		var buf bytes.Buffer
		_, _ = io.Copy(io.MultiWriter(s, &buf), c)
		s.Close()
		rec <- buf.Bytes()
	}()
	a, err := WebSocket(testCtx(t), "ws://"+ln.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.(*wsConn).keys == nil {
		t.Fatal("a dialed ws:// conn does not write its own frames")
	}
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		p := make([]byte, 1000)
		for range 1_000_000 { // ends at the first failed write
			if _, err := a.Write(p); err != nil {
				return
			}
		}
	}()
	if _, err := a.Read(make([]byte, 10)); err == nil {
		t.Fatal("a text message was read as data")
	}
	<-wrote
	a.Close()
	b := <-rec
	if b == nil {
		t.Fatal("proxy failed")
	}
	b = b[bytes.Index(b, []byte("\r\n\r\n"))+4:]
	closeSeen, before, after := false, 0, 0
	for len(b) >= 2 {
		op, n, i := b[0]&0xf, int(b[1]&0x7f), 2
		switch n {
		case 126:
			n, i = int(binary.BigEndian.Uint16(b[2:])), 4
		case 127:
			n, i = int(binary.BigEndian.Uint64(b[2:])), 10
		}
		i += 4 // mask key
		if len(b) < i+n {
			break
		}
		switch {
		case op == 8:
			closeSeen = true
		case op == 2 && closeSeen:
			after++
		case op == 2:
			before++
		}
		b = b[i+n:]
	}
	if !closeSeen || before == 0 {
		t.Fatalf("close frame seen: %v, data frames before it: %d; the test did not exercise the case", closeSeen, before)
	}
	if after > 0 {
		t.Fatalf("%d data frames after the client's close frame", after)
	}
}

// TestClientFramesNotUnderTLS: over wss:// the frames stay
// coder/websocket's, written through TLS, and arrive intact. Written
// straight to the TCP conn they would skip the encryption, and the server
// would see records it cannot read.
func TestClientFramesNotUnderTLS(t *testing.T) {
	url, ch := tlsWSServer(t)
	a, err := WebSocket(testCtx(t), "wss"+strings.TrimPrefix(url, "https"), nil)
	if err != nil {
		t.Fatal(err)
	}
	b := <-ch
	defer closeBoth(a, b)
	if a.(*wsConn).keys != nil {
		t.Fatal("frames are written to the TCP conn under TLS")
	}
	exchange(t, a, b, 1<<20)
}

// TestClientFramesAfterRedirect: a handshake the server redirects (a
// proxy sending http:// to another address, or to https://) dials a conn
// per hop. The WebSocket is on the last one, and so are the frames: to
// ws://, written here; to wss://, coder/websocket's, through TLS.
func TestClientFramesAfterRedirect(t *testing.T) {
	plainURL, plainCh := wsServer(t, nil)
	tlsURL, tlsCh := tlsWSServer(t)

	for _, tc := range []struct {
		name, to string
		ch       <-chan net.Conn
		ours     bool
	}{
		{"to ws", plainURL, plainCh, true},
		{"to wss", tlsURL, tlsCh, false},
	} {
		redir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, tc.to, http.StatusTemporaryRedirect)
		}))
		a, err := WebSocket(testCtx(t), redir.URL, nil)
		if err != nil {
			redir.Close()
			t.Fatalf("%s: %v", tc.name, err)
		}
		var b net.Conn
		select {
		case b = <-tc.ch:
		case <-testCtx(t).Done():
			t.Fatalf("%s: no server conn", tc.name)
		}
		if got := a.(*wsConn).keys != nil; got != tc.ours {
			t.Errorf("%s: frames written here %v, want %v", tc.name, got, tc.ours)
		}
		exchange(t, a, b, 256<<10)
		closeBoth(a, b)
		redir.Close()
	}
}

// tlsWSServer is wsServer over TLS (an https:// URL), with the package's
// dialing transport trusting its certificate until the test ends.
func tlsWSServer(t *testing.T) (string, <-chan net.Conn) {
	ch := make(chan net.Conn, 1)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, err := Accept(w, r, nil); err == nil {
			ch <- c
		}
	}))
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	tr := corkClient().Transport.(*http.Transport)
	old := tr.TLSClientConfig
	tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	t.Cleanup(func() { tr.TLSClientConfig = old })
	return srv.URL, ch
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
