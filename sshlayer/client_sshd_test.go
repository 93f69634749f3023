package sshlayer

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/testenv"
)

// run spawns argv, feeds stdin, collects stdout and stderr and waits.
func run(ctx context.Context, t testing.TB, c *Client, argv []string, opts hostgate.SpawnOptions, stdin string) (string, string, error) {
	t.Helper()
	p, err := c.Spawn(ctx, argv, opts)
	if err != nil {
		t.Fatalf("spawn %q: %v", argv, err)
	}
	var stdout, stderr bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _, _ = io.Copy(&stdout, p.Stdout()) }()
	go func() { defer wg.Done(); _, _ = io.Copy(&stderr, p.Stderr()) }()
	if _, err := io.WriteString(p.Stdin(), stdin); err != nil {
		t.Errorf("write stdin: %v", err)
	}
	_ = p.Stdin().Close()
	wg.Wait()
	return stdout.String(), stderr.String(), p.Wait()
}

func TestSSHDExec(t *testing.T) {
	s := startSSHD(t, sshdOptions{})
	c := s.connect(t, nil)
	ctx := testCtx(t)

	t.Run("exit codes", func(t *testing.T) {
		if _, _, err := run(ctx, t, c, []string{"true"}, hostgate.SpawnOptions{}, ""); err != nil {
			t.Errorf("true: %v", err)
		}
		_, _, err := run(ctx, t, c, []string{"sh", "-c", "exit 3"}, hostgate.SpawnOptions{}, "")
		var ee *hostgate.ExitError
		if !errors.As(err, &ee) || ee.Code != 3 || ee.Signal != "" {
			t.Errorf("exit 3: got %v, want ExitError code 3", err)
		}
		_, _, err = run(ctx, t, c, []string{"no-such-command-hostgate"}, hostgate.SpawnOptions{}, "")
		if hostgate.ExitCode(err) != 127 {
			t.Errorf("missing command: got %v, want exit 127", err)
		}
	})

	t.Run("stdout stderr stdin", func(t *testing.T) {
		out, errOut, err := run(ctx, t, c, []string{"sh", "-c", "cat; echo to-stderr >&2"}, hostgate.SpawnOptions{}, "from stdin\n")
		if err != nil || out != "from stdin\n" || errOut != "to-stderr\n" {
			t.Errorf("got out %q err %q (%v)", out, errOut, err)
		}
	})

	t.Run("NUL refused, connection kept", func(t *testing.T) {
		// sshd drops the whole connection over a NUL in a command line.
		for _, opts := range []hostgate.SpawnOptions{{}, {Dir: "/tmp\x00"}, {Env: map[string]string{"A": "\x00"}}} {
			argv := []string{"echo", "a\x00b"}
			if opts.Dir != "" || opts.Env != nil {
				argv = []string{"true"}
			}
			if _, err := c.Spawn(ctx, argv, opts); !errors.Is(err, fs.ErrInvalid) {
				t.Errorf("spawn with a NUL (%+v): %v, want fs.ErrInvalid", opts, err)
			}
		}
		if out, _, err := run(ctx, t, c, []string{"echo", "alive"}, hostgate.SpawnOptions{}, ""); err != nil || out != "alive\n" {
			t.Errorf("after the refused spawns: %q %v", out, err)
		}
	})

	t.Run("env and dir", func(t *testing.T) {
		env := map[string]string{"A": "x y", "B_2": `it's "$HOME" $(id)`, "EMPTY": ""}
		out, _, err := run(ctx, t, c, []string{"sh", "-c", `printf '%s|%s|%s|%s' "$A" "$B_2" "${EMPTY-unset}" "$(pwd)"`},
			hostgate.SpawnOptions{Env: env, Dir: "/tmp"}, "")
		if want := `x y|it's "$HOME" $(id)||/tmp`; err != nil || out != want {
			t.Errorf("got %q (%v), want %q", out, err, want)
		}
		_, _, err = run(ctx, t, c, []string{"true"}, hostgate.SpawnOptions{Dir: "/no/such/dir"}, "")
		if hostgate.ExitCode(err) != 127 {
			t.Errorf("missing dir: got %v, want exit 127", err)
		}
	})

	t.Run("invalid env name", func(t *testing.T) {
		_, err := c.Spawn(ctx, []string{"true"}, hostgate.SpawnOptions{Env: map[string]string{"A-B": "x"}})
		if err == nil || !strings.Contains(err.Error(), `"A-B"`) {
			t.Errorf("got %v, want an error naming the variable", err)
		}
	})

	t.Run("nasty argv", func(t *testing.T) {
		words := []string{"", " ", "a b", "'", `"`, `\`, "$HOME", "`id`", "$(id)", "*", "~", "#x", "a;b|c&d", "!",
			"-n", "--", "new\nline", "tab\t", "\xff\xfe", "ünï", strings.Repeat("x", 4096)}
		out, _, err := run(ctx, t, c, append([]string{"printf", `%s\0`}, words...), hostgate.SpawnOptions{}, "")
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Split(out, "\x00")
		got = got[:len(got)-1]
		if len(got) != len(words) {
			t.Fatalf("got %d words %q, want %d", len(got), got, len(words))
		}
		for i := range words {
			if got[i] != words[i] {
				t.Errorf("word %d: got %q want %q", i, got[i], words[i])
			}
		}
	})

	t.Run("concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p, err := c.Spawn(ctx, []string{"sh", "-c", "echo " + strconv.Itoa(i)}, hostgate.SpawnOptions{})
				if err != nil {
					t.Error(err)
					return
				}
				go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
				out, _ := io.ReadAll(p.Stdout())
				if err := p.Wait(); err != nil || string(out) != strconv.Itoa(i)+"\n" {
					t.Errorf("process %d: %q %v", i, out, err)
				}
			}()
		}
		wg.Wait()
	})
}

func TestSSHDPTY(t *testing.T) {
	s := startSSHD(t, sshdOptions{})
	c := s.connect(t, nil)
	ctx := testCtx(t)
	p, err := c.Spawn(ctx, []string{"sh", "-c", `test -t 0 && echo "tty $TERM"; stty size; read x; stty size`},
		hostgate.SpawnOptions{PTY: &hostgate.PTY{Term: "vt100", Cols: 100, Rows: 30}})
	if err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(p.Stdout())
		for sc.Scan() {
			if l := strings.TrimSpace(sc.Text()); l != "" {
				lines <- l
			}
		}
	}()
	next := func() string {
		select {
		case l := <-lines:
			return l
		case <-ctx.Done():
			t.Fatal("timed out reading the pty")
			return ""
		}
	}
	if got := next(); got != "tty vt100" {
		t.Errorf("got %q, want a tty with TERM=vt100", got)
	}
	if got := next(); got != "30 100" {
		t.Errorf("stty size: got %q, want 30 100", got)
	}
	if err := p.(hostgate.Resizer).Resize(120, 40); err != nil {
		t.Fatal(err)
	}
	// The window change is processed before the newline that lets the
	// script go on: both travel in order on the same channel.
	if _, err := io.WriteString(p.Stdin(), "\n"); err != nil {
		t.Fatal(err)
	}
	if got := next(); got != "40 120" {
		t.Errorf("stty size after resize: got %q, want 40 120", got)
	}
	if err := p.Wait(); err != nil {
		t.Errorf("wait: %v", err)
	}
	for range lines {
	}
}

// spawnSleeper starts `echo $$; exec sleep 30` and returns the process and
// its pid (the shell execs, so the pid is sleep's).
func spawnSleeper(ctx context.Context, t *testing.T, c *Client, pty *hostgate.PTY) (hostgate.Process, int) {
	t.Helper()
	return spawnSleeperOpts(ctx, t, c, "echo $$; exec sleep 30", pty)
}

// spawnSleeperCmd runs script, which prints the pid to watch first.
func spawnSleeperCmd(ctx context.Context, t *testing.T, c *Client, script string) (hostgate.Process, int) {
	t.Helper()
	return spawnSleeperOpts(ctx, t, c, script, nil)
}

func spawnSleeperOpts(ctx context.Context, t *testing.T, c *Client, script string, pty *hostgate.PTY) (hostgate.Process, int) {
	t.Helper()
	p, err := c.Spawn(ctx, []string{"sh", "-c", script}, hostgate.SpawnOptions{PTY: pty})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
	r := bufio.NewReader(p.Stdout())
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, r) }()
	return p, pid
}

// OpenSSH sshd ignores "signal" requests for root logins (no post-auth
// privilege separation), which is how these tests log in; so they exercise
// the fallback the client has for such servers: after killGrace, Kill(KILL)
// closes the session channel, and sshd hangs up the PTY.
func TestSSHDKill(t *testing.T) {
	s := startSSHD(t, sshdOptions{})
	c := s.connect(t, nil)
	ctx := testCtx(t)
	pty := &hostgate.PTY{}

	t.Run("kill", func(t *testing.T) {
		p, pid := spawnSleeper(ctx, t, c, pty)
		if err := p.Kill(hostgate.SIGKILL); err != nil {
			t.Fatal(err)
		}
		err := p.Wait()
		var ee *hostgate.ExitError
		if !errors.As(err, &ee) || ee.Signal == "" || ee.Code != -1 {
			t.Errorf("got %v, want an ExitError with a signal", err)
		}
		testenv.WaitGone(t, pid, time.Minute)
		if err := p.Kill(hostgate.SIGKILL); err != nil {
			t.Errorf("kill after exit: %v", err)
		}
	})

	t.Run("ctx cancel", func(t *testing.T) {
		pctx, cancel := context.WithCancel(ctx)
		p, pid := spawnSleeper(pctx, t, c, pty)
		cancel()
		if err := p.Wait(); !errors.Is(err, context.Canceled) {
			t.Errorf("got %v, want context.Canceled", err)
		}
		testenv.WaitGone(t, pid, time.Minute)
	})
}

// echoServer accepts connections on loopback and echoes them until EOF,
// then half-closes.
func echoServer(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.Close()
				_, _ = io.Copy(conn, conn)
				_ = conn.(*net.TCPConn).CloseWrite()
			}()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	return ln
}

// echoThrough writes msg to conn, half-closes and expects msg back then EOF.
func echoThrough(t *testing.T, conn net.Conn, msg string) {
	t.Helper()
	if _, err := io.WriteString(conn, msg); err != nil {
		t.Fatal(err)
	}
	cw, ok := conn.(interface{ CloseWrite() error })
	if !ok {
		t.Fatalf("%T does not half-close", conn)
	}
	if err := cw.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(conn)
	if err != nil || string(got) != msg {
		t.Errorf("echo: got %q (%v), want %q", got, err, msg)
	}
}

func TestSSHDDial(t *testing.T) {
	s := startSSHD(t, sshdOptions{})
	c := s.connect(t, nil)
	ctx := testCtx(t)
	echo := echoServer(t)

	conn, err := c.Dial(ctx, "tcp", echo.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	echoThrough(t, conn, strings.Repeat("hello through direct-tcpip ", 10000))
	_ = conn.Close()

	// A port nothing listens on is refused by the host, not hung.
	addr := testenv.RefusedAddr(t)
	if conn, err := c.Dial(ctx, "tcp", addr); err == nil {
		_ = conn.Close()
		t.Errorf("dial to a closed port succeeded")
	}
	if _, err := c.Dial(ctx, "udp", addr); err == nil {
		t.Errorf("udp dial accepted")
	}
}

// acceptEcho accepts one connection from ln and echoes it.
func acceptEcho(t *testing.T, ln net.Listener) <-chan error {
	done := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer conn.Close()
		_, err = io.Copy(conn, conn)
		if cw, ok := conn.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- err
	}()
	return done
}

func TestSSHDListen(t *testing.T) {
	s := startSSHD(t, sshdOptions{})
	ctx := testCtx(t)

	t.Run("forward and cancel", func(t *testing.T) {
		c := s.connect(t, nil)
		ln, err := c.Listen(ctx, "tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().(*net.TCPAddr)
		if addr.Port == 0 {
			t.Fatalf("listener reports port 0")
		}
		done := acceptEcho(t, ln)
		conn, err := net.Dial("tcp", addr.String())
		if err != nil {
			t.Fatal(err)
		}
		echoThrough(t, conn, "hello through tcpip-forward")
		_ = conn.Close()
		if err := <-done; err != nil {
			t.Errorf("accepted conn: %v", err)
		}
		sock := sshdListener(t, addr)
		if sock == "" {
			t.Fatalf("sshd does not listen on %s", addr)
		}
		// Close cancels the forward on the host: sshd closes the socket
		// before it answers cancel-tcpip-forward.
		if err := ln.Close(); err != nil {
			t.Fatal(err)
		}
		if sshdListener(t, addr) == sock {
			t.Errorf("host still listens on %s after Close", addr)
		}
	})

	t.Run("released by Client.Close", func(t *testing.T) {
		c := s.connect(t, nil)
		ln, err := c.Listen(ctx, "tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().(*net.TCPAddr)
		sock := sshdListener(t, addr)
		if sock == "" {
			t.Fatalf("sshd does not listen on %s", addr)
		}
		done := acceptEcho(t, ln)
		_ = c.Close()
		if err := <-done; !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept after Close: got %v, want net.ErrClosed", err)
		}
		if err := s.waitIdle(ctx); err != nil {
			t.Fatal(err)
		}
		if sshdListener(t, addr) == sock {
			t.Errorf("host still listens on %s after the connection closed", addr)
		}
	})

	t.Run("released when the transport dies", func(t *testing.T) {
		p := newFreezeProxy(t, s.addr())
		cl, err := Connect(ctx, p.dial(t), s.auth())
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ln, err := cl.Listen(ctx, "tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().(*net.TCPAddr)
		sock := sshdListener(t, addr)
		if sock == "" {
			t.Fatalf("sshd does not listen on %s", addr)
		}
		done := acceptEcho(t, ln)
		p.cut()
		err = <-done
		if !errors.Is(err, net.ErrClosed) || !errors.Is(err, ErrConnectionLost) {
			t.Errorf("Accept after the transport died: got %v, want net.ErrClosed and ErrConnectionLost", err)
		}
		if err := cl.Wait(); !errors.Is(err, ErrConnectionLost) {
			t.Errorf("Wait: got %v, want ErrConnectionLost", err)
		}
		if err := s.waitIdle(ctx); err != nil {
			t.Fatal(err)
		}
		if sshdListener(t, addr) == sock {
			t.Errorf("host still listens on %s after the transport died", addr)
		}
	})
}

func TestSSHDWrongHostKey(t *testing.T) {
	s := startSSHD(t, sshdOptions{})
	ctx := testCtx(t)
	other, err := GenerateSessionKey()
	if err != nil {
		t.Fatal(err)
	}
	auth := s.auth()
	auth.HostKey = Fingerprint(other.Signer.PublicKey())
	_, err = Connect(ctx, s.dial(t), auth)
	if !errors.Is(err, ErrHostKeyMismatch) {
		t.Fatalf("got %v, want ErrHostKeyMismatch", err)
	}
	if !strings.Contains(err.Error(), s.hostKey) {
		t.Errorf("error %q does not name the presented key %s", err, s.hostKey)
	}
	if err := s.waitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	log := s.log()
	if !strings.Contains(log, "kex") {
		t.Fatalf("sshd log shows no key exchange; is LogLevel DEBUG3 in effect?\n%s", log)
	}
	if strings.Contains(log, "userauth-request") || strings.Contains(log, "ssh-userauth") {
		t.Errorf("sshd saw an authentication request:\n%s", log)
	}

	// And the pinned key works on the same server: the check is not
	// failing everything.
	c := s.connect(t, nil)
	if _, _, err := run(ctx, t, c, []string{"true"}, hostgate.SpawnOptions{}, ""); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s.log(), "userauth-request") {
		t.Errorf("sshd log lacks userauth-request for a good connection; the negative check above proves nothing")
	}
}

func TestSSHDHost(t *testing.T) {
	s := startSSHD(t, sshdOptions{})
	ctx := testCtx(t)
	h := hostgate.New(hostgate.Info{Kind: "machine", Persistent: true}, func(ctx context.Context) (*hostgate.Connection, error) {
		c, err := Connect(ctx, s.dial(t), s.auth())
		if err != nil {
			return nil, err
		}
		return c.Connection(nil), nil
	})
	defer h.Close()
	res, err := h.Exec(ctx, []string{"sh", "-c", "echo out; echo err >&2; exit 4"}, hostgate.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" || res.ExitCode != 4 {
		t.Errorf("got %+v", res)
	}
	ln, err := h.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_ = ln.Close()
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.waitIdle(ctx); err != nil {
		t.Errorf("Host.Close left the SSH connection open: %v", err)
	}
}

// certificate auth against sshd's TrustedUserCAKeys.
func TestSSHDCertificate(t *testing.T) {
	ca, err := GenerateSessionKey()
	if err != nil {
		t.Fatal(err)
	}
	s := startSSHD(t, sshdOptions{CA: ca.Signer.PublicKey()})
	ctx := testCtx(t)
	key, err := GenerateSessionKey()
	if err != nil {
		t.Fatal(err)
	}
	cert := signUserCert(t, ca, key, []string{"root"}, time.Hour)
	auth := Auth{User: "root", Signer: key.Signer, Certificate: cert, HostKey: s.hostKey}
	c, err := Connect(ctx, s.dial(t), auth)
	if err != nil {
		t.Fatalf("connect with certificate: %v", err)
	}
	defer c.Close()
	if _, _, err := run(ctx, t, c, []string{"true"}, hostgate.SpawnOptions{}, ""); err != nil {
		t.Fatal(err)
	}
	// The same key without its certificate is not in authorized_keys.
	auth.Certificate = nil
	if c, err := Connect(ctx, s.dial(t), auth); err == nil {
		_ = c.Close()
		t.Errorf("plain key accepted; the certificate test proves nothing")
	}
}

// A machine's sshd usually holds several host keys; the pinned ed25519 key
// must be the one negotiated.
func TestSSHDSeveralHostKeys(t *testing.T) {
	s := startSSHD(t, sshdOptions{ECDSAHostKey: true})
	c := s.connect(t, nil)
	if _, _, err := run(testCtx(t), t, c, []string{"true"}, hostgate.SpawnOptions{}, ""); err != nil {
		t.Fatal(err)
	}
}

// Regression: pinning an OpenSSH host's ECDSA (or RSA) key always failed as
// "host key mismatch", since the client asks for ed25519 first and sshd,
// holding one, presents that. A fingerprint cannot say its key's type, so
// the fix is the pin of the public key itself, whose type the client then
// asks for; a fingerprint of the other key still fails, with an error that
// names the key type presented and this fix.
func TestSSHDPinOtherHostKey(t *testing.T) {
	s := startSSHD(t, sshdOptions{ECDSAHostKey: true, RSAHostKey: true})
	ctx := testCtx(t)
	pins := []string{string(ssh.MarshalAuthorizedKey(s.HostPub))}
	var others []ssh.PublicKey
	for _, typ := range []string{"ecdsa", "rsa"} {
		line, err := os.ReadFile(filepath.Join(s.Dir, "host_"+typ+".pub")) // as ssh-keygen wrote it, with its comment
		if err != nil {
			t.Fatal(err)
		}
		pub, _, _, _, err := ssh.ParseAuthorizedKey(line)
		if err != nil {
			t.Fatal(err)
		}
		pins = append(pins, string(line))
		others = append(others, pub)
	}
	for _, pin := range pins {
		auth := s.auth()
		auth.HostKey = pin
		c, err := Connect(ctx, s.dial(t), auth)
		if err != nil {
			t.Errorf("pin %q: %v", pin, err)
			continue
		}
		if _, _, err := run(ctx, t, c, []string{"true"}, hostgate.SpawnOptions{}, ""); err != nil {
			t.Errorf("pin %q: exec: %v", pin, err)
		}
		_ = c.Close()
	}
	for _, pub := range others {
		auth := s.auth()
		auth.HostKey = Fingerprint(pub)
		_, err := Connect(ctx, s.dial(t), auth)
		if !errors.Is(err, ErrHostKeyMismatch) || !strings.Contains(err.Error(), "presented its ssh-ed25519 key") ||
			!strings.Contains(err.Error(), "pin that public key itself") {
			t.Errorf("%s fingerprint pinned: %v, want ErrHostKeyMismatch naming the ed25519 key presented and the fix", pub.Type(), err)
		}
	}
}

// Client.Close ends running processes with ErrClientClosed, not an exit
// status.
func TestSSHDCloseEndsProcesses(t *testing.T) {
	s := startSSHD(t, sshdOptions{})
	c := s.connect(t, nil)
	ctx := testCtx(t)
	p, err := c.Spawn(ctx, []string{"cat"}, hostgate.SpawnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
	go func() { _, _ = io.Copy(io.Discard, p.Stdout()) }()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	var ee *hostgate.ExitError
	if err := p.Wait(); errors.As(err, &ee) || !errors.Is(err, ErrClientClosed) {
		t.Errorf("Wait after Client.Close: %v, want ErrClientClosed", err)
	}
	if _, err := p.Stdin().Write([]byte("x")); err == nil {
		t.Errorf("stdin still writable after Close")
	}
}

// Unix sockets travel as direct-streamlocal and streamlocal-forward
// (OpenSSH extensions).
func TestSSHDUnixForwards(t *testing.T) {
	s := startSSHD(t, sshdOptions{})
	c := s.connect(t, nil)
	ctx := testCtx(t)
	dir := t.TempDir()

	sock := filepath.Join(dir, "echo.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := acceptEcho(t, ln)
	conn, err := c.Dial(ctx, "unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	echoThrough(t, conn, "hello over direct-streamlocal")
	_ = conn.Close()
	if err := <-done; err != nil {
		t.Errorf("accepted: %v", err)
	}

	remote := filepath.Join(dir, "remote.sock")
	rln, err := c.Listen(ctx, "unix", remote)
	if err != nil {
		t.Fatal(err)
	}
	done = acceptEcho(t, rln)
	conn, err = net.Dial("unix", remote)
	if err != nil {
		t.Fatal(err)
	}
	echoThrough(t, conn, "hello over streamlocal-forward")
	_ = conn.Close()
	if err := <-done; err != nil {
		t.Errorf("accepted: %v", err)
	}
	_ = rln.Close()
}

// Over OpenSSH's sshd a persistent host runs its processes under the
// watchdog: sshd leaves a command running when its connection goes, and
// the client claimed to own supervision for every server, so the tree of
// a host closed (or lost) ran on. (Cancelling needs signals, which sshd
// refuses to root logins like this test's.)
func TestSSHDPersistentHostHasWatchdog(t *testing.T) {
	s := startSSHD(t, sshdOptions{})
	c := s.connect(t, nil)
	if c.OwnsSupervision() {
		t.Fatal("a client of sshd owns supervision")
	}
	h := hostgate.New(hostgate.Info{Persistent: true}, func(context.Context) (*hostgate.Connection, error) {
		return c.Connection(nil), nil
	})
	// A sleep of its own, matched whole (pgrep -x): a pattern that is
	// a prefix of another process's command line (sleep 135 of sleep
	// 1357, of another run of this test on the machine) saw that one
	// alive, and pkill killed it.
	pattern := fmt.Sprintf("sleep 1%09d", rand.IntN(1e9))
	if _, err := h.Spawn(testCtx(t), []string{"sh", "-c", pattern + " & exec " + pattern}, hostgate.SpawnOptions{}); err != nil {
		t.Fatal(err)
	}
	alive := func() bool {
		out, _ := exec.Command("pgrep", "-x", "-f", pattern).Output()
		return len(bytes.TrimSpace(out)) > 0
	}
	// A failure must not leave hours of sleep behind.
	t.Cleanup(func() { _ = exec.Command("pkill", "-x", "-f", pattern).Run() })
	deadline := time.Now().Add(10 * time.Second)
	for !alive() {
		if time.Now().After(deadline) {
			t.Fatal("the command never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = h.Close() // the connection goes
	deadline = time.Now().Add(10 * time.Second)
	for alive() {
		if time.Now().After(deadline) {
			t.Fatal("the tree of a closed persistent host still runs 10 s later")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
