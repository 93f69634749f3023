package sshinterop

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"text/template"

	"go.uber.org/goleak"
	"golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/internal/testenv"
	"github.com/hostgate/hostgate/sshlayer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// OpenSSH sshd as the peer, one `sshd -i` per accepted connection (the
// socket is its stdin/stdout), as x/crypto's ssh/test does: no port is
// picked and released, so nothing races for it.

const sshdPath = "/usr/sbin/sshd"

var sshdConfig = template.Must(template.New("c").Parse(`
HostKey {{.}}/host_ed25519
AuthorizedKeysFile {{.}}/authorized_keys
StrictModes no
UsePAM no
PermitRootLogin yes
PidFile {{.}}/sshd.pid
AllowTcpForwarding yes
GatewayPorts no
PasswordAuthentication no
KbdInteractiveAuthentication no
PrintMotd no
LogLevel DEBUG1
Ciphers aes128-gcm@openssh.com
`))

type sshd struct {
	t       testing.TB
	dir     string
	hostKey string // SHA256 fingerprint
	keyFile string // the user's private key, for ssh -i
	user    *sshlayer.SessionKey
	ln      net.Listener

	wg    sync.WaitGroup
	mu    sync.Mutex
	procs map[*exec.Cmd]struct{}
}

func startSSHD(t testing.TB) *sshd {
	t.Helper()
	_, err := os.Stat(sshdPath)
	testenv.RequirePeer(t, "OpenSSH sshd", err == nil)
	if _, err := os.Stat("/run/sshd"); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s := &sshd{t: t, dir: t.TempDir(), procs: map[*exec.Cmd]struct{}{}}
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(hostPriv, "")
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(s.dir, "host_ed25519"), pem.EncodeToMemory(block))
	signer, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	s.hostKey = sshlayer.Fingerprint(signer.PublicKey())
	if s.user, err = sshlayer.GenerateSessionKey(); err != nil {
		t.Fatal(err)
	}
	s.keyFile = filepath.Join(s.dir, "id_ed25519")
	write(t, s.keyFile, s.user.PrivateKey)
	write(t, filepath.Join(s.dir, "authorized_keys"), []byte(s.user.PublicKey+"\n"))
	var cfg bytes.Buffer
	if err := sshdConfig.Execute(&cfg, s.dir); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(s.dir, "sshd_config"), cfg.Bytes())
	write(t, filepath.Join(s.dir, "known_hosts"), []byte("[127.0.0.1]:* "+string(ssh.MarshalAuthorizedKey(signer.PublicKey()))))
	if s.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	s.wg.Add(1)
	go s.serve()
	t.Cleanup(s.close)
	return s
}

func write(t testing.TB, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(name, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func (s *sshd) serve() {
	defer s.wg.Done()
	for n := 0; ; n++ {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		if err := s.spawn(c.(*net.TCPConn), n); err != nil {
			s.t.Errorf("start sshd -i: %v", err)
		}
	}
}

func (s *sshd) spawn(c *net.TCPConn, n int) error {
	defer c.Close()
	f, err := c.File()
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.Command(sshdPath, "-i", "-E", filepath.Join(s.dir, fmt.Sprintf("sshd-%d.log", n)), "-f", filepath.Join(s.dir, "sshd_config"))
	cmd.Stdin, cmd.Stdout = f, f
	if err := cmd.Start(); err != nil {
		return err
	}
	s.mu.Lock()
	s.procs[cmd] = struct{}{}
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = cmd.Wait()
		s.mu.Lock()
		delete(s.procs, cmd)
		s.mu.Unlock()
	}()
	return nil
}

func (s *sshd) close() {
	_ = s.ln.Close()
	s.mu.Lock()
	for cmd := range s.procs {
		_ = cmd.Process.Signal(os.Interrupt)
	}
	s.mu.Unlock()
	s.wg.Wait()
	if s.t.Failed() {
		logs, _ := filepath.Glob(filepath.Join(s.dir, "sshd-*.log"))
		for _, p := range logs {
			b, _ := os.ReadFile(p)
			s.t.Logf("== %s\n%s", filepath.Base(p), b)
		}
	}
}

// connect returns our SSH client to sshd, closed at cleanup.
func (s *sshd) connect(t testing.TB, ctx context.Context) *sshlayer.Client {
	t.Helper()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", s.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c, err := sshlayer.Connect(ctx, conn, sshlayer.Auth{User: "root", PrivateKey: s.user.PrivateKey, HostKey: s.hostKey})
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// sshL runs OpenSSH's `ssh -N -L` to sshd and returns the local address once
// ssh reports the forward listening (read from its -v output, no polling).
// The local port is picked by listening on :0 and closing, so ssh is retried
// when another process took the port in between.
func (s *sshd) sshL(t testing.TB, ctx context.Context, connect string) string {
	t.Helper()
	sshPath, err := exec.LookPath("ssh")
	testenv.RequirePeer(t, "OpenSSH ssh", err == nil)
	_, port, _ := net.SplitHostPort(s.ln.Addr().String())
	for attempt := 0; attempt < 5; attempt++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		local := ln.Addr().String()
		ln.Close()
		cmd := exec.Command(sshPath, "-N", "-v", "-F", "/dev/null",
			"-o", "ExitOnForwardFailure=yes", "-o", "BatchMode=yes",
			"-o", "UserKnownHostsFile="+filepath.Join(s.dir, "known_hosts"), "-o", "StrictHostKeyChecking=yes",
			"-o", "Ciphers=aes128-gcm@openssh.com",
			"-i", s.keyFile, "-p", port, "-L", local+":"+connect, "root@127.0.0.1")
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ready := make(chan bool, 1)
		readerDone := make(chan struct{})
		var logMu sync.Mutex
		var log strings.Builder
		go func() {
			defer close(readerDone)
			buf := make([]byte, 4096)
			said := false
			for {
				n, err := stderr.Read(buf)
				logMu.Lock()
				log.Write(buf[:n])
				up := strings.Contains(log.String(), "Entering interactive session")
				logMu.Unlock()
				if up && !said {
					said = true
					ready <- true
				}
				if err != nil {
					if !said {
						ready <- false
					}
					return
				}
			}
		}()
		stop := func() {
			_ = cmd.Process.Kill()
			<-readerDone // the pipe must be drained before Wait closes it
			_ = cmd.Wait()
		}
		var ok bool
		select {
		case ok = <-ready:
		case <-ctx.Done():
		}
		if ok {
			t.Cleanup(stop)
			return local
		}
		stop()
		logMu.Lock()
		out := log.String()
		logMu.Unlock()
		if !strings.Contains(out, "Address already in use") {
			t.Fatalf("ssh -L failed:\n%s", out)
		}
	}
	t.Fatal("ssh -L: no free port after 5 attempts")
	return ""
}
