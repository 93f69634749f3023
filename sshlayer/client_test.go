package sshlayer

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/github.com/pkg/sftp"
	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate"
)

type netDialer struct{ net.Dialer }

func (d *netDialer) dial(ctx context.Context, addr string) (net.Conn, error) {
	return d.DialContext(ctx, "tcp", addr)
}

// countingServer is a minimal x/crypto SSH server that counts what the
// client sent: authentication attempts by method and session channels.
type countingServer struct {
	ln       net.Listener
	hostKey  ssh.Signer
	userKey  *SessionKey
	pubkey   atomic.Int64 // PublicKeyCallback calls
	password atomic.Int64 // PasswordCallback calls
	sessions atomic.Int64 // session channel opens
	wg       sync.WaitGroup

	// runs: session channels are accepted, an exec exits 0 at once and
	// the sftp subsystem is served (newRunningServer); firsts is each
	// channel's first request, by the order the channels were opened.
	runs     bool
	firstsMu sync.Mutex
	firsts   map[int64]string
	// unpaired counts the execs and subsystems that came without the
	// next session channel's open: each waits up to 5 s for it, which a
	// client opening its next spare with the command sends at once.
	unpaired atomic.Int64
}

func newCountingServer(t *testing.T) *countingServer { return startCountingServer(t, false) }

// newRunningServer is a countingServer that runs commands and SFTP.
func newRunningServer(t *testing.T) *countingServer { return startCountingServer(t, true) }

func startCountingServer(t *testing.T, runs bool) *countingServer {
	t.Helper()
	host, err := GenerateSessionKey()
	if err != nil {
		t.Fatal(err)
	}
	user, err := GenerateSessionKey()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &countingServer{ln: ln, hostKey: host.Signer, userKey: user, runs: runs, firsts: map[int64]string{}}
	s.wg.Add(1)
	go s.serve()
	t.Cleanup(func() { _ = ln.Close(); s.wg.Wait() })
	return s
}

func (s *countingServer) config() *ssh.ServerConfig {
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			s.pubkey.Add(1)
			if string(key.Marshal()) == string(s.userKey.Signer.PublicKey().Marshal()) {
				return &ssh.Permissions{}, nil
			}
			return nil, errors.New("unknown key")
		},
		PasswordCallback: func(ssh.ConnMetadata, []byte) (*ssh.Permissions, error) {
			s.password.Add(1)
			return nil, errors.New("no passwords")
		},
	}
	cfg.AddHostKey(s.hostKey)
	return cfg
}

func (s *countingServer) serve() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer conn.Close()
			sc, chans, reqs, err := ssh.NewServerConn(conn, s.config())
			if err != nil {
				return
			}
			defer sc.Close()
			go ssh.DiscardRequests(reqs)
			for nc := range chans {
				var n int64
				if nc.ChannelType() == "session" {
					n = s.sessions.Add(1)
				}
				if !s.runs || n == 0 {
					_ = nc.Reject(ssh.Prohibited, "counting server runs nothing")
					continue
				}
				ch, reqs, err := nc.Accept()
				if err != nil {
					return
				}
				s.wg.Add(1)
				go func() {
					defer s.wg.Done()
					s.session(n, ch, reqs)
				}()
			}
		}()
	}
}

// session runs session channel n: an exec exits 0 at once, the sftp
// subsystem is served, each once the next channel's open has come (or 5 s
// went by without it: unpaired).
func (s *countingServer) session(n int64, ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	first := true
	for req := range reqs {
		if first {
			s.firstsMu.Lock()
			s.firsts[n] = req.Type
			s.firstsMu.Unlock()
			first = false
		}
		if req.Type == "exec" || req.Type == "subsystem" {
			for deadline := time.Now().Add(5 * time.Second); s.sessions.Load() <= n; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					s.unpaired.Add(1)
					break
				}
			}
		}
		switch req.Type {
		case "exec":
			_ = req.Reply(true, nil)
			_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{0}))
			return
		case "subsystem":
			_ = req.Reply(true, nil)
			go ssh.DiscardRequests(reqs)
			if srv, err := sftp.NewServer(ch); err == nil {
				_ = srv.Serve()
			}
			return
		default:
			_ = req.Reply(false, nil)
		}
	}
}

// first is session channel n's first request's type.
func (s *countingServer) first(n int64) string {
	s.firstsMu.Lock()
	defer s.firstsMu.Unlock()
	return s.firsts[n]
}

func (s *countingServer) dial(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", s.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (s *countingServer) auth() Auth {
	return Auth{Signer: s.userKey.Signer, HostKey: Fingerprint(s.hostKey.PublicKey())}
}

// TestHostKeyCheckedBeforeAuth is the proof: a server with a key
// other than the pinned one never receives a user-auth request.
func TestHostKeyCheckedBeforeAuth(t *testing.T) {
	s := newCountingServer(t)
	ctx := testCtx(t)
	other, err := GenerateSessionKey()
	if err != nil {
		t.Fatal(err)
	}
	auth := s.auth()
	auth.HostKey = Fingerprint(other.Signer.PublicKey())
	if _, err := Connect(ctx, s.dial(t), auth); !errors.Is(err, ErrHostKeyMismatch) {
		t.Fatalf("got %v, want ErrHostKeyMismatch", err)
	}
	// A wrong key and a good one: the counters do move when auth happens.
	c, err := Connect(ctx, s.dial(t), s.auth())
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	// The server goroutines for both connections are done only after
	// cleanup; read counters after the good connect, which happened after
	// the bad one was refused by the client.
	if got := s.pubkey.Load(); got < 1 {
		t.Fatalf("good connection made %d public-key attempts; the counter is broken", got)
	}
	before := s.pubkey.Load()
	if _, err := Connect(ctx, s.dial(t), auth); !errors.Is(err, ErrHostKeyMismatch) {
		t.Fatalf("got %v, want ErrHostKeyMismatch", err)
	}
	auth.HostKey = string(ssh.MarshalAuthorizedKey(other.Signer.PublicKey())) // the key itself pinned
	if _, err := Connect(ctx, s.dial(t), auth); !errors.Is(err, ErrHostKeyMismatch) {
		t.Fatalf("public key pinned: got %v, want ErrHostKeyMismatch", err)
	}
	if got := s.pubkey.Load() - before; got != 0 {
		t.Errorf("server with the wrong key saw %d public-key attempts", got)
	}
	if got := s.password.Load(); got != 0 {
		t.Errorf("server saw %d password attempts", got)
	}
	if got := s.pubkey.Load(); got != 1 {
		t.Errorf("server saw %d public-key attempts in total, want 1 (the good connection)", got)
	}
}

func TestAuthValidation(t *testing.T) {
	s := newCountingServer(t)
	ctx := testCtx(t)
	for name, auth := range map[string]Auth{
		"no host key":      {Signer: s.userKey.Signer},
		"bad host key":     {Signer: s.userKey.Signer, HostKey: "MD5:aa:bb"},
		"known_hosts line": {Signer: s.userKey.Signer, HostKey: "[127.0.0.1]:22 " + string(ssh.MarshalAuthorizedKey(s.hostKey.PublicKey()))},
		"two keys":         {Signer: s.userKey.Signer, HostKey: strings.Repeat(string(ssh.MarshalAuthorizedKey(s.hostKey.PublicKey())), 2)},
		"no key":           {HostKey: Fingerprint(s.hostKey.PublicKey())},
		"bad pem":          {PrivateKey: []byte("not a key"), HostKey: Fingerprint(s.hostKey.PublicKey())},
		"plain key cert":   {Signer: s.userKey.Signer, HostKey: Fingerprint(s.hostKey.PublicKey()), Certificate: []byte(s.userKey.PublicKey)},
	} {
		conn := s.dial(t)
		if c, err := Connect(ctx, conn, auth); err == nil {
			_ = c.Close()
			t.Errorf("%s: connected", name)
		}
		// The client owns conn and closed it on failure.
		if _, err := conn.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
			t.Errorf("%s: conn not closed after a failed Connect: %v", name, err)
		}
	}
	if got := s.pubkey.Load() + s.password.Load(); got != 0 {
		t.Errorf("invalid auth reached the server: %d attempts", got)
	}

	// The loud option connects without a pin; PrivateKey PEM works.
	c, err := Connect(ctx, s.dial(t), Auth{PrivateKey: s.userKey.PrivateKey, InsecureSkipHostKeyCheck: true})
	if err != nil {
		t.Fatalf("InsecureSkipHostKeyCheck: %v", err)
	}
	if c.SSH().User() != DefaultUser {
		t.Errorf("user %q, want %q", c.SSH().User(), DefaultUser)
	}
	_ = c.Close()
}

// An invalid variable name is refused before any channel is opened.
func TestSpawnInvalidEnvSendsNothing(t *testing.T) {
	s := newCountingServer(t)
	ctx := testCtx(t)
	c, err := Connect(ctx, s.dial(t), s.auth())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, name := range []string{"", "1A", "A-B", "A B", "A=B", "ä"} {
		if _, err := c.Spawn(ctx, []string{"true"}, hostgate.SpawnOptions{Env: map[string]string{name: "v"}}); err == nil {
			t.Errorf("name %q accepted", name)
		}
	}
	// A valid spawn does reach the server (which rejects it), so the
	// counter works and then proves the refusals above sent nothing.
	if _, err := c.Spawn(ctx, []string{"true"}, hostgate.SpawnOptions{}); err == nil {
		t.Fatal("counting server ran a command")
	}
	if got := s.sessions.Load(); got != 1 {
		t.Errorf("server saw %d session channels, want 1 (the valid spawn)", got)
	}
}

func TestHandshakeTimeout(t *testing.T) {
	// A peer that accepts and never says a word.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	defer func() {
		_ = ln.Close()
		for c := range accepted {
			_ = c.Close()
		}
	}()
	s := newCountingServer(t)
	dial := func() net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	_, err = ConnectConfig(testCtx(t), dial(), s.auth(), &ClientConfig{HandshakeTimeout: 100 * time.Millisecond})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "did not finish the SSH handshake within 100ms") {
		t.Errorf("handshake timeout: got %v, want DeadlineExceeded saying the host did not finish the handshake within 100ms", err)
	}
	ctx, cancel := context.WithCancel(testCtx(t))
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err = Connect(ctx, dial(), s.auth()); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled handshake: got %v, want Canceled", err)
	}
}

func TestClientClose(t *testing.T) {
	s := newCountingServer(t)
	ctx := testCtx(t)
	c, err := Connect(ctx, s.dial(t), s.auth())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := c.Wait(); err != nil {
		t.Errorf("Wait after Close: %v, want nil", err)
	}
	if _, err := c.Spawn(ctx, []string{"true"}, hostgate.SpawnOptions{}); !errors.Is(err, ErrClientClosed) {
		t.Errorf("Spawn after Close: %v, want ErrClientClosed", err)
	}
	if _, err := c.Dial(ctx, "tcp", "127.0.0.1:1"); !errors.Is(err, ErrClientClosed) {
		t.Errorf("Dial after Close: %v, want ErrClientClosed", err)
	}
	if _, err := c.Listen(ctx, "tcp", "127.0.0.1:0"); !errors.Is(err, ErrClientClosed) {
		t.Errorf("Listen after Close: %v, want ErrClientClosed", err)
	}
}

func TestGenerateSessionKey(t *testing.T) {
	k, err := GenerateSessionKey()
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(k.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(k.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	if pub.Type() != ssh.KeyAlgoED25519 || string(pub.Marshal()) != string(signer.PublicKey().Marshal()) ||
		string(pub.Marshal()) != string(k.Signer.PublicKey().Marshal()) {
		t.Errorf("private key, public key and signer disagree")
	}
	k2, err := GenerateSessionKey()
	if err != nil {
		t.Fatal(err)
	}
	if k2.PublicKey == k.PublicKey {
		t.Error("two session keys are equal")
	}
}

// signUserCert signs key into a user certificate by ca.
func signUserCert(t *testing.T, ca, key *SessionKey, principals []string, valid time.Duration) []byte {
	t.Helper()
	now := time.Now()
	cert := &ssh.Certificate{
		Key: key.Signer.PublicKey(), CertType: ssh.UserCert, KeyId: "test",
		ValidPrincipals: principals,
		ValidAfter:      uint64(now.Add(-time.Minute).Unix()), ValidBefore: uint64(now.Add(valid).Unix()),
		Permissions: ssh.Permissions{Extensions: map[string]string{"permit-pty": "", "permit-port-forwarding": ""}},
	}
	if err := cert.SignCert(rand.Reader, ca.Signer); err != nil {
		t.Fatal(err)
	}
	return ssh.MarshalAuthorizedKey(cert)
}

// freezeProxy relays TCP between the client and a target; freeze stops
// relaying (the peer goes silent, as behind a dead NAT), cut closes both
// sides (the transport dies).
type freezeProxy struct {
	ln     net.Listener
	target string
	frozen chan struct{}
	stop   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newFreezeProxy(t *testing.T, target string) *freezeProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezeProxy{ln: ln, target: target, frozen: make(chan struct{}), stop: make(chan struct{})}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		close(p.stop)
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *freezeProxy) serve() {
	defer p.wg.Done()
	for {
		a, err := p.ln.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = a.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, a, b)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pump(a, b)
		go p.pump(b, a)
	}
}

func (p *freezeProxy) pump(dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-p.frozen:
			<-p.stop
			return
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			_ = dst.Close()
			return
		}
	}
}

func (p *freezeProxy) freeze() { p.once.Do(func() { close(p.frozen) }) }

func (p *freezeProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
}

func (p *freezeProxy) dial(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A peer that stops answering is detected by keepalives: the connection is
// closed and every pending operation fails with ErrConnectionLost, not an
// exit status, and not after the OS's TCP timeout.
func TestSSHDKeepaliveDeadPeer(t *testing.T) {
	s := startSSHD(t, sshdOptions{})
	ctx := testCtx(t)
	p := newFreezeProxy(t, s.addr())
	// Up to 1.5 s without a reply is tolerated; detection still takes
	// seconds, not TCP's minutes. A loaded machine can stall sshd longer
	// than any such bound before the freeze (with 300 ms, 1 run in 30
	// under -race with both cores busy), and keepalive then closes the
	// healthy connection as it must: the start is tried again then.
	var (
		c    *Client
		proc hostgate.Process
	)
	for attempt := 1; ; attempt++ {
		var err error
		c, proc, err = catOverKeepalive(ctx, t, s, p)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrKeepaliveTimeout) || attempt == keepaliveAttempts {
			t.Fatalf("before the freeze (attempt %d): %v", attempt, err)
		}
		t.Logf("before the freeze (attempt %d): %v: sshd was silent past the keepalive's bound; again", attempt, err)
	}
	defer c.Close()
	go func() { _, _ = io.Copy(io.Discard, proc.Stdout()) }()

	p.freeze()
	start := time.Now()
	spawnErr := make(chan error, 1)
	go func() {
		_, err := c.Spawn(ctx, []string{"true"}, hostgate.SpawnOptions{})
		spawnErr <- err
	}()
	err := proc.Wait()
	var ee *hostgate.ExitError
	if errors.As(err, &ee) || !errors.Is(err, ErrConnectionLost) || !errors.Is(err, ErrKeepaliveTimeout) {
		t.Errorf("Wait on a dead peer: got %v, want ErrConnectionLost and ErrKeepaliveTimeout", err)
	}
	if err := <-spawnErr; !errors.Is(err, ErrConnectionLost) {
		t.Errorf("pending Spawn: got %v, want ErrConnectionLost", err)
	}
	err = c.Wait()
	var ne net.Error
	if !errors.Is(err, ErrKeepaliveTimeout) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("Client.Wait: got %v, want ErrKeepaliveTimeout, a net.Error with Timeout", err)
	}
	t.Logf("dead peer detected after %v (interval 100ms, 15 missed)", time.Since(start))
}

// keepaliveAttempts bounds the tries of a keepalive test whose sshd went
// silent past the keepalive's bound while it had to answer: a keepalive
// that closes healthy connections closes them on every try.
const keepaliveAttempts = 3

// catOverKeepalive connects through p with keepalives every 100 ms, 15 of
// them missed allowed, and starts a cat that has echoed a line. Its
// stderr is drained. On an error nothing is left open.
func catOverKeepalive(ctx context.Context, t *testing.T, s *sshdServer, p *freezeProxy) (*Client, hostgate.Process, error) {
	c, err := ConnectConfig(ctx, p.dial(t), s.auth(), &ClientConfig{KeepaliveInterval: 100 * time.Millisecond, KeepaliveMaxMissed: 15})
	if err != nil {
		return nil, nil, err
	}
	// cat exits when sshd goes away and closes its stdin.
	proc, err := c.Spawn(ctx, []string{"cat"}, hostgate.SpawnOptions{})
	if err == nil {
		go func() { _, _ = io.Copy(io.Discard, proc.Stderr()) }()
		_, err = io.WriteString(proc.Stdin(), "ping\n")
	}
	if err == nil {
		buf := make([]byte, 5)
		if _, err = io.ReadFull(proc.Stdout(), buf); err == nil && string(buf) != "ping\n" {
			t.Fatalf("echo before freeze: %q", buf)
		}
	}
	if err != nil {
		err = withCause(c, err)
		_ = c.Close()
		return nil, nil, err
	}
	return c, proc, nil
}

// withCause adds to err, an operation's on c, why c ended if it has.
func withCause(c *Client, err error) error {
	select {
	case <-c.Done():
		if cause := c.Wait(); !errors.Is(err, cause) {
			return fmt.Errorf("%w; the connection ended: %w", err, cause)
		}
	default:
	}
	return err
}

// Keepalives do not disturb a healthy connection that is idle for many
// intervals.
func TestSSHDKeepaliveHealthy(t *testing.T) {
	s := startSSHD(t, sshdOptions{})
	ctx := testCtx(t)
	// 60 intervals pass, so replies must reset the count; sshd silent for
	// 1.5 s is taken for gone. A loaded machine can stall sshd longer than
	// any such bound, and keepalive then closes the connection as it must:
	// the test is tried again then.
	for attempt := 1; ; attempt++ {
		err := idleOverKeepalive(ctx, t, s)
		if err == nil {
			return
		}
		if !errors.Is(err, ErrKeepaliveTimeout) || attempt == keepaliveAttempts {
			t.Fatalf("healthy connection closed (attempt %d): %v", attempt, err)
		}
		t.Logf("attempt %d: %v: sshd was silent past the keepalive's bound; again", attempt, err)
	}
}

// idleOverKeepalive runs sleep 3 over a connection with keepalives every
// 50 ms, 30 of them missed allowed, and reports why it ended early.
func idleOverKeepalive(ctx context.Context, t *testing.T, s *sshdServer) error {
	c := s.connect(t, &ClientConfig{KeepaliveInterval: 50 * time.Millisecond, KeepaliveMaxMissed: 30})
	defer c.Close()
	proc, err := c.Spawn(ctx, []string{"sleep", "3"}, hostgate.SpawnOptions{})
	if err != nil {
		return withCause(c, err)
	}
	go func() { _, _ = io.Copy(io.Discard, proc.Stdout()) }()
	go func() { _, _ = io.Copy(io.Discard, proc.Stderr()) }()
	_ = proc.Stdin().Close()
	if err := proc.Wait(); err != nil {
		return withCause(c, err)
	}
	select {
	case <-c.Done():
		return c.Wait()
	default:
		return nil
	}
}

// With keepalives off, a silent peer still cannot hold a caller past its
// ctx, and a transport that then dies fails the running process with
// ErrConnectionLost rather than an exit status.
func TestSSHDFrozenPeerRespectsCtx(t *testing.T) {
	s := startSSHD(t, sshdOptions{})
	ctx := testCtx(t)
	p := newFreezeProxy(t, s.addr())
	c, err := ConnectConfig(ctx, p.dial(t), s.auth(), &ClientConfig{KeepaliveInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	proc, err := c.Spawn(ctx, []string{"cat"}, hostgate.SpawnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, proc.Stderr()) }()
	go func() { _, _ = io.Copy(io.Discard, proc.Stdout()) }()

	p.freeze()
	for name, op := range map[string]func(context.Context) error{
		"Spawn": func(ctx context.Context) error {
			_, err := c.Spawn(ctx, []string{"true"}, hostgate.SpawnOptions{})
			return err
		},
		"Dial": func(ctx context.Context) error {
			_, err := c.Dial(ctx, "tcp", "127.0.0.1:1")
			return err
		},
		"Listen": func(ctx context.Context) error {
			_, err := c.Listen(ctx, "tcp", "127.0.0.1:0")
			return err
		},
	} {
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		if err := op(short); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s on a frozen peer: %v, want DeadlineExceeded", name, err)
		}
		cancel()
	}
	select {
	case <-c.Done():
		t.Fatal("connection closed without keepalives")
	default:
	}

	p.cut()
	err = proc.Wait()
	var ee *hostgate.ExitError
	if errors.As(err, &ee) || !errors.Is(err, ErrConnectionLost) || errors.Is(err, ErrKeepaliveTimeout) {
		t.Errorf("Wait after the transport died: %v, want ErrConnectionLost (not a keepalive timeout)", err)
	}
	if err := c.Wait(); !errors.Is(err, ErrConnectionLost) {
		t.Errorf("Client.Wait: %v", err)
	}
}
