package sshlayer

import (
	"bytes"
	"cmp"
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
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/internal/testenv"
)

// OpenSSH sshd as the interop peer, run the way x/crypto's ssh/test does:
// one `sshd -i` per accepted TCP connection, the socket passed as its
// stdin/stdout. No port is picked then released, so nothing can race for it.

const (
	sshdPath       = "/usr/sbin/sshd"
	sftpServerPath = "/usr/lib/openssh/sftp-server"
)

var sshdConfigTmpl = template.Must(template.New("sshd_config").Parse(`
ListenAddress 127.0.0.1
{{if .ECDSA}}HostKey {{.Dir}}/host_ecdsa
{{end}}HostKey {{.Dir}}/host_ed25519
AuthorizedKeysFile {{.Dir}}/authorized_keys
{{if .CA}}TrustedUserCAKeys {{.Dir}}/user_ca.pub
{{end}}StrictModes no
UsePAM no
PermitRootLogin yes
PidFile {{.Dir}}/sshd.pid
Subsystem sftp ` + sftpServerPath + `
AllowTcpForwarding yes
AllowStreamLocalForwarding yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PrintMotd no
PrintLastLog no
LogLevel {{.LogLevel}}
# Debian's bash sources ~/.bashrc for commands run by sshd unless it is a
# nested shell; SHLVL=1 keeps the machine's dotfiles out of every exec.
SetEnv SHLVL=1
`))

// sshdOptions tunes startSSHD.
type sshdOptions struct {
	CA ssh.PublicKey // trusted user CA, when set
	// LogLevel is sshd's; DEBUG3 when empty (tests read the log), quieter
	// for benchmarks, where per-packet logging would dominate.
	LogLevel string
	// ECDSAHostKey gives sshd a second host key, listed first, as on a
	// typical machine.
	ECDSAHostKey bool
}

type sshdServer struct {
	t       testing.TB
	dir     string
	config  string
	hostKey string // fingerprint of the host key
	hostPub ssh.PublicKey
	user    *SessionKey
	ln      net.Listener

	wg    sync.WaitGroup // accept loop and one waiter per sshd process
	mu    sync.Mutex
	procs map[*exec.Cmd]struct{} // running sshd -i processes
	logs  []string               // one log file per connection
	idle  *sync.Cond             // signalled when procs shrinks
}

// sshdAvailable reports whether OpenSSH's server and sftp-server are here.
func sshdAvailable() bool {
	for _, p := range []string{sshdPath, sftpServerPath} {
		if _, err := os.Stat(p); err != nil {
			return false
		}
	}
	return true
}

func startSSHD(t testing.TB, opts sshdOptions) *sshdServer {
	t.Helper()
	testenv.RequirePeer(t, "OpenSSH sshd", sshdAvailable())
	// sshd refuses to start without its privilege separation directory,
	// which the Debian service creates at boot and a container may lack.
	if _, err := os.Stat("/run/sshd"); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			t.Fatalf("create /run/sshd: %v", err)
		}
	}
	dir := t.TempDir()
	s := &sshdServer{t: t, dir: dir, config: filepath.Join(dir, "sshd_config"), procs: map[*exec.Cmd]struct{}{}}
	s.idle = sync.NewCond(&s.mu)

	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(hostPriv, "")
	if err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(dir, "host_ed25519"), pem.EncodeToMemory(block))
	hostSigner, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	s.hostPub = hostSigner.PublicKey()
	s.hostKey = Fingerprint(s.hostPub)
	writeTestFile(t, filepath.Join(dir, "host_ed25519.pub"), ssh.MarshalAuthorizedKey(s.hostPub))

	if opts.ECDSAHostKey {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ecdsa", "-N", "", "-f", filepath.Join(dir, "host_ecdsa")).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v %s", err, out)
		}
	}
	if s.user, err = GenerateSessionKey(); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(dir, "id_ed25519"), s.user.PrivateKey)
	writeTestFile(t, filepath.Join(dir, "authorized_keys"), []byte(s.user.PublicKey+"\n"))
	if opts.CA != nil {
		writeTestFile(t, filepath.Join(dir, "user_ca.pub"), ssh.MarshalAuthorizedKey(opts.CA))
	}
	var cfg bytes.Buffer
	if err := sshdConfigTmpl.Execute(&cfg, map[string]any{"Dir": dir, "CA": opts.CA != nil, "LogLevel": cmp.Or(opts.LogLevel, "DEBUG3"), "ECDSA": opts.ECDSAHostKey}); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, s.config, cfg.Bytes())
	if out, err := exec.Command(sshdPath, "-t", "-f", s.config).CombinedOutput(); err != nil {
		t.Fatalf("sshd -t: %v\n%s", err, out)
	}

	if s.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	s.wg.Add(1)
	go s.serve()
	t.Cleanup(s.close)
	return s
}

func writeTestFile(t testing.TB, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(name, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func (s *sshdServer) serve() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		if err := s.spawn(c.(*net.TCPConn)); err != nil {
			s.t.Errorf("start sshd -i: %v", err)
		}
	}
}

// spawn runs one sshd -i on c, logging to its own file.
func (s *sshdServer) spawn(c *net.TCPConn) error {
	defer c.Close()
	f, err := c.File()
	if err != nil {
		return err
	}
	defer f.Close()
	s.mu.Lock()
	logPath := filepath.Join(s.dir, fmt.Sprintf("sshd-%d.log", len(s.logs)))
	s.logs = append(s.logs, logPath)
	s.mu.Unlock()
	// -E, not -e: with -e the session child's own debug lines would land
	// on the session's stderr.
	cmd := exec.Command(sshdPath, "-i", "-E", logPath, "-f", s.config)
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
		s.idle.Broadcast()
		s.mu.Unlock()
	}()
	return nil
}

// waitIdle blocks until every sshd process started so far has exited (each
// exits when its client connection ends).
func (s *sshdServer) waitIdle(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		s.idle.Broadcast()
		s.mu.Unlock()
	})
	defer stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.procs) > 0 {
		if ctx.Err() != nil {
			return fmt.Errorf("%d sshd processes still running: %w", len(s.procs), ctx.Err())
		}
		s.idle.Wait()
	}
	return nil
}

// log returns every connection's sshd log.
func (s *sshdServer) log() string {
	s.mu.Lock()
	paths := append([]string(nil), s.logs...)
	s.mu.Unlock()
	var b strings.Builder
	for _, p := range paths {
		data, _ := os.ReadFile(p)
		fmt.Fprintf(&b, "== %s\n%s", filepath.Base(p), data)
	}
	return b.String()
}

func (s *sshdServer) close() {
	_ = s.ln.Close()
	s.mu.Lock()
	for cmd := range s.procs {
		_ = cmd.Process.Signal(os.Interrupt)
	}
	s.mu.Unlock()
	s.wg.Wait()
	if s.t.Failed() {
		s.t.Logf("sshd logs:\n%s", s.log())
	}
}

func (s *sshdServer) addr() string { return s.ln.Addr().String() }

func (s *sshdServer) auth() Auth {
	return Auth{User: "root", PrivateKey: s.user.PrivateKey, HostKey: s.hostKey}
}

func (s *sshdServer) dial(t testing.TB) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", s.addr())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// connect returns a client to sshd, closed at cleanup.
func (s *sshdServer) connect(t testing.TB, cfg *ClientConfig) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := ConnectConfig(ctx, s.dial(t), s.auth(), cfg)
	if err != nil {
		t.Fatalf("connect to sshd: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// testCtx is a per-test context with a generous deadline.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}
