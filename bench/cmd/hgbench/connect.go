package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/bench"
	"github.com/hostgate/hostgate/client"
)

// connectKex is the key exchange every ssh of the connect rows is pinned
// to, to sshd as to the agent: OpenSSH 9.x offers a post-quantum hybrid
// first (sntrup761x25519-sha512), which sshd takes and the agent does not
// offer, and which costs ssh several times a curve25519 exchange's CPU.
const connectKex = "curve25519-sha256"

// connect times a new connection to its first command, `true`: what a
// program pays to reach a host it holds no connection to, and what
// `ssh HOST true` takes where no ControlMaster is kept. hostgate's sides:
// the Go client from nothing (client.Dial with a new Client: the host's
// record, a certificate, the WebSocket or TCP dial, the SSH handshake),
// through the relay and over a direct session; OpenSSH's ssh with
// `gateway proxy` as its ProxyCommand through the relay, and with
// --fdpass over a direct session. The peer: ssh straight to sshd, a
// connection of its own. Every connection is closed before the next.
func (e *env) connect(ctx context.Context) ([]*bench.Scenario, error) {
	const peer = "OpenSSH ssh → sshd, a new connection"
	n := e.cfg.connectN
	note := fmt.Sprintf("%d connections per side per pair, each closed before the next; every ssh with %s and %s, as a user whose login shell is /bin/sh", n, connectKex, Cipher)
	goRelay := &bench.Scenario{Name: "new connection to first command, Go client, p50", Unit: "ms", PeerName: peer, Better: bench.Lower,
		Note: "client.Dial with a new Client each time (the host's record and a certificate from the gateway, the WebSocket, the SSH handshake) and Exec of true, through the relay; " + note}
	goDirect := &bench.Scenario{Name: "new connection to first command, Go client, direct session, p50", Unit: "ms", PeerName: peer, Better: bench.Lower,
		Note: "the same, the client straight to the agent's --direct listener after the gateway's answer"}
	proxied := &bench.Scenario{Name: "new connection to first command, OpenSSH ssh through gateway proxy, p50", Unit: "ms", PeerName: peer, Better: bench.Lower,
		Note: "ssh HOST true with `gateway proxy` as its ProxyCommand, through the relay: both processes started per connection, as sshd starts its own"}
	fdpass := &bench.Scenario{Name: "new connection to first command, OpenSSH ssh through gateway proxy --fdpass, direct session, p50", Unit: "ms", PeerName: peer, Better: bench.Lower,
		Note: "the same with ProxyUseFdpass: the proxy hands ssh the agent's socket and exits"}

	pc, err := e.proxyClient(ctx, "connect")
	if err != nil {
		return nil, err
	}
	sshVia := func(relayOnly, fdpassOn bool) func() error {
		return func() error {
			cmd := pc.command(ctx, e.cfg.gatewayBin, e.gw, relayOnly, fdpassOn, []string{"-o", "KexAlgorithms=" + connectKex}, "true")
			return runSaying(cmd, !relayOnly)
		}
	}
	peerSide := func() error {
		args := append(e.sshd.argsTo(e.sshd.port(), Cipher), "-o", "KexAlgorithms="+connectKex, "127.0.0.1", "true")
		if out, err := exec.CommandContext(ctx, "ssh", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ssh to sshd: %w: %s", err, out)
		}
		return nil
	}
	goSide := func(relayOnly bool) func() error {
		return func() error {
			c, err := client.New(e.gw.url, e.gw.admin, &client.Options{RelayOnly: relayOnly})
			if err != nil {
				return err
			}
			defer c.CloseIdleConnections()
			h, err := c.Dial(ctx, benchHostID)
			if err != nil {
				return err
			}
			defer h.Close()
			if _, err := h.Exec(ctx, []string{"true"}, hostgate.ExecOptions{}); err != nil {
				return err
			}
			// The row is about the path it names: a direct row that fell
			// back to the relay, or the other way round, measured the other.
			addr, _ := c.DirectPath(benchHostID)
			if relayOnly != (addr == "") {
				return fmt.Errorf("the client's path: direct address %q, want relay only %v", addr, relayOnly)
			}
			return nil
		}
	}
	for i := range e.cfg.pairs {
		var gr, gd, pr, fd, b []float64
		err := bench.Alternate(i, func() (err error) {
			if gr, err = samples(n, goSide(true)); err != nil {
				return fmt.Errorf("the Go client through the relay: %w", err)
			}
			return nil
		}, func() (err error) {
			if gd, err = samples(n, goSide(false)); err != nil {
				return fmt.Errorf("the Go client over a direct session: %w", err)
			}
			return nil
		}, func() (err error) {
			if pr, err = samples(n, sshVia(true, false)); err != nil {
				return fmt.Errorf("ssh through gateway proxy: %w", err)
			}
			return nil
		}, func() (err error) {
			if fd, err = samples(n, sshVia(false, true)); err != nil {
				return fmt.Errorf("ssh through gateway proxy --fdpass: %w", err)
			}
			return nil
		}, func() (err error) {
			b, err = samples(n, peerSide)
			return err
		})
		if err != nil {
			return nil, err
		}
		p50 := bench.Percentile(b, 50)
		goRelay.Add(bench.Percentile(gr, 50), p50)
		goDirect.Add(bench.Percentile(gd, 50), p50)
		proxied.Add(bench.Percentile(pr, 50), p50)
		fdpass.Add(bench.Percentile(fd, 50), p50)
	}
	return []*bench.Scenario{goRelay, goDirect, proxied, fdpass}, nil
}

// runSaying runs ssh through gateway proxy --verbose and checks the path
// the proxy said it took: a direct session where direct, else the relay.
func runSaying(cmd *exec.Cmd, direct bool) error {
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	if said := proxyDirectRE.Match(out); said != direct {
		return fmt.Errorf("gateway proxy took a direct session: %v, want %v; it said: %s", said, direct, bytes.TrimSpace(out))
	}
	return nil
}

// terminal times a terminal opened to its first prompt: the browser's
// path, a WebSocket to GET /v1/hosts/{id}/pty with the gateway as the SSH
// client on the connection it keeps to the agent, against `ssh -tt`
// through the ControlMaster to sshd, whose connection is kept as the
// gateway's is. Both run the user's login shell (sh -l reading
// /etc/profile); a side's time ends when the prompt has come, and each
// shell is told to exit, untimed, before the next opens.
func (e *env) terminal(ctx context.Context) ([]*bench.Scenario, error) {
	s := &bench.Scenario{Name: "terminal opened to its first prompt, p50", Unit: "ms", PeerName: "OpenSSH ssh -tt (ControlMaster)", Better: bench.Lower,
		Note: fmt.Sprintf("the browser terminal's WebSocket (GET /v1/hosts/{id}/pty, its opening included) until the login shell's prompt; %d per side per pair, as a user whose login shell is /bin/sh on both sides", e.cfg.connectN)}
	wsURL := "ws" + strings.TrimPrefix(e.gw.url, "http") + "/v1/hosts/" + benchHostID + "/pty"
	ours := func() (time.Duration, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		start := time.Now()
		c, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + e.gw.admin}}})
		if err != nil {
			return 0, err
		}
		defer c.CloseNow()
		var out []byte
		for !bytes.HasSuffix(out, shellPrompt) {
			typ, b, err := c.Read(ctx)
			if err != nil {
				return 0, fmt.Errorf("before the prompt (%q so far): %w", out, err)
			}
			if typ == websocket.MessageBinary {
				out = append(out, b...)
			} else if bytes.Contains(b, []byte(`"error"`)) {
				return 0, fmt.Errorf("the gateway: %s", b)
			}
		}
		took := time.Since(start)
		if err := c.Write(ctx, websocket.MessageBinary, []byte("exit\n")); err != nil {
			return 0, err
		}
		for {
			typ, b, err := c.Read(ctx)
			if err != nil {
				return 0, fmt.Errorf("waiting for the shell's exit: %w", err)
			}
			if typ == websocket.MessageText && bytes.Contains(b, []byte(`"exit"`)) {
				return took, c.Close(websocket.StatusNormalClosure, "")
			}
		}
	}
	// The gateway connects to the bench host on the first terminal: not in
	// a timed pair.
	if _, err := ours(); err != nil {
		return nil, fmt.Errorf("hostgate terminal: %w", err)
	}
	peer := func() (time.Duration, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		start := time.Now()
		cmd := e.sshd.Command(ctx, []string{"-tt"})
		in, err := cmd.StdinPipe()
		if err != nil {
			return 0, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return 0, err
		}
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		var out []byte
		buf := make([]byte, 4096)
		for !bytes.HasSuffix(out, shellPrompt) {
			n, err := stdout.Read(buf)
			out = append(out, buf[:n]...)
			if err != nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				return 0, fmt.Errorf("ssh -tt before the prompt (%q so far): %w", out, err)
			}
		}
		took := time.Since(start)
		if _, err := in.Write([]byte("exit\n")); err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, stdout)
		return took, cmd.Wait()
	}
	for i := range e.cfg.pairs {
		var a, b []float64
		err := bench.Alternate(i, func() (err error) {
			if a, err = timedSamples(e.cfg.connectN, ours); err != nil {
				return fmt.Errorf("hostgate terminal: %w", err)
			}
			return nil
		}, func() (err error) {
			if b, err = timedSamples(e.cfg.connectN, peer); err != nil {
				return fmt.Errorf("ssh -tt: %w", err)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		s.Add(bench.Percentile(a, 50), bench.Percentile(b, 50))
	}
	return []*bench.Scenario{s}, nil
}

// shellPrompt is what a login shell of the bench user prints when it
// waits for a command: dash's prompt, as Debian's /etc/profile leaves it
// for a user other than root.
var shellPrompt = []byte("$ ")
