package forward

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/testenv"
	"github.com/hostgate/hostgate/sshlayer"
)

func dialT(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestLocalForwardBothWaysWithHalfClose(t *testing.T) {
	ctx := testCtx(t)
	h := newHost(t, newLoopForwarder())
	fw, err := Run(ctx, h, Spec{Kind: Local, Listen: "127.0.0.1:0", Connect: echoServer(t)})
	if err != nil {
		t.Fatal(err)
	}
	msg := make([]byte, 1<<20)
	_, _ = rand.Read(msg)
	for range 3 {
		// The echo server only answers EOF after our half-close reached it
		// through the forward, so a full read proves CloseWrite passes.
		if got := roundTrip(t, dialT(t, fw.Addr().String()), msg); !bytes.Equal(got, msg) {
			t.Fatalf("echo: got %d bytes, want %d equal bytes", len(got), len(msg))
		}
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fw.Err(); err != nil {
		t.Fatalf("Err after Close = %v, want nil", err)
	}
	st := fw.Stats()
	want := Stats{Connections: 3, BytesIn: 3 << 20, BytesOut: 3 << 20}
	if st != want {
		t.Fatalf("stats = %+v, want %+v", st, want)
	}
}

func TestRemoteForwardListensOnHost(t *testing.T) {
	ctx := testCtx(t)
	lf := newLoopForwarder()
	fw, err := Run(ctx, newHost(t, lf), Spec{Kind: Remote, Listen: "127.0.0.1:0", Connect: echoServer(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	lf.mu.Lock()
	onHost := len(lf.lns) == 1 && lf.lns[0].Addr().String() == fw.Addr().String()
	lf.mu.Unlock()
	if !onHost {
		t.Fatalf("remote forward did not listen through the host's forwarder")
	}
	if got := roundTrip(t, dialT(t, fw.Addr().String()), []byte("ping")); string(got) != "ping" {
		t.Fatalf("echo = %q", got)
	}
}

func TestForwardReleasedWhenHostConnectionEnds(t *testing.T) {
	for _, kind := range []hostgate.ForwardKind{Local, Remote, Dynamic} {
		t.Run(string(kind), func(t *testing.T) {
			ctx := testCtx(t)
			lf := newLoopForwarder()
			spec := Spec{Kind: kind, Listen: "127.0.0.1:0", Connect: echoServer(t)}
			if kind == Dynamic {
				spec.Connect = ""
			}
			fw, err := Run(ctx, newHost(t, lf), spec)
			if err != nil {
				t.Fatal(err)
			}
			defer fw.Close()
			c := dialT(t, fw.Addr().String())
			if kind == Dynamic {
				if rep := socksConnect(t, c, socksDomain("127.0.0.1"), echoPort(t, echoServer(t))); rep != repSucceeded {
					t.Fatalf("reply %d", rep)
				}
			}
			if _, err := c.Write([]byte("x")); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 1)
			if _, err := io.ReadFull(c, buf); err != nil {
				t.Fatal(err)
			}

			lf.end()
			select {
			case <-fw.Done():
			case <-ctx.Done():
				t.Fatal("forward still running after the host connection ended")
			}
			if err := fw.Err(); !errors.Is(err, ErrHostGone) {
				t.Fatalf("Err = %v, want ErrHostGone", err)
			}
			// The open connection was torn down, and nothing listens.
			_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
			if _, err := c.Read(buf); err == nil {
				t.Fatal("forwarded connection still open")
			}
			// Asked of the listener, not by a dial: once freed, the port can
			// be another test's listener (a clean-clone CI run dialed one).
			accepted := make(chan error, 1)
			go func() {
				c2, err := fw.ln.Accept()
				if err == nil {
					c2.Close()
				}
				accepted <- err
			}()
			select {
			case err := <-accepted:
				if !errors.Is(err, net.ErrClosed) {
					t.Fatalf("listener still open: Accept = %v", err)
				}
			case <-ctx.Done():
				t.Fatal("listener still open")
			}
			if st := fw.Stats(); st.Active != 0 {
				t.Fatalf("active = %d after the end", st.Active)
			}
		})
	}
}

// A closed Host is noticed on the next dial: the forward stops instead of
// accepting connections it can never serve.
func TestForwardStopsWhenHostClosed(t *testing.T) {
	ctx := testCtx(t)
	h := hostgate.New(hostgate.Info{}, func(context.Context) (*hostgate.Connection, error) {
		return &hostgate.Connection{Transport: noTransport{}, Forward: plainForwarder{}, Close: func() error { return nil }}, nil
	})
	fw, err := Run(ctx, h, Spec{Kind: Local, Listen: "127.0.0.1:0", Connect: echoServer(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	_ = h.Close()
	c := dialT(t, fw.Addr().String())
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, _ = c.Read(make([]byte, 1))
	select {
	case <-fw.Done():
	case <-ctx.Done():
		t.Fatal("forward still running after its host was closed")
	}
	if err := fw.Err(); !errors.Is(err, ErrHostGone) {
		t.Fatalf("Err = %v, want ErrHostGone", err)
	}
	if st := fw.Stats(); st.Failed != 1 {
		t.Fatalf("failed = %d, want 1", st.Failed)
	}
}

// plainForwarder has no Done method: the forward can only learn of the end
// from its dials.
type plainForwarder struct{}

func (plainForwarder) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}
func (plainForwarder) Listen(ctx context.Context, network, addr string) (net.Listener, error) {
	var lc net.ListenConfig
	return lc.Listen(ctx, network, addr)
}

func TestForwardStopsWithCtx(t *testing.T) {
	ctx, cancel := context.WithCancelCause(testCtx(t))
	fw, err := Run(ctx, newHost(t, newLoopForwarder()), Spec{Kind: Local, Listen: "127.0.0.1:0", Connect: echoServer(t)})
	if err != nil {
		t.Fatal(err)
	}
	c := dialT(t, fw.Addr().String())
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadFull(c, make([]byte, 1))
	why := errors.New("caller is done")
	cancel(why)
	if err := fw.Err(); !errors.Is(err, why) {
		t.Fatalf("Err = %v, want the ctx cause", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("connection still open after ctx ended")
	}
}

func TestMaxConnsRejectsExcess(t *testing.T) {
	ctx := testCtx(t)
	fw, err := RunConfig(ctx, newHost(t, newLoopForwarder()), Spec{Kind: Local, Listen: "127.0.0.1:0", Connect: echoServer(t)}, &Config{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	c1 := dialT(t, fw.Addr().String())
	if _, err := c1.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c1, make([]byte, 1)); err != nil {
		t.Fatal(err) // c1 is established, holding the one slot
	}
	c2 := dialT(t, fw.Addr().String())
	_ = c2.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := c2.Read(make([]byte, 1)); err != io.EOF && !isReset(err) {
		t.Fatalf("second conn read = %d, %v; want it closed", n, err)
	}
	if st := fw.Stats(); st.Rejected != 1 || st.Active != 1 {
		t.Fatalf("stats = %+v, want 1 rejected, 1 active", st)
	}
}

func isReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }

func TestSpecValidate(t *testing.T) {
	for _, s := range []Spec{
		{Kind: "sideways", Listen: "127.0.0.1:0", Connect: "a:1"},
		{Kind: Local, Listen: "nope", Connect: "a:1"},
		{Kind: Local, Listen: "127.0.0.1:0"},
		{Kind: Dynamic, Listen: "127.0.0.1:0", Connect: "a:1"},
	} {
		if err := s.Validate(); err == nil {
			t.Errorf("%+v: Validate = nil, want an error", s)
		}
		if _, err := Run(context.Background(), plainForwarder{}, s); err == nil {
			t.Errorf("%+v: Run = nil error", s)
		}
	}
}

func TestParseSpec(t *testing.T) {
	for _, tc := range []struct {
		flag, arg string
		want      Spec
	}{
		{"L", "8080:localhost:80", Spec{Local, "127.0.0.1:8080", "localhost:80"}},
		{"-L", "0.0.0.0:8080:10.0.0.1:80", Spec{Local, "0.0.0.0:8080", "10.0.0.1:80"}},
		{"R", "*:9000:127.0.0.1:3000", Spec{Remote, ":9000", "127.0.0.1:3000"}},
		{"L", "[::1]:8080:[2001:db8::1]:443", Spec{Local, "[::1]:8080", "[2001:db8::1]:443"}},
		{"D", "1080", Spec{Dynamic, "127.0.0.1:1080", ""}},
		{"D", "localhost:1080", Spec{Dynamic, "localhost:1080", ""}},
	} {
		got, err := ParseSpec(tc.flag, tc.arg)
		if err != nil || got != tc.want {
			t.Errorf("ParseSpec(%q, %q) = %+v, %v; want %+v", tc.flag, tc.arg, got, err, tc.want)
		}
	}
	for _, bad := range [][2]string{
		{"L", "8080"}, {"L", "x:localhost:80"}, {"L", "80:localhost:99999"}, {"D", "a:b:c"},
		{"X", "80"}, {"L", "[::1:80:a:1"}, {"L", "8080::80"}, {"L", "[::1]x:80:a:1"},
	} {
		if s, err := ParseSpec(bad[0], bad[1]); err == nil {
			t.Errorf("ParseSpec(%q, %q) = %+v, want an error", bad[0], bad[1], s)
		}
	}
}

func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{"8080:localhost:80", "[::1]:1:[::2]:3", "*:1:a:2", "1080", "a:b", "[", "]:"} {
		f.Add("L", s)
		f.Add("D", s)
	}
	f.Fuzz(func(t *testing.T, flag, arg string) {
		s, err := ParseSpec(flag, arg)
		if err != nil {
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("ParseSpec(%q, %q) = %+v, which does not validate: %v", flag, arg, s, err)
		}
	})
}

// --- SOCKS5 ---

type socksAddr struct {
	atyp byte
	addr []byte
}

func socksDomain(d string) socksAddr {
	return socksAddr{atypDomain, append([]byte{byte(len(d))}, d...)}
}
func socksIP(s string) socksAddr {
	a := netip.MustParseAddr(s)
	if a.Is4() {
		return socksAddr{atypIPv4, a.AsSlice()}
	}
	return socksAddr{atypIPv6, a.AsSlice()}
}

func echoPort(t testing.TB, addr string) uint16 {
	_, p, _ := net.SplitHostPort(addr)
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return uint16(n)
}

// socksConnect is a minimal RFC 1928 client: no-auth greeting, CONNECT, and
// the reply code.
func socksConnect(t testing.TB, c net.Conn, a socksAddr, port uint16) byte {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte{5, 1, methodNoAuth}); err != nil {
		t.Fatal(err)
	}
	sel := make([]byte, 2)
	if _, err := io.ReadFull(c, sel); err != nil || sel[0] != 5 || sel[1] != methodNoAuth {
		t.Fatalf("method selection %v, %v", sel, err)
	}
	req := append([]byte{5, cmdConnect, 0, a.atyp}, a.addr...)
	req = binary.BigEndian.AppendUint16(req, port)
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	rep := make([]byte, 4)
	if _, err := io.ReadFull(c, rep); err != nil {
		t.Fatalf("reply: %v", err)
	}
	n := 4
	if rep[3] == atypIPv6 {
		n = 16
	}
	if _, err := io.ReadFull(c, make([]byte, n+2)); err != nil {
		t.Fatalf("reply address: %v", err)
	}
	return rep[1]
}

func TestDynamicForwardConnects(t *testing.T) {
	ctx := testCtx(t)
	fw, err := Run(ctx, newHost(t, newLoopForwarder()), Spec{Kind: Dynamic, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	port := echoPort(t, echoServer(t))
	for _, a := range []socksAddr{socksIP("127.0.0.1"), socksDomain("localhost"), socksDomain("127.0.0.1")} {
		c := dialT(t, fw.Addr().String())
		if rep := socksConnect(t, c, a, port); rep != repSucceeded {
			t.Fatalf("%v: reply %d", a, rep)
		}
		if got := roundTrip(t, c, []byte("hello socks")); string(got) != "hello socks" {
			t.Fatalf("echo %q", got)
		}
	}
}

func TestDynamicForwardRefusals(t *testing.T) {
	ctx := testCtx(t)
	fw, err := RunConfig(ctx, newHost(t, newLoopForwarder()), Spec{Kind: Dynamic, Listen: "127.0.0.1:0"}, &Config{HandshakeTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	// A port nothing listens on refuses connections (held for the test:
	// one closed at once may be another server's by the time of the dial).
	deadPort := echoPort(t, testenv.RefusedAddr(t))
	if rep := socksConnect(t, dialT(t, fw.Addr().String()), socksIP("127.0.0.1"), deadPort); rep != repConnectionRefused {
		t.Errorf("closed port: reply %d, want %d (connection refused)", rep, repConnectionRefused)
	}

	for name, tc := range map[string]struct {
		send []byte
		want []byte // the bytes the server answers before closing
	}{
		"bind command":      {[]byte{5, 1, 0, 5, 2, 0, 1, 127, 0, 0, 1, 0, 80}, []byte{5, 0, 5, repCmdNotSupported}},
		"udp associate":     {[]byte{5, 1, 0, 5, 3, 0, 1, 127, 0, 0, 1, 0, 80}, []byte{5, 0, 5, repCmdNotSupported}},
		"unknown addr type": {[]byte{5, 1, 0, 5, 1, 0, 9}, []byte{5, 0, 5, repAddrTypeNotSupport}},
		"auth only":         {[]byte{5, 1, 2}, []byte{5, methodNoAccept}},
		"socks4":            {[]byte{4, 1, 0, 80, 127, 0, 0, 1, 0}, nil},
		"stall":             {[]byte{5, 1, 0, 5, 1, 0, 3, 200, 'a'}, []byte{5, 0}},
		"empty domain":      {[]byte{5, 1, 0, 5, 1, 0, 3, 0, 0, 80}, []byte{5, 0, 5, repGeneralFailure}},
		"domain with colon": {[]byte{5, 1, 0, 5, 1, 0, 3, 3, 'a', ':', 'b', 0, 80}, []byte{5, 0, 5, repGeneralFailure}},
		"port zero":         {[]byte{5, 1, 0, 5, 1, 0, 1, 127, 0, 0, 1, 0, 0}, []byte{5, 0, 5, repGeneralFailure}},
	} {
		t.Run(name, func(t *testing.T) {
			c := dialT(t, fw.Addr().String())
			_ = c.SetDeadline(time.Now().Add(30 * time.Second))
			if _, err := c.Write(tc.send); err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(c) // the server closes: "stall" by its handshake timeout
			if len(got) > len(tc.want) {
				got = got[:len(tc.want)]
			}
			if !bytes.Equal(got, tc.want) {
				t.Fatalf("answer %v, want %v then close", got, tc.want)
			}
		})
	}
}

// TestDynamicForwardCurl drives the SOCKS server with a real client.
func TestDynamicForwardCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	testenv.RequirePeer(t, "curl", err == nil)
	ctx := testCtx(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello "+r.Host)
	}))
	defer srv.Close()
	fw, err := Run(ctx, newHost(t, newLoopForwarder()), Spec{Kind: Dynamic, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	target := "http://localhost:" + strconv.Itoa(int(echoPort(t, srv.Listener.Addr().String()))) + "/"
	out, err := exec.CommandContext(ctx, curl, "-sS", "--max-time", "30", "--socks5-hostname", fw.Addr().String(), target).CombinedOutput()
	if err != nil {
		t.Fatalf("curl: %v\n%s", err, out)
	}
	if want := "hello localhost:"; !strings.HasPrefix(string(out), want) {
		t.Fatalf("curl got %q, want %q…", out, want)
	}
	// Close waits for the copy to end, so the counters are final.
	fw.Close()
	if st := fw.Stats(); st.Connections != 1 || st.Active != 0 || st.BytesIn == 0 || st.BytesOut < int64(len(out)) {
		t.Fatalf("stats %+v", st)
	}
}

func FuzzSOCKSHandshake(f *testing.F) {
	f.Add([]byte{5, 1, 0, 5, 1, 0, 1, 127, 0, 0, 1, 0, 80})
	f.Add([]byte{5, 1, 0, 5, 1, 0, 3, 9, 'l', 'o', 'c', 'a', 'l', 'h', 'o', 's', 't', 1, 187})
	f.Add([]byte{5, 2, 2, 0, 5, 1, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 22})
	f.Add([]byte{5, 255})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		ok, err := readGreeting(r)
		if err != nil || !ok {
			return
		}
		if used := len(b) - r.Len(); used > 2+255 {
			t.Fatalf("greeting read %d bytes", used)
		}
		before := r.Len()
		addr, err := readRequest(r)
		if used := before - r.Len(); used > 4+1+255+2 {
			t.Fatalf("request read %d bytes", used)
		}
		if err != nil {
			return
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil || host == "" || port == "0" {
			t.Fatalf("request gave address %q (%v)", addr, err)
		}
	})
}

// A local forward through our SSH client dials early (the connection's
// first bytes go behind the channel open), so the host's refused connect
// shows up after the dial; it still closes the accepted connection and
// counts as failed.
func TestLocalForwardEarlyRefusedIsFailed(t *testing.T) {
	ctx := testCtx(t)
	fw, err := Run(ctx, newHost(t, earlyOnly{sshTCPClient(t), t}), Spec{Kind: Local, Listen: "127.0.0.1:0", Connect: testenv.RefusedAddr(t)})
	if err != nil {
		t.Fatal(err)
	}
	c := dialT(t, fw.Addr().String())
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	_, _ = c.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
	if got, _ := io.ReadAll(c); len(got) != 0 {
		t.Fatalf("read %q through a forward to a refused port", got)
	}
	_ = fw.Close()
	if st := fw.Stats(); st.Connections != 1 || st.Failed != 1 {
		t.Fatalf("stats = %+v, want 1 connection, failed", st)
	}
}

// TestLocalForwardFailureCountedWhenClientSeesIt: by the time a
// forwarded connection's client sees it closed, Stats().Failed counts it,
// with the forward still open. A program asks right after its request
// failed ("is my dev server up?"); over SSH the refusal comes after the
// request went out as early data, and the forward closed the client's
// connection before it counted it (the root package's Forwarding had the
// same race: TestForwardFailureKnownWhenClientSeesIt).
func TestLocalForwardFailureCountedWhenClientSeesIt(t *testing.T) {
	ctx := testCtx(t)
	fw, err := Run(ctx, newHost(t, earlyOnly{sshTCPClient(t), t}), Spec{Kind: Local, Listen: "127.0.0.1:0", Connect: testenv.RefusedAddr(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	for i := range 100 {
		c := dialT(t, fw.Addr().String())
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.WriteString(c, "GET / HTTP/1.0\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		if b, err := io.ReadAll(c); len(b) != 0 || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("a connection whose connect failed: read %q, %v; want it closed at once", b, err)
		}
		_ = c.Close()
		if st := fw.Stats(); st.Failed != int64(i+1) || st.Connections != int64(i+1) {
			t.Fatalf("connection %d closed on its client: %+v; want Failed and Connections %d", i+1, st, i+1)
		}
	}
}

// earlyOnly is the SSH client as a forwarder that fails the test when a
// local forward dials it the late way.
type earlyOnly struct {
	*sshlayer.Client
	t *testing.T
}

func (e earlyOnly) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	e.t.Error("a local forward used Dial; want DialEarly")
	return e.Client.Dial(ctx, network, addr)
}

// A local forward waits a moment for a client's first bytes to send them
// with the channel open (bicopy.DialLead); a protocol whose server speaks
// first (SSH, SMTP) still works: the banner comes without the client
// writing, and the conversation goes on both ways.
func TestLocalForwardServerSpeaksFirst(t *testing.T) {
	ctx := testCtx(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = c.Write([]byte("220 ready\r\n"))
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	fw, err := Run(ctx, newHost(t, earlyOnly{sshTCPClient(t), t}), Spec{Kind: Local, Listen: "127.0.0.1:0", Connect: ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	for range 3 {
		c := dialT(t, fw.Addr().String())
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		banner := make([]byte, 11)
		if _, err := io.ReadFull(c, banner); err != nil || string(banner) != "220 ready\r\n" {
			t.Fatalf("banner: %q, %v", banner, err)
		}
		if _, err := c.Write([]byte("HELO x\r\n")); err != nil {
			t.Fatal(err)
		}
		echo := make([]byte, 8)
		if _, err := io.ReadFull(c, echo); err != nil || string(echo) != "HELO x\r\n" {
			t.Fatalf("echo: %q, %v", echo, err)
		}
		_ = c.Close()
	}
}

// A local forward waits for a client's first bytes only where the dial is
// early: Host.TakesEarlyData says so for our SSH client to our server, and
// not for a forwarder without DialEarly; Run asks a host in either form it
// may say it in (the SSH client itself says it without a ctx).
func TestHostTakesEarlyData(t *testing.T) {
	ctx := testCtx(t)
	if newHost(t, newLoopForwarder()).TakesEarlyData(ctx) {
		t.Error("a forwarder without DialEarly takes early data")
	}
	if !newHost(t, earlyOnly{sshTCPClient(t), t}).TakesEarlyData(ctx) {
		t.Error("our SSH client to our server does not take early data")
	}
	for _, tc := range []struct {
		name string
		h    Host
		lead bool
	}{
		{"no DialEarly", plainForwarder{}, false},
		{"DialEarly, says nothing", quietEarly{}, true},
		{"DialEarly, says no", saysEarly{takes: false}, false},
		{"DialEarly, says yes", saysEarly{takes: true}, true},
		{"hostgate.Host over our SSH client", newHost(t, earlyOnly{sshTCPClient(t), t}), true},
	} {
		fw, err := Run(ctx, tc.h, Spec{Kind: Local, Listen: "127.0.0.1:0", Connect: "127.0.0.1:9"})
		if err != nil {
			t.Fatal(err)
		}
		if got := fw.lead != nil && fw.lead(ctx); got != tc.lead {
			t.Errorf("%s: waits for first bytes %v, want %v", tc.name, got, tc.lead)
		}
		_ = fw.Close()
	}
}

// quietEarly is an EarlyDialer that does not say whether it sends early;
// saysEarly says it as sshlayer.Client does, without a ctx.
type quietEarly struct{ plainForwarder }

func (q quietEarly) DialEarly(ctx context.Context, network, addr string) (net.Conn, error) {
	return q.Dial(ctx, network, addr)
}

type saysEarly struct {
	quietEarly
	takes bool
}

func (s saysEarly) TakesEarlyData() bool { return s.takes }

// A DialTimeout below the host's own connect bound holds for a local
// forward over a host that takes early data: an early dial would return
// before the host connects, so the forward dials the late way, which the
// timeout bounds. Here the host never connects.
func TestLocalForwardShortDialTimeout(t *testing.T) {
	ctx := testCtx(t)
	h := &hangingConnect{dialed: make(chan struct{}, 1)}
	fw, err := RunConfig(ctx, h, Spec{Kind: Local, Listen: "127.0.0.1:0", Connect: "127.0.0.1:9"}, &Config{DialTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	c := dialT(t, fw.Addr().String())
	// The bound is told by the deadline of the dial's ctx, not by how long
	// the connection took to close: 3 s for a 300 ms dial timeout could
	// pass on a loaded machine. The deadline is set before the dial
	// starts, so a stall only leaves less of it. A forward that let the
	// connect run on (no deadline), or bounded it by
	// DialTimeout+HandshakeTimeout (10.3 s), or by the default 30 s, leaves
	// the dial more.
	_, _ = c.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
	select {
	case <-h.dialed:
	case <-ctx.Done():
		t.Fatal("the forward never dialed the host the late way")
	}
	if left := time.Duration(h.dialLeft.Load()); !h.dialBounded.Load() || left > 300*time.Millisecond {
		t.Fatalf("the host's connect was given %v (bounded: %v), want at most the 300 ms DialTimeout", left, h.dialBounded.Load())
	}
	// Closed once the dial timed out (EOF, or a reset for the request it
	// did not read): not a timeout of this read.
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadAll(c); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the forward did not close, within 30 s, a connection whose 300 ms dial timed out")
	}
	if h.early.Load() != 0 {
		t.Error("dialed early: the host's connect was not bounded by DialTimeout")
	}
	_ = fw.Close()
	if st := fw.Stats(); st.Failed != 1 {
		t.Fatalf("stats = %+v, want 1 failed", st)
	}

	// The default DialTimeout is above the host's bound: early dials.
	fw2, err := Run(ctx, h, Spec{Kind: Local, Listen: "127.0.0.1:0", Connect: "127.0.0.1:9"})
	if err != nil {
		t.Fatal(err)
	}
	c2 := dialT(t, fw2.Addr().String())
	_, _ = c2.Write([]byte("x"))
	for i := 0; h.early.Load() == 0 && i < 3000; i++ { // accepted and dialed: at most 30 s
		time.Sleep(10 * time.Millisecond)
	}
	_ = fw2.Close()
	if h.early.Load() != 1 {
		t.Errorf("early dials = %d with the default DialTimeout, want 1", h.early.Load())
	}
}

// hangingConnect is a host whose connects never complete: Dial waits for
// its ctx, DialEarly returns a conn that never answers.
type hangingConnect struct {
	plainForwarder
	early       atomic.Int64
	dialBounded atomic.Bool   // the last Dial's ctx had a deadline
	dialLeft    atomic.Int64  // what was left of it when the Dial came
	dialed      chan struct{} // told of each Dial (once it has recorded the above) while it has room
}

func (h *hangingConnect) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if d, ok := ctx.Deadline(); ok {
		h.dialLeft.Store(int64(time.Until(d)))
		h.dialBounded.Store(true)
	}
	select {
	case h.dialed <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

func (h *hangingConnect) DialEarly(ctx context.Context, network, addr string) (net.Conn, error) {
	h.early.Add(1)
	a, b := net.Pipe()
	go func() { _, _ = io.Copy(io.Discard, b); b.Close() }()
	return a, nil
}

func (h *hangingConnect) TakesEarlyData() bool { return true }

// waitForwarder is a loopForwarder that says why its connection ended, as
// the SSH client's Wait does.
type waitForwarder struct {
	*loopForwarder
	why error
}

func (f waitForwarder) Wait() error { <-f.done; return f.why }

// TestForwardSaysWhyItsHostWent: a forward stopped by its host
// connection's end says why the connection ended, where the connection
// tells ("the gateway is shutting down"), through a named Host as a
// client's hosts are, and still matches ErrHostGone. It said only
// "host connection ended", while a command on the same connection said
// why.
func TestForwardSaysWhyItsHostWent(t *testing.T) {
	ctx := testCtx(t)
	f := waitForwarder{newLoopForwarder(), errors.New("connection lost: the gateway is shutting down")}
	h := hostgate.New(hostgate.Info{Kind: "test"}, func(context.Context) (*hostgate.Connection, error) {
		return &hostgate.Connection{Name: "box", Transport: noTransport{}, Forward: f, Close: func() error { return nil }}, nil
	})
	t.Cleanup(func() { _ = h.Close() })
	fw, err := Run(ctx, h, Spec{Kind: Local, Listen: "127.0.0.1:0", Connect: echoServer(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	f.end()
	if err := fw.Err(); !errors.Is(err, ErrHostGone) || !errors.Is(err, f.why) {
		t.Fatalf("Err = %v, want ErrHostGone saying why: %v", err, f.why)
	}
}
