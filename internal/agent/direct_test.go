package agent

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/testenv"
)

// directGW is a fake gateway for direct sessions: it enrolls the agent as
// host "h1" under its CA, answers wire.DirectOn when on, accepts the
// control stream the agent opens and answers each DirectOpen with answer.
type directGW struct {
	t      *testing.T
	ts     *httptest.Server
	ca     ssh.Signer
	on     bool
	answer func(wire.DirectMsg) wire.DirectMsg
	// then, when set, are lines written with answer's, in its write.
	then func(wire.DirectMsg) []wire.DirectMsg
	down atomic.Bool // refuse the agent's connects (503)

	header  chan http.Header    // each connect request's
	msgs    chan wire.DirectMsg // every control line from the agent
	mu      sync.Mutex
	tunnels []*bytestream.MuxSession
	ctls    []net.Conn
	wg      sync.WaitGroup
}

func newDirectGW(t *testing.T, on bool, answer func(wire.DirectMsg) wire.DirectMsg) *directGW {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	ca, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	g := &directGW{t: t, ca: ca, on: on, answer: answer, header: make(chan http.Header, 16), msgs: make(chan wire.DirectMsg, 64)}
	g.ts = httptest.NewServer(http.HandlerFunc(g.connect))
	t.Cleanup(func() {
		g.mu.Lock()
		for _, s := range g.tunnels {
			_ = s.Close()
		}
		g.mu.Unlock()
		g.ts.Close()
		g.wg.Wait()
	})
	return g
}

func (g *directGW) connect(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != wire.ConnectPath || g.down.Load() {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	select {
	case g.header <- r.Header.Clone():
	default:
	}
	w.Header().Set(wire.HeaderCAKey, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(g.ca.PublicKey()))))
	w.Header().Set(wire.HeaderHostID, "h1")
	if g.on {
		w.Header().Set(wire.HeaderDirect, wire.DirectOn)
	}
	conn, err := bytestream.Accept(w, r, nil)
	if err != nil {
		return
	}
	sess, err := bytestream.MuxClient(conn, nil)
	if err != nil {
		_ = conn.Close()
		return
	}
	g.mu.Lock()
	g.tunnels = append(g.tunnels, sess)
	g.wg.Add(1)
	g.mu.Unlock()
	defer g.wg.Done()
	defer sess.Close()
	if !g.on {
		<-sess.CloseChan()
		return
	}
	st, err := sess.AcceptStream()
	if err != nil {
		return
	}
	g.mu.Lock()
	g.ctls = append(g.ctls, st)
	g.mu.Unlock()
	rd := wire.NewDirectReader(st)
	for {
		m, err := wire.ReadDirectMsg(rd)
		if err != nil {
			<-sess.CloseChan() // the tunnel outlives its control stream
			return
		}
		g.msgs <- m
		if m.Op == wire.DirectOpen {
			b := wire.AppendDirectMsg(nil, g.answer(m))
			if g.then != nil {
				for _, n := range g.then(m) {
					b = wire.AppendDirectMsg(b, n)
				}
			}
			_, _ = st.Write(b)
		}
	}
}

func (g *directGW) send(st net.Conn, m wire.DirectMsg) error {
	_, err := st.Write(wire.AppendDirectMsg(nil, m))
	return err
}

// sendEnd sends DirectEnd for id on the last control stream.
func (g *directGW) sendEnd(id uint64, reason string) {
	g.mu.Lock()
	st := g.ctls[len(g.ctls)-1]
	g.mu.Unlock()
	if err := g.send(st, wire.DirectMsg{Op: wire.DirectEnd, ID: id, Reason: reason}); err != nil {
		g.t.Fatal(err)
	}
}

// closeTunnels ends every tunnel the agent has, as a gateway's end would.
func (g *directGW) closeTunnels() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range g.tunnels {
		_ = s.Close()
	}
}

// next is the agent's next control line of op.
func (g *directGW) next(op string) wire.DirectMsg {
	g.t.Helper()
	for {
		select {
		case m := <-g.msgs:
			if m.Op == op {
				return m
			}
		case <-time.After(30 * time.Second):
			g.t.Fatalf("no %q line from the agent within 30 s", op)
		}
	}
}

func admitAll(m wire.DirectMsg) wire.DirectMsg { return wire.DirectMsg{Op: wire.DirectAdmit, ID: m.ID} }

// directAgent runs an agent of g with --direct 127.0.0.1:0 until the test
// ends, and returns what it advertised (its listener's address), its host
// key and its logs, once its tunnel is up.
func directAgent(t *testing.T, g *directGW) (addr string, hostKey ssh.PublicKey, logs *testenv.LogBuffer) {
	t.Helper()
	logs = &testenv.LogBuffer{}
	tunnels := runAgent(t, context.Background(), ConnectConfig{GatewayURL: g.ts.URL, Token: "hg_x", StateDir: t.TempDir(),
		Direct: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(logs, nil))})
	waitTunnel(t, tunnels, "h1")
	h := <-g.header
	hk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(h.Get(wire.HeaderHostKey)))
	if err != nil {
		t.Fatal(err)
	}
	return h.Get(wire.HeaderDirect), hk, logs
}

// cert is a certificate of g's CA for a new key, for host h1, with
// tokenID as its token extension when not empty.
func (g *directGW) cert(t *testing.T, tokenID string) ssh.Signer {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	key, _ := ssh.NewSignerFromKey(priv)
	now := time.Now()
	ext := map[string]string{"permit-pty": "", "permit-port-forwarding": ""}
	if tokenID != "" {
		ext[wire.CertTokenExtension] = tokenID
	}
	c := &ssh.Certificate{Key: key.PublicKey(), Serial: 4242, CertType: ssh.UserCert, KeyId: "alice-laptop", ValidPrincipals: []string{"h1"},
		ValidAfter: uint64(now.Add(-time.Minute).Unix()), ValidBefore: uint64(now.Add(10 * time.Minute).Unix()),
		Permissions: ssh.Permissions{Extensions: ext}}
	if err := c.SignCert(rand.Reader, g.ca); err != nil {
		t.Fatal(err)
	}
	cs, err := ssh.NewCertSigner(c, key)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func dialDirect(addr string, hostKey ssh.PublicKey, signer ssh.Signer) (*ssh.Client, error) {
	return ssh.Dial("tcp", addr, &ssh.ClientConfig{User: "me", Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.FixedHostKey(hostKey), Timeout: 30 * time.Second})
}

// waitLogged waits until logs holds s.
func waitLogged(t *testing.T, logs *testenv.LogBuffer, s string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(logs.String(), s); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the agent never logged %q:\n%s", s, logs.String())
		}
	}
}

// TestDirectAdmittedRunsCommand: a caller with the gateway's certificate
// runs a command on the agent's direct listener once the gateway admitted
// it, the agent having told the gateway who asks (the certificate's
// serial, key id and token id, the caller's address); when the caller
// leaves, the agent tells the gateway, with the bytes each way.
func TestDirectAdmittedRunsCommand(t *testing.T) {
	g := newDirectGW(t, true, admitAll)
	addr, hk, _ := directAgent(t, g)
	c, err := dialDirect(addr, hk, g.cert(t, "tok-1"))
	if err != nil {
		t.Fatalf("admitted direct connection: %v", err)
	}
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Output("echo direct")
	if err != nil || string(out) != "direct\n" {
		t.Fatalf("echo on a direct connection: %q %v", out, err)
	}
	local := c.LocalAddr().String()
	_ = c.Close()
	open := g.next(wire.DirectOpen)
	if open.TokenID != "tok-1" || open.KeyID != "alice-laptop" || open.Serial != 4242 || open.Remote != local || open.ID == 0 {
		t.Errorf("open line %+v: want token tok-1, key id alice-laptop, serial 4242, remote %s", open, local)
	}
	closed := g.next(wire.DirectClosed)
	if closed.ID != open.ID {
		t.Errorf("closed line for connection %d, want %d", closed.ID, open.ID)
	}
	// The SSH handshake alone is over a kilobyte each way.
	if closed.ToHost < 1000 || closed.FromHost < 1000 {
		t.Errorf("closed line counts %d bytes to the host, %d from it: want the connection's", closed.ToHost, closed.FromHost)
	}
}

// TestDirectRefusedFailsAuth: a connection the gateway refuses fails its
// authentication (a client then uses the relay), and the agent logs the
// gateway's reason.
func TestDirectRefusedFailsAuth(t *testing.T) {
	g := newDirectGW(t, true, func(m wire.DirectMsg) wire.DirectMsg {
		return wire.DirectMsg{Op: wire.DirectRefuse, ID: m.ID, Reason: "token tok-2 was revoked"}
	})
	addr, hk, logs := directAgent(t, g)
	c, err := dialDirect(addr, hk, g.cert(t, "tok-2"))
	if err == nil {
		_ = c.Close()
		t.Fatal("a refused direct connection authenticated")
	}
	if !strings.Contains(err.Error(), "unable to authenticate") {
		t.Errorf("refused: %v, want an authentication failure", err)
	}
	open := g.next(wire.DirectOpen)
	if closed := g.next(wire.DirectClosed); closed.ID != open.ID {
		t.Errorf("closed line for %d, want %d", closed.ID, open.ID)
	}
	waitLogged(t, logs, "token tok-2 was revoked")
}

// startSleep starts `sleep` in a session of c and returns its pid and the
// session's end.
func startSleep(t *testing.T, c *ssh.Client) (int, <-chan error) {
	t.Helper()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start("echo $$; exec sleep 300"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Wait() }()
	return pid, done
}

// waitGone waits until process pid is gone.
func waitGone(t *testing.T, pid int, done <-chan error) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the session still runs 30 s on")
	}
	for deadline := time.Now().Add(30 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("sleep (pid %d) still runs 30 s after its session ended", pid)
		}
	}
}

// TestDirectEndKillsSession: the gateway's DirectEnd (its token revoked)
// ends that direct connection now, and the command it runs.
func TestDirectEndKillsSession(t *testing.T) {
	g := newDirectGW(t, true, admitAll)
	addr, hk, logs := directAgent(t, g)
	c, err := dialDirect(addr, hk, g.cert(t, "tok-3"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pid, done := startSleep(t, c)
	open := g.next(wire.DirectOpen)
	g.sendEnd(open.ID, "token tok-3 was revoked")
	waitGone(t, pid, done)
	if closed := g.next(wire.DirectClosed); closed.ID != open.ID || closed.ToHost == 0 {
		t.Errorf("closed line %+v after the end of %d", closed, open.ID)
	}
	waitLogged(t, logs, "token tok-3 was revoked")
}

// TestDirectEndRightAfterAdmit: a DirectEnd that follows its DirectAdmit
// at once (the token revoked as the caller connected) ends the session.
// The control stream's reader handled it before the admitted connection
// had noted itself live, took it for a connection already gone and
// dropped it: the session ran on, out of the gateway's reach.
func TestDirectEndRightAfterAdmit(t *testing.T) {
	g := newDirectGW(t, true, admitAll)
	g.then = func(m wire.DirectMsg) []wire.DirectMsg {
		return []wire.DirectMsg{{Op: wire.DirectEnd, ID: m.ID, Reason: "token tok-9 was revoked"}}
	}
	addr, hk, _ := directAgent(t, g)
	c, err := dialDirect(addr, hk, g.cert(t, "tok-9"))
	if err == nil {
		defer c.Close()
	}
	open := g.next(wire.DirectOpen)
	closed := g.next(wire.DirectClosed)
	if closed.ID != open.ID || !strings.Contains(closed.Reason, "token tok-9 was revoked") {
		t.Errorf("closed line %+v after the end of %d, want the gateway's reason", closed, open.ID)
	}
}

// TestDirectTunnelEndEndsSession: a direct session ends with the tunnel
// that admitted it (the gateway could no longer end it); while the agent
// has no tunnel, direct connections are refused, saying why.
func TestDirectTunnelEndEndsSession(t *testing.T) {
	g := newDirectGW(t, true, admitAll)
	addr, hk, logs := directAgent(t, g)
	c, err := dialDirect(addr, hk, g.cert(t, "tok-4"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pid, done := startSleep(t, c)
	g.down.Store(true)
	g.closeTunnels()
	waitGone(t, pid, done)
	waitLogged(t, logs, "gateway tunnel ended")
	if c, err := dialDirect(addr, hk, g.cert(t, "tok-4")); err == nil {
		_ = c.Close()
		t.Fatal("a direct connection authenticated while the agent had no tunnel")
	}
	waitLogged(t, logs, errTunnelDown.Error())
}

// TestDirectRefusalsWhileDownLoggedOnce: while the agent has no tunnel,
// connections to its direct port are refused with one Info line saying
// why, not one each: a port scan, or a caller retrying, wrote a line per
// TCP connect for as long as the tunnel was down.
func TestDirectRefusalsWhileDownLoggedOnce(t *testing.T) {
	g := newDirectGW(t, true, admitAll)
	addr, _, logs := directAgent(t, g)
	g.down.Store(true)
	g.closeTunnels()
	waitLogged(t, logs, "gateway tunnel ended")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 5 {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		// Bounded by ctx: a connection served instead would wait for
		// the SSH handshake.
		stop := context.AfterFunc(ctx, func() { _ = c.Close() })
		_, err = io.Copy(io.Discard, c)
		stop()
		_ = c.Close()
		if ctx.Err() != nil {
			t.Fatalf("connection %d was not refused: %v", i, err)
		}
	}
	if n := strings.Count(logs.String(), errTunnelDown.Error()); n != 1 {
		t.Errorf("%d lines for 5 refused connections, want 1:\n%s", n, logs.String())
	}
}

// TestDirectControlStreamEndEndsSession: a direct session ends with the
// control stream that admitted it, though the tunnel lasts (the gateway
// could no longer end it), and new direct connections are refused while
// that tunnel lasts.
func TestDirectControlStreamEndEndsSession(t *testing.T) {
	g := newDirectGW(t, true, admitAll)
	addr, hk, logs := directAgent(t, g)
	c, err := dialDirect(addr, hk, g.cert(t, "tok-7"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pid, done := startSleep(t, c)
	g.mu.Lock()
	_ = g.ctls[len(g.ctls)-1].Close()
	g.mu.Unlock()
	waitGone(t, pid, done)
	waitLogged(t, logs, "their control stream ended")
	if c, err := dialDirect(addr, hk, g.cert(t, "tok-7")); err == nil {
		_ = c.Close()
		t.Fatal("a direct connection authenticated after the control stream ended")
	}
	if strings.Contains(logs.String(), "gateway tunnel ended") {
		t.Errorf("the tunnel ended too, where the test ended only the control stream:\n%s", logs.String())
	}
}

// TestDirectNotOnRefused: a gateway that does not answer DirectOn (an
// older one, or --direct-sessions=off) gets no control stream, and every direct
// connection is refused at authentication.
func TestDirectNotOnRefused(t *testing.T) {
	g := newDirectGW(t, false, admitAll)
	addr, hk, logs := directAgent(t, g)
	if c, err := dialDirect(addr, hk, g.cert(t, "tok-5")); err == nil {
		_ = c.Close()
		t.Fatal("a direct connection authenticated though the gateway does not admit them")
	}
	waitLogged(t, logs, "this gateway does not admit direct sessions")
}

// TestDirectCertWithoutTokenRefused: a certificate without the token
// extension (from a gateway older than direct sessions) is refused by the
// agent itself, saying so, without asking the gateway.
func TestDirectCertWithoutTokenRefused(t *testing.T) {
	g := newDirectGW(t, true, admitAll)
	addr, hk, logs := directAgent(t, g)
	if c, err := dialDirect(addr, hk, g.cert(t, "")); err == nil {
		_ = c.Close()
		t.Fatal("a certificate without a token id authenticated on the direct listener")
	}
	waitLogged(t, logs, "carries no "+wire.CertTokenExtension+" extension")
	// The next connection's open is the first line the gateway got.
	if c, err := dialDirect(addr, hk, g.cert(t, "tok-6")); err != nil {
		t.Fatal(err)
	} else {
		_ = c.Close()
	}
	if m := g.next(wire.DirectOpen); m.TokenID != "tok-6" {
		t.Errorf("the gateway was asked about %+v", m)
	}
}

// TestDirectAdvertises: what the agent tells the gateway callers reach its
// direct listener at.
func TestDirectAdvertises(t *testing.T) {
	bound := &net.TCPAddr{IP: net.IPv4zero, Port: 40123}
	ifaces := func() ([]net.Addr, error) {
		var out []net.Addr
		for _, c := range []string{"127.0.0.1/8", "10.0.0.5/24", "169.254.1.2/16", "::1/128", "fe80::1/64", "2001:db8::5/64", "192.168.1.9/24"} {
			ip, n, _ := net.ParseCIDR(c)
			out = append(out, &net.IPNet{IP: ip, Mask: n.Mask})
		}
		return out, nil
	}
	for _, tc := range []struct{ listen, advertise, want string }{
		{":0", "", "10.0.0.5:40123,[2001:db8::5]:40123,192.168.1.9:40123"},
		{"[::]:0", "", "10.0.0.5:40123,[2001:db8::5]:40123,192.168.1.9:40123"},
		{"0.0.0.0:0", "", "10.0.0.5:40123,192.168.1.9:40123"},
		{"10.0.0.5:0", "", "10.0.0.5:40123"},
		{"host.example:2222", "", "host.example:40123"},
		{":0", "gw.example:22,203.0.113.7:2222", "gw.example:22,203.0.113.7:2222"},
	} {
		got, err := directAddrs(tc.listen, bound, tc.advertise, ifaces)
		if err != nil || strings.Join(got, ",") != tc.want {
			t.Errorf("listen %q advertise %q: %q %v, want %q", tc.listen, tc.advertise, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ listen, advertise, want string }{
		{":0", "host", "want host:port"},
		{":0", "0.0.0.0:22", "unspecified"},
		{"127.0.0.1:0", "", ""}, // loopback when asked for: a caller on this machine
	} {
		_, err := directAddrs(tc.listen, bound, tc.advertise, ifaces)
		if tc.want == "" {
			if err != nil {
				t.Errorf("listen %q: %v", tc.listen, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("listen %q advertise %q: %v, want an error saying %q", tc.listen, tc.advertise, err, tc.want)
		}
	}
	// Only loopback and link-local: nothing a caller elsewhere could dial.
	none := func() ([]net.Addr, error) {
		return []net.Addr{&net.IPNet{IP: net.ParseIP("127.0.0.1"), Mask: net.CIDRMask(8, 32)}}, nil
	}
	if _, err := directAddrs(":0", bound, "", none); err == nil || !strings.Contains(err.Error(), "--direct-advertise") {
		t.Errorf("no address to advertise: %v, want an error naming --direct-advertise", err)
	}
	// More than wire.MaxDirectAddrs: the first ones.
	many := func() ([]net.Addr, error) {
		var out []net.Addr
		for i := range 12 {
			out = append(out, &net.IPNet{IP: net.IPv4(10, 0, 1, byte(i+1)), Mask: net.CIDRMask(24, 32)})
		}
		return out, nil
	}
	if got, err := directAddrs(":0", bound, "", many); err != nil || len(got) != wire.MaxDirectAddrs || got[0] != "10.0.1.1:40123" {
		t.Errorf("12 addresses: %q %v, want the first %d", got, err, wire.MaxDirectAddrs)
	}
}

// TestDirectAdvertisesBoundPort: --direct 127.0.0.1:0 advertises the port
// it bound, which a caller dials (the other tests do), and logs it.
func TestDirectAdvertisesBoundPort(t *testing.T) {
	g := newDirectGW(t, true, admitAll)
	addr, _, logs := directAgent(t, g)
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != "127.0.0.1" || port == "0" {
		t.Fatalf("advertised %q (%v), want 127.0.0.1 and the bound port", addr, err)
	}
	waitLogged(t, logs, "advertise="+addr)
	if err := RunConnect(context.Background(), []string{"--gateway", g.ts.URL, "--token", "t", "--direct-advertise", "h:1"}, &strings.Builder{}, &strings.Builder{}); err == nil || !strings.Contains(err.Error(), "needs --direct") {
		t.Errorf("--direct-advertise without --direct: %v", err)
	}
	if err := RunConnect(context.Background(), []string{"--gateway", g.ts.URL, "--token", "t", "--direct", ":0", "--direct-advertise", "h"}, &strings.Builder{}, &strings.Builder{}); err == nil || !strings.Contains(err.Error(), "want host:port") {
		t.Errorf("--direct-advertise h: %v", err)
	}
}
