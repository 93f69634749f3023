//go:build unix

package sshlayer

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

// connFuzzCommands are what an exec request of FuzzServerConnection runs
// (its payload picks one): commands the fuzzer cannot turn into others,
// which read, write, wait, exit, leave a child behind, or kill themselves.
var connFuzzCommands = []string{
	"true", "cat", "echo hi", "exit 3", "sleep 5", "head -c 300000 /dev/zero",
	"read x; echo $x", "sleep 5 & echo bg", "kill -TERM $$", "cat >/dev/null; echo done",
}

// connFuzzRequests are the session requests FuzzServerConnection sends,
// with a payload from the input (exec's picks a command). Not shell,
// which would run what the input writes, nor the sftp subsystem, which
// would touch the paths it names (FuzzSFTPCompat has that).
var connFuzzRequests = []string{
	"env", "pty-req", "window-change", "exec", "subsystem", "signal", agentRequest,
	"x11-req", "keepalive@openssh.com", "eow@openssh.com", "break",
}

var connFuzzGlobal = []string{
	"keepalive@openssh.com", "no-more-sessions@openssh.com", "tcpip-forward",
	"cancel-tcpip-forward", "streamlocal-forward@openssh.com", "unknown@example.com",
}

// FuzzServerConnection runs an SSH connection to a server configured as
// the agent's (internal/agent connect.go: a gateway CA's certificates for
// the host id, agent forwarding, SFTP buffers reused, background jobs not
// kept), authenticated with a certificate as the gateway issues them,
// whose client the input drives: sessions and direct-tcpip channels
// opened, requests of every kind with payloads of the input's, data, half
// and whole closes, global requests; then the client leaves, its
// connection cut. The connection must end, and the server's Close return,
// every process and goroutine it started gone.
func FuzzServerConnection(f *testing.F) {
	ca, _, err := newEd25519Signer()
	if err != nil {
		f.Fatal(err)
	}
	user, _, err := newEd25519Signer()
	if err != nil {
		f.Fatal(err)
	}
	cert := &ssh.Certificate{
		Key: user.PublicKey(), CertType: ssh.UserCert, KeyId: "ci", ValidPrincipals: []string{"h1"},
		ValidBefore: ssh.CertTimeInfinity,
		Permissions: ssh.Permissions{Extensions: map[string]string{
			"permit-pty": "", "permit-port-forwarding": "", "permit-agent-forwarding": "",
		}},
	}
	if err := cert.SignCert(rand.Reader, ca); err != nil {
		f.Fatal(err)
	}
	certSigner, err := ssh.NewCertSigner(cert, user)
	if err != nil {
		f.Fatal(err)
	}
	hostKey, _, err := newEd25519Signer()
	if err != nil {
		f.Fatal(err)
	}
	echo := srvStartEcho(f)
	// A TCP pair, not net.Pipe: both ends write their version line first,
	// which an unbuffered pipe deadlocks on (a yamux stream buffers).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	defer ln.Close()

	// Programs: open a session (0), request (1 ch type reply len payload),
	// data (2 ch len data), close write (3 ch), close (4 ch), global (5
	// type len payload), direct-tcpip to an echo server (6).
	f.Add([]byte{0, 1, 0, 3, 1, 1, 1, 2, 0, 3, 'h', 'i', '\n', 3, 0})          // exec cat, data, EOF
	f.Add([]byte{0, 1, 0, 1, 1, 0, 1, 0, 3, 1, 0, 4, 0, 0, 1, 1, 2, 0, 4, 0})  // pty, exec echo, close, again
	f.Add([]byte{0, 1, 0, 6, 1, 0, 1, 0, 3, 1, 1, 4, 1, 0, 5, 1, 4, 4, 0})     // agent, exec sleep, signal
	f.Add([]byte{6, 2, 0, 5, 'h', 'e', 'l', 'l', 'o', 3, 0, 5, 2, 1, 0, 0, 6}) // direct-tcpip, forward
	f.Add([]byte{0, 0, 1, 1, 3, 1, 1, 5, 1, 0, 3, 1, 1, 8, 5, 0, 0})           // sessions, exec head, exit
	f.Add([]byte{0, 1, 0, 4, 1, 4, 's', 'f', 't', 'p', 1, 0, 0, 1, 9})         // subsystem, env
	f.Fuzz(func(t *testing.T, prog []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		srv, err := NewServer(&ServerConfig{
			HostKey:          hostKey,
			TrustedUserCAs:   []ssh.PublicKey{ca.PublicKey()},
			Principal:        "h1",
			Logger:           slog.New(slog.DiscardHandler),
			SFTPReuseBuffers: true,
			AgentForwarding:  true,
			Dir:              t.TempDir(), // the agent's is its user's home: not one a fuzzer's commands should write to
		})
		if err != nil {
			t.Fatal(err)
		}
		cside, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		sside, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan error, 1)
		go func() { served <- srv.ServeConn(ctx, sside) }()
		closed := make(chan struct{})
		go func() {
			defer close(closed)
			<-served
			_ = srv.Close()
		}()
		defer func() {
			_ = cside.Close()
			select {
			case <-closed:
			case <-ctx.Done():
				t.Fatal("the server's connection, or its Close, still running 30 s after its client left")
			}
		}()
		conn, chans, reqs, err := ssh.NewClientConn(cside, "h1", &ssh.ClientConfig{
			User:            "anyone",
			Auth:            []ssh.AuthMethod{ssh.PublicKeys(certSigner)},
			HostKeyCallback: ssh.FixedHostKey(hostKey.PublicKey()),
		})
		if err != nil {
			t.Fatalf("handshake: %v", err)
		}
		var wg sync.WaitGroup
		defer wg.Wait()
		defer conn.Close()
		wg.Add(2)
		go func() { defer wg.Done(); ssh.DiscardRequests(reqs) }()
		go func() {
			defer wg.Done()
			for nc := range chans { // forwarded-tcpip, auth-agent@openssh.com
				_ = nc.Reject(ssh.Prohibited, "not in this test")
			}
		}()
		var opened []ssh.Channel
		drain := func(ch ssh.Channel, in <-chan *ssh.Request) {
			opened = append(opened, ch)
			wg.Add(3)
			go func() { defer wg.Done(); ssh.DiscardRequests(in) }()
			go func() { defer wg.Done(); _, _ = io.Copy(io.Discard, ch) }()
			go func() { defer wg.Done(); _, _ = io.Copy(io.Discard, ch.Stderr()) }()
		}
		next := func() byte {
			if len(prog) == 0 {
				return 0
			}
			b := prog[0]
			prog = prog[1:]
			return b
		}
		bytesOf := func() []byte {
			n := min(int(next()), len(prog))
			b := prog[:n]
			prog = prog[n:]
			return b
		}
		channel := func() ssh.Channel {
			i := int(next())
			if len(opened) == 0 {
				return nil
			}
			return opened[i%len(opened)]
		}
		for len(prog) > 0 {
			switch next() % 7 {
			case 0:
				ch, in, err := conn.OpenChannel("session", nil)
				if err == nil {
					drain(ch, in)
				}
			case 1:
				ch := channel()
				typ := connFuzzRequests[int(next())%len(connFuzzRequests)]
				reply := next()&1 == 1
				payload := bytesOf()
				switch typ {
				case "exec":
					var c byte
					if len(payload) > 0 {
						c = payload[0]
					}
					payload = ssh.Marshal(struct{ Command string }{connFuzzCommands[int(c)%len(connFuzzCommands)]})
				case "subsystem":
					if m, err := parseSubsystem(payload); err == nil && m == "sftp" {
						payload = ssh.Marshal(struct{ Name string }{"sftp-not"})
					}
				}
				if ch != nil {
					if _, err := ch.SendRequest(typ, reply, payload); errors.Is(err, io.EOF) {
						continue
					}
				}
			case 2:
				if ch, b := channel(), bytesOf(); ch != nil {
					_, _ = ch.Write(b)
				}
			case 3:
				if ch := channel(); ch != nil {
					_ = ch.CloseWrite()
				}
			case 4:
				if ch := channel(); ch != nil {
					_ = ch.Close()
				}
			case 5:
				typ := connFuzzGlobal[int(next())%len(connFuzzGlobal)]
				payload := bytesOf()
				switch typ {
				case "tcpip-forward", "cancel-tcpip-forward":
					// Loopback, a port the kernel picks: the input's
					// addresses and ports are FuzzTCPIPForward's.
					payload = ssh.Marshal(tcpipForwardMsg{"127.0.0.1", 0})
				case "streamlocal-forward@openssh.com":
					payload = ssh.Marshal(struct{ Path string }{t.TempDir() + "/s"})
				}
				_, _, _ = conn.SendRequest(typ, next()&1 == 1, payload)
			case 6:
				h, p, _ := net.SplitHostPort(echo)
				var port uint32
				for _, c := range p {
					port = port*10 + uint32(c-'0')
				}
				ch, in, err := conn.OpenChannel("direct-tcpip", ssh.Marshal(directTCPIPMsg{h, port, "127.0.0.1", 1}))
				if err == nil {
					drain(ch, in)
				}
			}
		}
	})
}
