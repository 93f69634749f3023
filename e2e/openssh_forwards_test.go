package e2e

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/sshdtest"
	"github.com/hostgate/hostgate/internal/testenv"
)

// TestOpenSSHForwardsThroughGateway: what README step 4 says OpenSSH's
// forwards do through `gateway proxy`, as they do against sshd (checked
// side by side with Debian's sshd): `ssh -J` through the host to another
// sshd (a stdio forward, `-W`, on the hop); `-D` (SOCKS5, on a Unix
// socket); and on a ControlMaster, `-O forward` of `-R 0`, whose port the
// host picks and ssh prints, and of a Unix-socket `-L`, each of which
// `-O cancel` ends. None of these had a test through the gateway.
func TestOpenSSHForwardsThroughGateway(t *testing.T) {
	testenv.RequirePeer(t, "OpenSSH ssh", lookPath("ssh"))
	g := startGateway(t, "")
	g.startAgent("alpha", "")
	ctx := testCtx(t, 2*time.Minute)
	dir := t.TempDir()
	cfg := sshConfig(t, g, "alpha", dir)
	target := sshdtest.Start(t, sshdtest.Options{LogLevel: "INFO"})
	_, port, err := net.SplitHostPort(target.Addr())
	must(t, err)
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = fmt.Fprintf(f, "Host target\n  HostName 127.0.0.1\n  Port %s\n  IdentityFile %s\n  UserKnownHostsFile %s\n  StrictHostKeyChecking yes\n  BatchMode yes\n",
		port, target.UserKeyFile, target.KnownHosts)
	must(t, err)
	must(t, f.Close())
	ssh := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "ssh", append([]string{"-F", cfg}, args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if err != nil {
			return stdout.String(), fmt.Errorf("ssh %q: %w\n%s", args, err, stderr.String())
		}
		return stdout.String(), nil
	}

	// -J: the hop's sshd sees the connection come from the host.
	out, err := ssh("-J", "alpha", "target", "echo jumped from $SSH_CLIENT")
	if err != nil || !strings.HasPrefix(out, "jumped from 127.0.0.1 ") {
		t.Fatalf("ssh -J alpha target: %q %v", out, err)
	}

	ctl := filepath.Join(dir, "ctl")
	if _, err := ssh("-M", "-S", ctl, "-o", "ControlPersist=yes", "-f", "-N", "alpha"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = ssh("-S", ctl, "-O", "exit", "alpha") })
	echo := echoServer(t)
	_, echoPort, err := net.SplitHostPort(echo)
	must(t, err)
	forward := func(op string, args ...string) string {
		t.Helper()
		out, err := ssh(append([]string{"-S", ctl, "-O", op}, append(args, "alpha")...)...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	// A dynamic forward on a Unix socket (no port to pick; ssh's mux takes
	// only a port for -D, so this one is an ssh of its own): a SOCKS5
	// CONNECT by name, which the host resolves, as curl
	// --socks5-hostname.
	socks := filepath.Join(dir, "socks.sock")
	dyn := exec.CommandContext(ctx, "ssh", "-F", cfg, "-o", "ExitOnForwardFailure=yes", "-D", socks, "alpha", "cat")
	dynIn, err := dyn.StdinPipe()
	must(t, err)
	var dynOut bytes.Buffer
	dyn.Stdout, dyn.Stderr = &dynOut, &dynOut
	must(t, dyn.Start())
	waitFor(t, "ssh -D's socket", func() (string, bool) {
		_, err := os.Stat(socks)
		return "", err == nil
	})
	c, err := net.Dial("unix", socks)
	must(t, err)
	socks5Connect(t, c, "localhost", echoPort)
	echoThroughConn(t, c, "through -D\n")
	_ = dynIn.Close()
	if err := dyn.Wait(); err != nil {
		t.Fatalf("ssh -D: %v\n%s", err, dynOut.String())
	}

	// -R 0: the host picks the port, and ssh prints it. Its target greets
	// each connection with a word of its own, so a connection that
	// reached something else on the same port number (another test's
	// server) is not taken for the forward.
	const greeting = "forwarded by -R 0\n"
	greets := greeter(t, greeting)
	spec := "0:" + greets
	printed := strings.TrimSpace(forward("forward", "-R", spec))
	if !regexp.MustCompile(`^[0-9]+$`).MatchString(printed) || printed == "0" {
		t.Fatalf("-O forward -R %s printed %q, want the port the host took", spec, printed)
	}
	// The agent runs on this machine: its port is a local one.
	at := net.JoinHostPort("127.0.0.1", printed)
	if got, err := greetingAt(at, greeting); got != greeting {
		t.Fatalf("-O forward -R %s: port %s answered %q (%v), want %q", spec, printed, got, err, greeting)
	}
	// ssh -O cancel answers once the master has sent cancel-tcpip-forward,
	// which asks for no reply (OpenSSH's channel_request_rforward_cancel):
	// the host closes its listener a moment later.
	forward("cancel", "-R", spec)
	waitFor(t, "-O cancel -R "+spec+" to close port "+printed, func() (string, bool) {
		got, _ := greetingAt(at, greeting)
		return "", got != greeting
	})

	// A Unix-socket -L to the echo server.
	lsock := filepath.Join(dir, "l.sock")
	forward("forward", "-L", lsock+":"+echo)
	c, err = net.Dial("unix", lsock)
	must(t, err)
	echoThroughConn(t, c, "through -L\n")
	forward("cancel", "-L", lsock+":"+echo)
	if c, err := net.Dial("unix", lsock); err == nil {
		c.Close()
		t.Error("-O cancel -L left the socket answering")
	}
}

// greeter listens on loopback and writes greeting to each connection,
// then closes it; it returns the address.
func greeter(t testing.TB, greeting string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(greeting))
			_ = c.Close()
		}
	}()
	return ln.Addr().String()
}

// greetingAt dials addr and returns what it says, up to len(want) bytes.
func greetingAt(addr, want string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(io.LimitReader(c, int64(len(want))))
	return string(got), err
}

// socks5Connect asks the SOCKS5 server on c, without authentication, to
// connect to host (a name) and port, and fails t unless it succeeds.
func socks5Connect(t testing.TB, c net.Conn, host, port string) {
	t.Helper()
	p, err := strconv.Atoi(port)
	must(t, err)
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	defer func() { _ = c.SetDeadline(time.Time{}) }()
	req := []byte{5, 1, 0, 5, 1, 0, 3, byte(len(host))}
	req = append(req, host...)
	req = binary.BigEndian.AppendUint16(req, uint16(p))
	_, err = c.Write(req)
	must(t, err)
	// The method choice, then the reply to CONNECT with an IPv4 address.
	ans := make([]byte, 2+10)
	if _, err := io.ReadFull(c, ans); err != nil || !bytes.Equal(ans[:2], []byte{5, 0}) || ans[3] != 0 {
		t.Fatalf("SOCKS5 CONNECT %s:%s: answer % x, %v", host, port, ans, err)
	}
}

// echoThroughConn writes msg to c, which leads to an echo server, reads it
// back and closes c.
func echoThroughConn(t testing.TB, c net.Conn, msg string) {
	t.Helper()
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	_, err := c.Write([]byte(msg))
	must(t, err)
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != msg {
		t.Fatalf("echo through %s: %q %v", c.RemoteAddr(), buf, err)
	}
}
