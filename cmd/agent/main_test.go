package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
	"go.uber.org/goleak"

	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/testenv"
	"github.com/hostgate/hostgate/sshlayer"
)

// These tests run the real agent binary, built once, against OpenSSH and
// the x/crypto client.

const wait = 30 * time.Second

var (
	binDir    string
	buildOnce sync.Once
	buildErr  error
)

func TestMain(m *testing.M) {
	var err error
	binDir, err = os.MkdirTemp("", "hostgate-agent-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(binDir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// agentBin builds the agent binary (once per test run).
func agentBin(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(binDir, "agent")
	buildOnce.Do(func() {
		out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return bin
}

type keyPair struct {
	signer ssh.Signer
	pem    []byte
}

func newKey(t *testing.T) keyPair {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return keyPair{s, pem.EncodeToMemory(block)}
}

func writeFile(t *testing.T, path string, data []byte) string {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func needOpenSSH(t *testing.T) {
	t.Helper()
	_, err := exec.LookPath("ssh")
	testenv.RequirePeer(t, "OpenSSH ssh", err == nil)
}

// sshArgs are the options OpenSSH gets: our pinned host key only, no
// prompts, no user config.
func sshArgs(knownHosts, key string) []string {
	return []string{"-F", "/dev/null", "-o", "UserKnownHostsFile=" + knownHosts, "-o", "GlobalKnownHostsFile=/dev/null",
		"-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none", "-i", key}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*wait)
	t.Cleanup(cancel)
	return ctx
}

// servedAgent is `agent serve --listen` on loopback, with what OpenSSH
// needs to reach it.
type servedAgent struct {
	cmd             *exec.Cmd
	dir, work       string // the test's files; the agent's working and home dir
	key, knownHosts string
	host, port      string
	ssh             func(args ...string) *exec.Cmd // ssh to it, args after the host
}

// startServeListen starts `agent serve --listen 127.0.0.1:0` with env added
// to the test's, and waits for its address.
func startServeListen(t *testing.T, env []string) *servedAgent {
	t.Helper()
	needOpenSSH(t)
	bin := agentBin(t)
	a := &servedAgent{dir: t.TempDir(), work: t.TempDir()}
	user := newKey(t)
	a.key = writeFile(t, filepath.Join(a.dir, "id"), user.pem)
	authKeys := writeFile(t, filepath.Join(a.dir, "authorized_keys"), ssh.MarshalAuthorizedKey(user.signer.PublicKey()))
	state := filepath.Join(a.dir, "state")

	a.cmd = exec.CommandContext(testCtx(t), bin, "serve", "--listen", "127.0.0.1:0", "--authorized-keys", authKeys, "--state-dir", state)
	a.cmd.Dir = a.work
	a.cmd.Env = append(append(os.Environ(), "HOME="+a.work), env...) // commands and SFTP start in the home dir
	stderr, err := a.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.cmd.Process.Kill(); _ = a.cmd.Wait() })
	logs := bufio.NewReader(stderr)
	var addr string
	for addr == "" {
		line, err := logs.ReadString('\n')
		if err != nil {
			t.Fatalf("agent exited before listening: %v", err)
		}
		if _, after, ok := strings.Cut(line, "listen="); ok {
			addr = strings.TrimSpace(after)
		}
	}
	go func() { _, _ = io.Copy(io.Discard, logs) }() // keep the agent's stderr flowing
	hk, err := sshlayer.LoadOrCreateHostKey(filepath.Join(state, "host_key"))
	if err != nil {
		t.Fatal(err)
	}
	a.host, a.port, _ = strings.Cut(addr, ":")
	a.knownHosts = writeFile(t, filepath.Join(a.dir, "known_hosts"), fmt.Appendf(nil, "[%s]:%s %s", a.host, a.port, ssh.MarshalAuthorizedKey(hk.PublicKey())))
	a.ssh = func(args ...string) *exec.Cmd {
		all := append(sshArgs(a.knownHosts, a.key), "-p", a.port, "-l", "anyone", a.host)
		return exec.CommandContext(testCtx(t), "ssh", append(all, args...)...)
	}
	return a
}

// TestServeListenWithOpenSSH runs `agent serve --listen` and uses it with
// ssh and sftp; SIGTERM then stops the agent cleanly, taking a running
// remote command's process group with it.
func TestServeListenWithOpenSSH(t *testing.T) {
	a := startServeListen(t, nil)
	agent, dir, work, ssh, kh, keyFile, host, port := a.cmd, a.dir, a.work, a.ssh, a.knownHosts, a.key, a.host, a.port

	out, err := ssh("echo hello; exit 3").Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || string(out) != "hello\n" {
		t.Fatalf("ssh: %q %v, want hello and exit 3", out, err)
	}
	if out, err := ssh("-tt", "tty").CombinedOutput(); err != nil || !bytes.Contains(out, []byte("/dev/pts/")) {
		t.Fatalf("ssh -tt tty: %q %v", out, err)
	}
	_, err = exec.LookPath("sftp")
	testenv.RequirePeer(t, "OpenSSH sftp", err == nil)
	{
		data := make([]byte, 1<<20)
		_, _ = rand.Read(data)
		src := writeFile(t, filepath.Join(dir, "src"), data)
		batch := writeFile(t, filepath.Join(dir, "batch"), fmt.Appendf(nil, "put %s up\nget up %s\n", src, filepath.Join(dir, "back")))
		a := append(sshArgs(kh, keyFile), "-P", port, "-b", batch, "anyone@"+host)
		if out, err := exec.CommandContext(testCtx(t), "sftp", a...).CombinedOutput(); err != nil {
			t.Fatalf("sftp: %v\n%s", err, out)
		}
		sa := append(sshArgs(kh, keyFile), "-P", port, src, "anyone@"+host+":scp.bin")
		if out, err := exec.CommandContext(testCtx(t), "scp", sa...).CombinedOutput(); err != nil {
			t.Fatalf("scp: %v\n%s", err, out)
		}
		for _, p := range []string{filepath.Join(work, "up"), filepath.Join(dir, "back"), filepath.Join(work, "scp.bin")} {
			if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("%s: %d bytes %v, want the 1 MiB sent", p, len(got), err)
			}
		}
	}

	// ssh -L (to a Unix socket here: no port to race for) and ssh -R.
	echo := startEcho(t)
	sock := filepath.Join(dir, "l.sock")
	fwd := ssh("-o", "ExitOnForwardFailure=yes", "-L", sock+":"+echo, "-R", "0:"+echo, "echo ready; exec sleep 300")
	fwdOut, err := fwd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	fwdErr, err := fwd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := fwd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = fwd.Process.Kill(); _ = fwd.Wait() }()
	if line, err := bufio.NewReader(fwdOut).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("ssh -L -R: %q %v", line, err)
	}
	echoThrough(t, "unix", sock)
	errs := bufio.NewReader(fwdErr)
	for {
		line, err := errs.ReadString('\n')
		if err != nil {
			t.Fatalf("ssh -R: no allocated port reported: %v", err)
		}
		if _, after, ok := strings.Cut(line, "Allocated port "); ok {
			rport, _, _ := strings.Cut(after, " ")
			echoThrough(t, "tcp", "127.0.0.1:"+rport)
			break
		}
	}

	// A running command, then SIGTERM to the agent.
	long := ssh(`trap '' HUP; sleep 300 & echo $$ $!; wait`)
	lout, err := long.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := long.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = long.Process.Kill(); _ = long.Wait() }()
	var leader, grandchild int
	line, err := bufio.NewReader(lout).ReadString('\n')
	if _, serr := fmt.Sscan(line, &leader, &grandchild); err != nil || serr != nil {
		t.Fatalf("pids %q: %v %v", line, err, serr)
	}
	if err := agent.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := agent.Wait(); err != nil {
		t.Fatalf("agent after SIGTERM: %v, want a clean exit", err)
	}
	testenv.WaitGone(t, leader, wait)
	testenv.WaitGone(t, grandchild, wait)
}

// TestServeStdioAsProxyCommand: OpenSSH runs `agent serve --stdio` as its
// ProxyCommand, once with an authorized key and then with a certificate
// from a CA given inline (--trusted-ca-key, as containers get it) or in a
// file (--trusted-ca).
func TestServeStdioAsProxyCommand(t *testing.T) {
	needOpenSSH(t)
	bin := agentBin(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	hk, err := sshlayer.LoadOrCreateHostKey(filepath.Join(state, "host_key"))
	if err != nil {
		t.Fatal(err)
	}
	kh := writeFile(t, filepath.Join(dir, "known_hosts"), fmt.Appendf(nil, "agent-host %s", ssh.MarshalAuthorizedKey(hk.PublicKey())))
	user := newKey(t)
	keyFile := writeFile(t, filepath.Join(dir, "id"), user.pem)
	authKeys := writeFile(t, filepath.Join(dir, "authorized_keys"), ssh.MarshalAuthorizedKey(user.signer.PublicKey()))

	proxy := fmt.Sprintf("%s serve --stdio --authorized-keys %s --state-dir %s", bin, authKeys, state)
	a := append(sshArgs(kh, keyFile), "-o", "ProxyCommand="+proxy, "agent-host", "echo via-proxy; exit 4")
	out, err := exec.CommandContext(testCtx(t), "ssh", a...).Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 4 || string(out) != "via-proxy\n" {
		t.Fatalf("ssh via ProxyCommand: %q %v, want via-proxy and exit 4", out, err)
	}

	ca := newKey(t)
	cert := &ssh.Certificate{Key: user.signer.PublicKey(), CertType: ssh.UserCert, KeyId: "t",
		ValidPrincipals: []string{"host-7"}, ValidAfter: uint64(time.Now().Add(-time.Minute).Unix()),
		ValidBefore: uint64(time.Now().Add(time.Hour).Unix())}
	if err := cert.SignCert(rand.Reader, ca.signer); err != nil {
		t.Fatal(err)
	}
	certFile := writeFile(t, filepath.Join(dir, "id-cert.pub"), ssh.MarshalAuthorizedKey(cert))
	caLine := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(ca.signer.PublicKey())))
	caFile := writeFile(t, filepath.Join(dir, "ca.pub"), []byte(caLine+"\n"))
	for _, tc := range []struct {
		hostID string
		file   bool // --trusted-ca FILE, as an operator's `agent serve` takes it
		ok     bool
	}{{"host-7", false, true}, {"host-8", false, false}, {"host-7", true, true}, {"host-8", true, false}} {
		// The CA key travels in the environment, as HOSTGATE_TRUSTED_CA_KEY,
		// or in a file.
		proxy := fmt.Sprintf("env HOSTGATE_TRUSTED_CA_KEY='%s' %s serve --stdio --host-id %s --state-dir %s", caLine, bin, tc.hostID, state)
		if tc.file {
			proxy = fmt.Sprintf("%s serve --stdio --trusted-ca %s --host-id %s --state-dir %s", bin, caFile, tc.hostID, state)
		}
		a := append(sshArgs(kh, keyFile), "-o", "CertificateFile="+certFile, "-o", "ProxyCommand="+proxy, "agent-host", "echo cert-ok")
		out, err := exec.CommandContext(testCtx(t), "ssh", a...).Output()
		if got := err == nil && string(out) == "cert-ok\n"; got != tc.ok {
			t.Errorf("host id %s, CA in a file %v: ok=%v (%q %v), want ok=%v", tc.hostID, tc.file, got, out, err, tc.ok)
		}
	}
}

// muxAgent is `agent serve --stdio --mux` run by a test, trusting user's
// key; the test holds its stdio.
type muxAgent struct {
	cmd     *exec.Cmd
	in      io.WriteCloser
	out     io.ReadCloser
	logs    *bytes.Buffer
	user    keyPair
	hostKey ssh.PublicKey
}

// startMuxAgent starts the agent with its state in dir/state and extra as
// its inherited descriptors 3 and on; it is killed when the test ends.
func startMuxAgent(t *testing.T, dir string, user keyPair, extra ...*os.File) *muxAgent {
	t.Helper()
	state := filepath.Join(dir, "state")
	hk, err := sshlayer.LoadOrCreateHostKey(filepath.Join(state, "host_key"))
	if err != nil {
		t.Fatal(err)
	}
	authKeys := writeFile(t, filepath.Join(dir, "authorized_keys"), ssh.MarshalAuthorizedKey(user.signer.PublicKey()))
	a := &muxAgent{logs: new(bytes.Buffer), user: user, hostKey: hk.PublicKey()}
	a.cmd = exec.CommandContext(testCtx(t), agentBin(t), "serve", "--stdio", "--mux", "--authorized-keys", authKeys, "--state-dir", state)
	a.cmd.Stderr = a.logs
	a.cmd.ExtraFiles = extra // the agent's fds 3 and on
	if a.in, err = a.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if a.out, err = a.cmd.StdoutPipe(); err != nil {
		t.Fatal(err)
	}
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.cmd.Process.Kill(); _ = a.cmd.Wait() })
	return a
}

// dialSSH opens a stream of sess, the agent's tunnel, and connects over it
// as the user.
func (a *muxAgent) dialSSH(sess *bytestream.MuxSession) (*ssh.Client, error) {
	st, err := sess.OpenStream()
	if err != nil {
		return nil, err
	}
	c, chans, reqs, err := ssh.NewClientConn(st, "agent", &ssh.ClientConfig{User: "u",
		Auth: []ssh.AuthMethod{ssh.PublicKeys(a.user.signer)}, HostKeyCallback: ssh.FixedHostKey(a.hostKey), Timeout: wait})
	if err != nil {
		return nil, err
	}
	return ssh.NewClient(c, chans, reqs), nil
}

// TestServeStdioMux: `agent serve --stdio --mux` carries yamux over its
// stdio; every stream opened is one SSH connection. Closing the tunnel
// ends the agent cleanly.
func TestServeStdioMux(t *testing.T) {
	agent := startMuxAgent(t, t.TempDir(), newKey(t))
	sess, err := bytestream.MuxClient(bytestream.NewPipeConn(agent.out, agent.in), nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := agent.dialSSH(sess)
			if err != nil {
				t.Error(err)
				return
			}
			defer func() { _ = cl.Close() }()
			s, err := cl.NewSession()
			if err != nil {
				t.Error(err)
				return
			}
			defer func() { _ = s.Close() }()
			if got, err := s.Output(fmt.Sprintf("echo mux-%d", i)); err != nil || string(got) != fmt.Sprintf("mux-%d\n", i) {
				t.Errorf("stream %d: %q %v", i, got, err)
			}
		}()
	}
	wg.Wait()
	_ = sess.Close()
	if err := agent.cmd.Wait(); err != nil {
		t.Fatalf("agent after the tunnel closed: %v\n%s", err, agent.logs.String())
	}
}

// TestServeStdioReservesThreads: a stdio agent (a sandbox's) makes its
// threads before it serves, so that commands that take every pid a
// sandbox's pids limit leaves cannot take the thread the Go runtime needs
// next: a thread it cannot create is fatal (newosproc), and e2e
// TestSandboxPidsLimitKeepsAgent lost the agent 1 run in 24 on a loaded
// machine. 10 is internal/agent's stdioThreads.
func TestServeStdioReservesThreads(t *testing.T) {
	agent := startMuxAgent(t, t.TempDir(), newKey(t))
	sess, err := bytestream.MuxClient(bytestream.NewPipeConn(agent.out, agent.in), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	cl, err := agent.dialSSH(sess) // served: the reserve came first
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", agent.cmd.Process.Pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	var threads int
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			threads, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	if threads < 10 {
		t.Fatalf("a serving stdio agent holds %d threads, want at least 10 made before any command", threads)
	}
}

func TestUsage(t *testing.T) {
	var b bytes.Buffer
	if code := run(nil, io.Discard, &b); code != 2 || !strings.Contains(b.String(), "serve") {
		t.Errorf("no args: code %d, output %q", code, b.String())
	}
	b.Reset()
	if code := run([]string{"frobnicate"}, io.Discard, &b); code != 2 || !strings.Contains(b.String(), "unknown command") {
		t.Errorf("unknown command: code %d, output %q", code, b.String())
	}
	// Help asked for goes to stdout alone, as the gateway's does, so that
	// it pages and greps: it went to stderr.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--help"}, "connect"},
		{[]string{"serve", "-h"}, "-authorized-keys"},
		{[]string{"connect", "--help"}, "HOSTGATE_TOKEN"},
	} {
		var out, errb bytes.Buffer
		if code := run(tc.args, &out, &errb); code != 0 || !strings.Contains(out.String(), tc.want) || errb.Len() != 0 {
			t.Errorf("agent %v: code %d, stdout %q, stderr %q; want 0 and help on stdout alone", tc.args, code, out.String(), errb.String())
		}
	}
	// Every command answers -h and --help with its usage on stdout, and
	// does nothing else: `agent version -h` printed the version.
	for name := range commands {
		for _, h := range []string{"-h", "--help"} {
			var out, errb bytes.Buffer
			if code := run([]string{name, h}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "usage") || errb.Len() != 0 {
				t.Errorf("agent %s %s: code %d, stdout %q, stderr %q; want 0 and its usage on stdout alone", name, h, code, out.String(), errb.String())
			}
		}
	}
	b.Reset()
	if code := run([]string{"version", "extra"}, io.Discard, &b); code != 1 || !strings.Contains(b.String(), "unexpected arguments") {
		t.Errorf("agent version extra: code %d, stderr %q; want 1 and the argument refused", code, b.String())
	}
	var out bytes.Buffer
	b.Reset()
	if code := run([]string{"connect", "--no-such-flag"}, &out, &b); code != 1 || out.Len() != 0 || !strings.Contains(b.String(), "no-such-flag") {
		t.Errorf("agent connect --no-such-flag: code %d, stdout %q, stderr %q; want 1 and the error on stderr alone", code, out.String(), b.String())
	}
	// An error names its command once.
	for _, args := range [][]string{{"connect"}, {"serve", "--stdio"}} {
		b.Reset()
		if code := run(args, io.Discard, &b); code != 1 || strings.Count(b.String(), "agent "+args[0]+":") != 1 {
			t.Errorf("agent %v: code %d, output %q; want 1 and the command named once", args, code, b.String())
		}
	}
}

// startEcho runs a loopback TCP echo server until the test ends.
func startEcho(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// echoThrough sends random bytes to addr and expects them back.
func echoThrough(t *testing.T, network, addr string) {
	t.Helper()
	c, err := net.DialTimeout(network, addr, wait)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(wait))
	data := make([]byte, 256<<10)
	_, _ = rand.Read(data)
	errc := make(chan error, 1)
	go func() { _, err := c.Write(data); errc <- err }()
	got := make([]byte, len(data))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("echo through %s %s: %v", network, addr, err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("echo through %s %s: bytes differ", network, addr)
	}
}
