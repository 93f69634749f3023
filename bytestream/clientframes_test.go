package bytestream

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
// until 20 pings were answered during it (at most 256 MiB). Over ws://
// the frames go to the cork; over wss:// to the TLS conn (tlsFrames).
func TestClientFramesWithControlFrames(t *testing.T) {
	for _, tc := range []struct {
		name string
		pair func(testing.TB) (net.Conn, net.Conn)
	}{{"ws", wsPair}, {"wss", wssPair}} {
		t.Run(tc.name, func(t *testing.T) { streamWithPings(t, tc.pair) })
	}
}

func streamWithPings(t *testing.T, pair func(testing.TB) (net.Conn, net.Conn)) {
	a, b := pair(t)
	if a.(*wsConn).keys == nil {
		t.Fatal("the client frames are coder/websocket's")
	}
	failNotHang(a, b)
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
// what the client sends; over wss:// it ends the TLS, and records the
// plaintext.
func TestClientFramesEndAtCloseFrame(t *testing.T) {
	for _, scheme := range []string{"ws", "wss"} {
		t.Run(scheme, func(t *testing.T) { framesEndAtCloseFrame(t, scheme) })
	}
}

func framesEndAtCloseFrame(t *testing.T, scheme string) {
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
	if scheme == "wss" {
		ln = tls.NewListener(ln, &tls.Config{Certificates: trustTestCert(t)})
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
	a, err := WebSocket(testCtx(t), scheme+"://"+ln.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if wc := a.(*wsConn); wc.keys == nil || (wc.tlsf != nil) != (scheme == "wss") {
		t.Fatalf("a dialed %s:// conn does not write its own frames", scheme)
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

// TestClientFramesUnderTLS: over wss:// the data frames are this
// package's too, written to the TLS conn (never to the TCP conn under it,
// where they would skip the encryption), and everything arrives both
// ways. TestClientFramesWithControlFrames streams over wss:// as well.
func TestClientFramesUnderTLS(t *testing.T) {
	a, b := wssPair(t)
	if wc := a.(*wsConn); wc.keys == nil || wc.tlsf == nil {
		t.Fatal("a wss:// conn does not write its own frames through TLS")
	}
	failNotHang(a, b)
	exchange(t, a, b, 8<<20)
	big := randomData(9, 3*wbMax+5) // the caller's own buffer: copied, not masked in place
	keep := bytes.Clone(big)
	go func() { _, _ = a.Write(big) }()
	got, err := readRandomly(b, len(big), 1)
	if err != nil || !bytes.Equal(got, keep) {
		t.Fatalf("large write through TLS: %v", err)
	}
	if !bytes.Equal(big, keep) {
		t.Fatal("the caller's buffer was changed")
	}
}

// TestTLSFramesEndAtCloseFrame: under TLS the close frame is seen in the
// plaintext coder/websocket writes, and no data frame follows it.
func TestTLSFramesEndAtCloseFrame(t *testing.T) {
	x, y := net.Pipe()
	defer x.Close()
	defer y.Close()
	ts := httptest.NewTLSServer(http.NotFoundHandler()) // for its certificate
	defer ts.Close()
	pool := x509.NewCertPool()
	pool.AddCert(ts.Certificate())
	cfg := &tls.Config{RootCAs: pool, ServerName: "example.com"}
	srv := tls.Server(y, &tls.Config{Certificates: ts.TLS.Certificates})
	go func() { _, _ = io.Copy(io.Discard, srv) }()
	tf := &tlsFrames{Conn: tls.Client(x, cfg)}
	if _, err := tf.Write([]byte("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if !tf.writeFramesHere() {
		t.Fatal("the handshake GET was not seen")
	}
	frame := []byte{0x82, 0x81, 1, 2, 3, 4, 'x' ^ 1}
	if err := tf.writeFrames(frame); err != nil {
		t.Fatal(err)
	}
	if _, err := tf.Write([]byte{0x88, 0x82, 1, 2, 3, 4, 0x03 ^ 1, 0xe8 ^ 2}); err != nil {
		t.Fatal(err)
	}
	if err := tf.writeFrames(frame); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("a data frame after the close frame: err = %v, want net.ErrClosed", err)
	}
}

// TestClientFramesAfterRedirect: a handshake the server redirects (a
// proxy sending http:// to another address, or to https://) dials a conn
// per hop. The WebSocket is on the last one, and so are the frames,
// written here: to ws://, straight to it; to wss://, through its TLS.
func TestClientFramesAfterRedirect(t *testing.T) {
	plainURL, plainCh := wsServer(t, nil)
	tlsURL, tlsCh := tlsWSServer(t)

	for _, tc := range []struct {
		name, to string
		ch       <-chan net.Conn
		ours     bool
	}{
		{"to ws", plainURL, plainCh, true},
		{"to wss", tlsURL, tlsCh, true},
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
// dialing transport trusting its certificate until the test ends. The
// server offers HTTP/2 as well, as many do: a dial that asked for it by
// ALPN would get it, and its WebSocket handshake would fail.
func tlsWSServer(t testing.TB) (string, <-chan net.Conn) {
	ch := make(chan net.Conn, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, err := Accept(w, r, nil); err == nil {
			ch <- c
		}
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	trustTestCert(t)
	return srv.URL, ch
}

// trustTestCert returns httptest's TLS certificate (every httptest TLS
// server's) and has the package's dialing transport trust it until the
// test ends. The transport's config offers h2 by ALPN, as
// http.DefaultTransport's does once it has made a request.
func trustTestCert(t testing.TB) []tls.Certificate {
	s := httptest.NewUnstartedServer(nil)
	s.StartTLS()
	certs, leaf := s.TLS.Certificates, s.Certificate()
	s.Close()
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	tr := corkClient().Transport.(*http.Transport)
	old := tr.TLSClientConfig
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, NextProtos: []string{"h2", "http/1.1"}}
	t.Cleanup(func() { tr.TLSClientConfig = old })
	return certs
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

// TestClientFramesThroughHTTPSProxy: with an https:// proxy the transport
// makes the proxy's TLS conn through the same TLS dial as a wss://
// gateway's. A ws:// WebSocket sent to the proxy is that conn's
// plaintext, so its frames are written to it (tlsFrames); a wss:// one
// goes through a CONNECT tunnel, its own TLS inside the proxy's, and its
// frames stay coder/websocket's. Both carry every byte.
func TestClientFramesThroughHTTPSProxy(t *testing.T) {
	plainURL, plainCh := wsServer(t, nil)
	tlsURL, tlsCh := tlsWSServer(t)
	proxyURL, seen := httpsProxy(t)
	tr := corkClient().Transport.(*http.Transport)
	old := tr.Proxy
	tr.Proxy = http.ProxyURL(proxyURL)
	defer func() { tr.Proxy = old }()

	for _, tc := range []struct {
		name, url, method string
		ch                <-chan net.Conn
		ours              bool
	}{
		{"ws", "ws" + strings.TrimPrefix(plainURL, "http"), "GET", plainCh, true},
		{"wss", "wss" + strings.TrimPrefix(tlsURL, "https"), "CONNECT", tlsCh, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := WebSocket(testCtx(t), tc.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			b := <-tc.ch
			defer closeBoth(a, b)
			failNotHang(a, b)
			if m := <-seen; m != tc.method {
				t.Fatalf("the proxy saw %q, want %q", m, tc.method)
			}
			if wc := a.(*wsConn); (wc.keys != nil) != tc.ours || (wc.tlsf != nil) != tc.ours {
				t.Fatalf("frames written here: %v, through the proxy's TLS: %v; want %v", wc.keys != nil, wc.tlsf != nil, tc.ours)
			}
			exchange(t, a, b, 4<<20)
		})
	}
}

// TestClientFramesRedirectIntoProxyTunnel: a wss:// handshake whose first
// hop our TLS dial carried, redirected to a host reached through an
// http:// proxy's CONNECT, ends on a conn whose TLS is the transport's.
// The first hop's TLS conn, closed, is still in the cork slot and had
// seen its GET go out plain; frames written to it would be lost, so the
// WebSocket keeps coder/websocket's frames, inside the tunnel's TLS.
func TestClientFramesRedirectIntoProxyTunnel(t *testing.T) {
	tlsURL, tlsCh := tlsWSServer(t)
	target := strings.TrimPrefix(tlsURL, "https://")
	proxyURL, seen := httpProxy(t)
	tr := corkClient().Transport.(*http.Transport)
	old := tr.Proxy
	tr.Proxy = func(r *http.Request) (*url.URL, error) {
		if r.URL.Host == target {
			return proxyURL, nil
		}
		return nil, nil
	}
	defer func() { tr.Proxy = old }()
	redir := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, tlsURL, http.StatusTemporaryRedirect)
	}))
	redir.StartTLS()
	defer redir.Close()

	a, err := WebSocket(testCtx(t), "wss"+strings.TrimPrefix(redir.URL, "https"), nil)
	if err != nil {
		t.Fatal(err)
	}
	b := acceptedConn(t, tlsCh)
	defer closeBoth(a, b)
	failNotHang(a, b)
	if m := <-seen; m != http.MethodConnect {
		t.Fatalf("the proxy saw %q, want CONNECT", m)
	}
	if wc := a.(*wsConn); wc.keys != nil || wc.tlsf != nil {
		t.Fatalf("frames written here: %v, to a TLS conn of ours: %v; want neither", wc.keys != nil, wc.tlsf != nil)
	}
	exchange(t, a, b, 4<<20)
}

// TestTLSHandshakeTimeout: a wss:// gateway that accepts the TCP conn and
// never answers the ClientHello fails the dial after the transport's
// TLSHandshakeTimeout, with an error that names it.
func TestTLSHandshakeTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var held []net.Conn
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	defer func() {
		ln.Close()
		<-accepted
		for _, c := range held {
			c.Close()
		}
	}()
	tr := corkClient().Transport.(*http.Transport)
	old := tr.TLSHandshakeTimeout
	tr.TLSHandshakeTimeout = 200 * time.Millisecond
	defer func() { tr.TLSHandshakeTimeout = old }()
	_, err = WebSocket(testCtx(t), "wss://"+ln.Addr().String()+"/", nil)
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() ||
		!strings.Contains(err.Error(), "TLS handshake") {
		t.Fatalf("err = %v, want a TLS handshake timeout", err)
	}
	t.Log(err)
}

// httpsProxy is a forward proxy behind TLS (the httptest certificate,
// trusted until the test ends):
// CONNECT opens a tunnel, an absolute-form request is passed on as it
// came. seen carries each request's method.
func httpsProxy(t testing.TB) (*url.URL, <-chan string) {
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: trustTestCert(t)})
	if err != nil {
		t.Fatal(err)
	}
	return serveProxy(t, ln, "https")
}

// httpProxy is httpsProxy without TLS: an http:// proxy.
func httpProxy(t testing.TB) (*url.URL, <-chan string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveProxy(t, ln, "http")
}

// serveProxy runs a forward proxy on ln until the test ends; it answers
// CONNECT with a tunnel and forwards other requests, and sends each
// request's method on the channel.
func serveProxy(t testing.TB, ln net.Listener, scheme string) (*url.URL, <-chan string) {
	seen := make(chan string, 8)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	track := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	serve := func(c net.Conn) {
		defer wg.Done()
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		seen <- req.Method
		target := req.Host
		if !strings.Contains(target, ":") {
			target += ":80"
		}
		up, err := net.Dial("tcp", target)
		if err != nil {
			return
		}
		track(up)
		if req.Method == http.MethodConnect {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\n")
		} else if err := req.WriteProxy(up); err != nil {
			return
		}
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = io.Copy(c, up); c.Close() }()
		_, _ = io.Copy(up, br)
		up.Close()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			track(c)
			wg.Add(1)
			go serve(c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return &url.URL{Scheme: scheme, Host: ln.Addr().String()}, seen
}

// failNotHang bounds a test's exchange on a and b: frames a broken
// writer put where the peer cannot read them (under TLS, say) stall the
// stream, and the deadline turns that into an error.
func failNotHang(a, b net.Conn) {
	d := time.Now().Add(30 * time.Second)
	_ = a.SetDeadline(d)
	_ = b.SetDeadline(d)
}

// TestRootCAs: a wss:// server whose certificate no system root signed is
// reached with WebSocketOptions.RootCAs trusting it, on the package's own
// transport (its frames written through TLS by this package), and refused
// without them, as unknown authority.
func TestRootCAs(t *testing.T) {
	ch := make(chan net.Conn, 1)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, err := Accept(w, r, nil); err == nil {
			ch <- c
		}
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused dial's handshake
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	_, _, err := DialWebSocket(ctx, srv.URL, nil)
	if ua := (x509.UnknownAuthorityError{}); !errors.As(err, &ua) {
		t.Fatalf("dial without the roots: %v, want unknown authority", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	a, _, err := DialWebSocket(ctx, srv.URL, &WebSocketOptions{RootCAs: pool})
	if err != nil {
		t.Fatalf("dial with the roots: %v", err)
	}
	b := <-ch
	defer a.Close()
	defer b.Close()
	if wc := a.(*wsConn); wc.tlsf == nil {
		t.Error("with RootCAs the frames are not this package's, written through TLS")
	}
	exchange(t, a, b, 1<<20)
}
