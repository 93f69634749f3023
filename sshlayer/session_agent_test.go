//go:build unix

package sshlayer

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/internal/testenv"
)

// agentTestServer starts a server with cfg (its keys generated) whose
// forwarded agents say on closed which directory they removed, and whose
// wait for the answer to an auth-agent@openssh.com open is openTimeout
// (0: the default).
func agentTestServer(t *testing.T, cfg ServerConfig, openTimeout time.Duration) (addr string, hostKey ssh.PublicKey, client ssh.Signer, closed <-chan string) {
	t.Helper()
	ch := make(chan string, 8)
	addr, hostKey, client = srvStartTweakedConfig(t, cfg, func(s *Server) {
		s.agentClosed = func(dir string) { ch <- dir }
		s.channelOpenTimeout = openTimeout
	})
	return addr, hostKey, client, ch
}

// agentSilent stands in for a client that never answers the server's
// auth-agent@openssh.com opens: it takes each and hands it over on the
// channel it returns, unanswered, until the connection ends.
func agentSilent(t *testing.T, c *ssh.Client) <-chan ssh.NewChannel {
	t.Helper()
	chans := c.HandleChannelOpen(agentChannel)
	if chans == nil {
		t.Fatal("auth-agent@openssh.com already handled")
	}
	held := make(chan ssh.NewChannel, 4*maxAgentConns)
	var wg sync.WaitGroup
	wg.Go(func() {
		for nc := range chans {
			held <- nc
		}
	})
	t.Cleanup(func() { _ = c.Close(); wg.Wait() })
	return held
}

// agentDialer returns a dial of a forwarded agent's socket sock and the
// connections it made, each bounded by srvTestWait (a hang bound) and
// closed when the test ends.
func agentDialer(t *testing.T, sock string) (dial func() net.Conn, dialed *[]net.Conn) {
	var conns []net.Conn
	t.Cleanup(func() {
		for _, uc := range conns {
			_ = uc.Close()
		}
	})
	return func() net.Conn {
		t.Helper()
		uc, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, uc)
		_ = uc.SetDeadline(time.Now().Add(srvTestWait))
		return uc
	}, &conns
}

// waitEOF waits (bounded by srvTestWait) until uc's peer closes it.
func waitEOF(t *testing.T, uc net.Conn, what string) {
	t.Helper()
	_ = uc.SetReadDeadline(time.Now().Add(srvTestWait))
	if n, err := uc.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("%s: read %d, %v; want it closed (EOF)", what, n, err)
	}
}

// acceptLate accepts nc, an open the server gave up waiting for, and
// checks that the server closes the channel at once.
func acceptLate(t *testing.T, nc ssh.NewChannel, what string) {
	t.Helper()
	ch, reqs, err := nc.Accept()
	if err != nil {
		t.Fatal(err)
	}
	go ssh.DiscardRequests(reqs)
	if n, err := ch.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("a late-accepted %s channel: read %d, %v; want the server to close it (EOF)", what, n, err)
	}
	_ = ch.Close()
}

// agentEcho stands in for the client's agent: it accepts every
// auth-agent@openssh.com channel the server opens on c, says so on opened,
// and echoes what it reads.
func agentEcho(t *testing.T, c *ssh.Client) (opened <-chan struct{}) {
	t.Helper()
	chans := c.HandleChannelOpen("auth-agent@openssh.com")
	if chans == nil {
		t.Fatal("auth-agent@openssh.com already handled")
	}
	o := make(chan struct{}, 2*maxAgentConns)
	var wg sync.WaitGroup
	wg.Go(func() {
		for nc := range chans {
			ch, reqs, err := nc.Accept()
			if err != nil {
				t.Errorf("accept auth-agent channel: %v", err)
				continue
			}
			o <- struct{}{}
			go ssh.DiscardRequests(reqs)
			wg.Go(func() {
				_, _ = io.Copy(ch, ch)
				_ = ch.Close()
			})
		}
	})
	// The channels end with the connection.
	t.Cleanup(func() { _ = c.Close(); wg.Wait() })
	return o
}

// agentSession starts cmd in a new session of c, asking for agent
// forwarding first when ask is set, as OpenSSH does; it returns whether
// the server granted it.
func agentSession(t *testing.T, c *ssh.Client, ask bool, cmd string) (granted bool, s *ssh.Session, stdin io.WriteCloser, stdout *bufio.Reader) {
	t.Helper()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if ask {
		if granted, err = s.SendRequest("auth-agent-req@openssh.com", true, nil); err != nil {
			t.Fatal(err)
		}
	}
	if stdin, err = s.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := s.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(cmd); err != nil {
		t.Fatal(err)
	}
	return granted, s, stdin, bufio.NewReader(out)
}

// agentCatSession starts a server that allows agent forwarding (its wait
// for an agent channel open's answer openTimeout, 0 for the default),
// connects, lets handle take the auth-agent channel opens on the client,
// and runs `exec cat` in a session granted agent forwarding. It returns
// the server's log, the client, the server's closed (agentTestServer),
// the session and its stdin, and the command's SSH_AUTH_SOCK.
func agentCatSession(t *testing.T, openTimeout time.Duration, handle func(*ssh.Client)) (logs *testenv.LogBuffer, c *ssh.Client, closed <-chan string, s *ssh.Session, stdin io.WriteCloser, sock string) {
	t.Helper()
	logs = new(testenv.LogBuffer)
	addr, hk, ck, closed := agentTestServer(t, ServerConfig{AgentForwarding: true, Logger: slog.New(slog.NewTextHandler(logs, nil))}, openTimeout)
	c, err := srvDialWith(addr, hk, ssh.PublicKeys(ck))
	if err != nil {
		t.Fatal(err)
	}
	handle(c)
	granted, s, stdin, stdout := agentSession(t, c, true, `echo "$SSH_AUTH_SOCK"; exec cat`)
	if !granted {
		t.Fatalf("auth-agent-req refused\n%s", logs.String())
	}
	return logs, c, closed, s, stdin, readLine(t, stdout)
}

// readLine reads one line of a command's output, without its newline.
func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("read command output: %q, %v", line, err)
	}
	return strings.TrimSuffix(line, "\n")
}

// TestAgentForwardingSocket: a session granted agent forwarding gives its
// command SSH_AUTH_SOCK, a 0600 socket in a 0700 directory whose every
// connection reaches the client's agent; past maxAgentConns at once a
// connection is closed and logged, and when the session ends (its command
// exits, or the connection is lost) the socket and its directory are gone
// and every connection is closed.
func TestAgentForwardingSocket(t *testing.T) {
	t.Parallel()
	for _, end := range []string{"command exits", "connection lost"} {
		t.Run(end, func(t *testing.T) {
			t.Parallel()
			var opened <-chan struct{}
			logs, c, closed, s, stdin, sock := agentCatSession(t, 0, func(c *ssh.Client) { opened = agentEcho(t, c) })
			if !filepath.IsAbs(sock) {
				t.Fatalf("SSH_AUTH_SOCK=%q, want a socket's path", sock)
			}
			dir := filepath.Dir(sock)
			if fi, err := os.Lstat(sock); err != nil || fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o600 {
				t.Errorf("socket %s: %v %v, want a 0600 socket", sock, fi.Mode(), err)
			}
			if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
				t.Errorf("socket directory %s: %v %v, want a 0700 directory", dir, fi.Mode(), err)
			}

			dial, dialed := agentDialer(t, sock)
			for i := range maxAgentConns {
				uc := dial()
				msg := fmt.Sprintf("request %d", i)
				if _, err := io.WriteString(uc, msg); err != nil {
					t.Fatal(err)
				}
				buf := make([]byte, len(msg))
				if _, err := io.ReadFull(uc, buf); err != nil || string(buf) != msg {
					t.Fatalf("connection %d to the agent: %q %v, want %q back", i, buf, err, msg)
				}
			}
			// Every one of them is being carried: one more is refused.
			extra := dial()
			if n, err := extra.Read(make([]byte, 1)); err != io.EOF {
				t.Errorf("connection %d: read %d, %v; want it closed (EOF)", maxAgentConns+1, n, err)
			}
			if n := len(opened); n != maxAgentConns {
				t.Errorf("%d auth-agent channels opened, want %d", n, maxAgentConns)
			}
			if !strings.Contains(logs.String(), "agent connection refused: too many open in the session") {
				t.Errorf("no log line for the refused connection:\n%s", logs.String())
			}

			switch end {
			case "command exits":
				_ = stdin.Close()
				if err := s.Wait(); err != nil {
					t.Fatalf("command: %v", err)
				}
			case "connection lost":
				_ = c.Close()
			}
			select {
			case got := <-closed:
				if got != dir {
					t.Errorf("removed %s, want %s", got, dir)
				}
			case <-time.After(srvTestWait):
				t.Fatal("the session's forwarded agent was not closed")
			}
			if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("socket directory %s after the session: %v, want it gone", dir, err)
			}
			for i, uc := range (*dialed)[:maxAgentConns] {
				if n, err := uc.Read(make([]byte, 1)); err != io.EOF {
					t.Errorf("connection %d after the session: read %d, %v; want EOF", i, n, err)
				}
			}
		})
	}
}

// TestAgentForwardingPolicy: agent forwarding is granted as sshd grants
// it, only where the server allows it (AgentForwarding) and the key
// permits it (a plain key does, a certificate with
// permit-agent-forwarding does); a refusal leaves the command without
// SSH_AUTH_SOCK and says why in the server's log.
func TestAgentForwardingPolicy(t *testing.T) {
	t.Parallel()
	ca, _, _ := newEd25519Signer()
	var logs testenv.LogBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	allowing := srvStartServer(t, &ServerConfig{AgentForwarding: true, TrustedUserCAs: []ssh.PublicKey{ca.PublicKey()}, Principal: "host-1", Logger: logger})
	refusing := srvStartServer(t, &ServerConfig{Logger: logger})
	certified := func(ext ...string) ssh.Signer {
		key, _, _ := newEd25519Signer()
		cert := srvSignCert(t, ca, key.PublicKey(), func(c *ssh.Certificate) {
			c.Permissions.Extensions = map[string]string{}
			for _, e := range ext {
				c.Permissions.Extensions[e] = ""
			}
		})
		cs, err := ssh.NewCertSigner(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	for _, tc := range []struct {
		name    string
		ts      *TestServer
		key     ssh.Signer
		ask     bool
		granted bool
		log     string
	}{
		{"plain key", allowing, allowing.ClientSigner, true, true, ""},
		{"certificate with permit-agent-forwarding", allowing, certified("permit-agent-forwarding"), true, true, ""},
		{"certificate without permit-agent-forwarding", allowing, certified("permit-pty", "permit-port-forwarding"), true, false, "agent forwarding refused: key lacks permit-agent-forwarding"},
		{"not asked", allowing, allowing.ClientSigner, false, false, ""},
		{"server without AgentForwarding", refusing, refusing.ClientSigner, true, false, "agent forwarding refused: off on this server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := srvDialWith(tc.ts.Addr, tc.ts.HostPublicKey, ssh.PublicKeys(tc.key))
			if err != nil {
				t.Fatal(err)
			}
			agentEcho(t, c)
			granted, s, stdin, stdout := agentSession(t, c, tc.ask, `echo "[$SSH_AUTH_SOCK]"`)
			_ = stdin.Close()
			sock := readLine(t, stdout)
			if err := s.Wait(); err != nil {
				t.Fatal(err)
			}
			if granted != tc.granted || (sock != "[]") != tc.granted {
				t.Errorf("granted %v, SSH_AUTH_SOCK %s; want granted %v", granted, sock, tc.granted)
			}
			if tc.log != "" && !strings.Contains(logs.String(), tc.log) {
				t.Errorf("no log line %q:\n%s", tc.log, logs.String())
			}
		})
	}
}

// TestAgentForwardingUnansweredOpen: a client that never answers the
// server's auth-agent@openssh.com opens holds neither the session's end
// nor, past the open's bound, the program that dialed SSH_AUTH_SOCK. An
// open given up still counts against maxAgentConns until the client
// answers it. Before, the session's end waited for the answer until the
// connection ended (found by the leftovers29 audit).
func TestAgentForwardingUnansweredOpen(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		openTimeout time.Duration // 0: the default, which the test never reaches
	}{
		{"session ends", 0},
		{"open bounded", time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var held <-chan ssh.NewChannel
			logs, _, closed, s, stdin, sock := agentCatSession(t, tc.openTimeout, func(c *ssh.Client) { held = agentSilent(t, c) })
			dial, _ := agentDialer(t, sock)
			nextOpen := func() ssh.NewChannel {
				t.Helper()
				select {
				case nc := <-held:
					return nc
				case <-time.After(srvTestWait):
					t.Fatalf("no auth-agent channel open reached the client\n%s", logs.String())
					return nil
				}
			}

			if tc.openTimeout > 0 {
				// Each connection waits for its open's answer no longer
				// than the bound, and the open stays pending: after
				// maxAgentConns of them, one more is refused at once.
				var pending []ssh.NewChannel
				for i := range maxAgentConns {
					uc := dial()
					pending = append(pending, nextOpen())
					waitEOF(t, uc, fmt.Sprintf("connection %d, its open unanswered", i))
				}
				waitEOF(t, dial(), "a connection past maxAgentConns pending opens")
				if !strings.Contains(logs.String(), "agent connection refused: too many open in the session") {
					t.Errorf("no log line for the refused connection:\n%s", logs.String())
				}
				if !strings.Contains(logs.String(), "the client did not answer the open") {
					t.Errorf("no log line for the unanswered open:\n%s", logs.String())
				}
				// The answer to a given-up open frees its place: a
				// refusal, or an acceptance, whose channel the server
				// closes at once.
				if err := pending[0].Reject(ssh.Prohibited, "late"); err != nil {
					t.Fatal(err)
				}
				acceptLate(t, pending[1], "auth-agent")
			}
			// One open pending as the session ends (with the bound, in a
			// place one of the answers above freed: a connection the
			// server refuses, before it took those answers, is retried).
			uc := dial()
			if tc.openTimeout > 0 {
				deadline := time.Now().Add(srvTestWait)
				for {
					refused := make(chan struct{})
					go func(uc net.Conn) {
						defer close(refused)
						_ = uc.SetReadDeadline(deadline)
						_, _ = uc.Read(make([]byte, 1))
					}(uc)
					select {
					case nc := <-held:
						_ = nc // left unanswered
					case <-refused:
						if time.Now().Before(deadline) {
							uc = dial()
							continue
						}
						t.Fatal("no place freed by answering two given-up opens")
					}
					break
				}
			} else {
				nextOpen()
			}
			_ = stdin.Close()
			if err := s.Wait(); err != nil {
				t.Fatalf("command: %v", err)
			}
			select {
			case got := <-closed:
				if got != filepath.Dir(sock) {
					t.Errorf("removed %s, want %s", got, filepath.Dir(sock))
				}
			case <-time.After(srvTestWait):
				t.Fatalf("the session's forwarded agent was not closed while an open was unanswered\n%s", logs.String())
			}
			if tc.openTimeout == 0 {
				waitEOF(t, uc, "the connection whose open was pending at the session's end")
			}
		})
	}
}

// TestAgentForwardingTellsItsDirectory: ServerConfig.AgentSockets hears of
// each forwarded agent's directory once it is made and once the session
// removed it, so that the agent's guard removes it should the agent be
// killed before (a soak's 7 SIGKILLs of an agent during ssh -A sessions
// left 6 of them in its TMPDIR).
func TestAgentForwardingTellsItsDirectory(t *testing.T) {
	t.Parallel()
	type told struct {
		dir  string
		made bool
	}
	tells := make(chan told, 4)
	cfg := ServerConfig{AgentForwarding: true, AgentSockets: func(dir string, made bool) { tells <- told{dir, made} }}
	addr, hk, ck, closed := agentTestServer(t, cfg, 0)
	c, err := srvDialWith(addr, hk, ssh.PublicKeys(ck))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	agentEcho(t, c)
	granted, s, stdin, stdout := agentSession(t, c, true, `echo "$SSH_AUTH_SOCK"; exec cat`)
	if !granted {
		t.Fatal("auth-agent-req refused")
	}
	dir := filepath.Dir(readLine(t, stdout))
	next := func() told {
		t.Helper()
		select {
		case tl := <-tells:
			return tl
		case <-time.After(srvTestWait):
			t.Fatal("AgentSockets was not told")
		}
		return told{}
	}
	if tl := next(); tl != (told{dir, true}) {
		t.Fatalf("told %+v first, want %s made", tl, dir)
	}
	_ = stdin.Close()
	if err := s.Wait(); err != nil {
		t.Fatalf("command: %v", err)
	}
	select {
	case <-closed:
	case <-time.After(srvTestWait):
		t.Fatal("the session's forwarded agent was not closed")
	}
	if tl := next(); tl != (told{dir, false}) {
		t.Fatalf("told %+v once the session ended, want %s removed", tl, dir)
	}
}
