// Package sshdtest runs OpenSSH's sshd as an interop peer for tests, the way
// x/crypto's ssh/test does: one `sshd -i` per accepted loopback connection,
// the socket passed as its stdin/stdout, a templated config and fresh keys
// in a temporary directory. No port is picked then released, so nothing can
// race for it. StartAgent runs ssh-agent, a caller's agent to forward. It
// depends on x/crypto/ssh and no hostgate package above internal ones, so
// package sshlayer's own tests can use it.
package sshdtest

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

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/internal/testenv"
)

// Paths of the OpenSSH programs, as Debian installs them.
const (
	SSHDPath       = "/usr/sbin/sshd"
	SFTPServerPath = "/usr/lib/openssh/sftp-server"
)

var configTmpl = template.Must(template.New("sshd_config").Parse(`{{.Extra}}
ListenAddress 127.0.0.1
{{if .ECDSA}}HostKey {{.Dir}}/host_ecdsa
{{end}}{{if .RSA}}HostKey {{.Dir}}/host_rsa
{{end}}HostKey {{.Dir}}/host_ed25519
AuthorizedKeysFile {{.Dir}}/authorized_keys
{{if .CA}}TrustedUserCAKeys {{.Dir}}/user_ca.pub
{{end}}StrictModes no
UsePAM no
PermitRootLogin yes
PidFile {{.Dir}}/sshd.pid
Subsystem sftp ` + SFTPServerPath + `
AllowTcpForwarding yes
AllowStreamLocalForwarding yes
GatewayPorts no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PrintMotd no
PrintLastLog no
LogLevel {{.LogLevel}}
{{if .Ciphers}}Ciphers {{.Ciphers}}
{{end}}# Debian's bash sources ~/.bashrc for commands run by sshd unless it is a
# nested shell; SHLVL=1 keeps the machine's dotfiles out of every exec.
SetEnv SHLVL=1
`))

// Options tunes Start; the zero value is a plain server.
type Options struct {
	CA ssh.PublicKey // trusted user CA, when set
	// LogLevel is sshd's; DEBUG3 when empty (tests read the log), quieter
	// for benchmarks, where per-packet logging would dominate.
	LogLevel string
	// ECDSAHostKey gives sshd a second host key, listed first, as on a
	// typical machine.
	ECDSAHostKey bool
	// RSAHostKey gives sshd an RSA host key too (host_rsa, its public key
	// in host_rsa.pub), listed before the ed25519 one.
	RSAHostKey bool
	// Ciphers, when set, is sshd's Ciphers line, so a benchmark can hold
	// both sides of a comparison to one cipher.
	Ciphers string
	// Config is more sshd_config lines ("GatewayPorts yes"). They come
	// first: sshd keeps the first value it reads of a keyword, so they
	// override the template's.
	Config string
}

// Server is a running sshd. Its fields are set by Start and read-only.
type Server struct {
	Dir         string        // the temporary directory holding keys, config and logs
	Config      string        // path of sshd_config
	HostKey     string        // SHA256 fingerprint of the ed25519 host key
	HostPub     ssh.PublicKey // the ed25519 host key
	UserKey     []byte        // the authorized user's private key, OpenSSH PEM
	UserPub     ssh.PublicKey // its public half
	UserKeyFile string        // path of UserKey, for ssh -i
	KnownHosts  string        // a known_hosts file naming HostPub for [127.0.0.1]:*

	t  testing.TB
	ln net.Listener

	wg    sync.WaitGroup // accept loop and one waiter per sshd process
	mu    sync.Mutex
	procs map[*exec.Cmd]struct{} // running sshd -i processes
	logs  []string               // one log file per connection
	idle  *sync.Cond             // signalled when procs shrinks
}

// Available reports whether OpenSSH's server and sftp-server are here.
func Available() bool {
	for _, p := range []string{SSHDPath, SFTPServerPath} {
		if _, err := os.Stat(p); err != nil {
			return false
		}
	}
	return true
}

// Start runs sshd on a loopback listener until t's cleanup, which stops
// every sshd process, waits for them and, when t failed, logs their logs.
// Without OpenSSH it skips t (fails it when HOSTGATE_E2E=require).
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	testenv.RequirePeer(t, "OpenSSH sshd", Available())
	// sshd refuses to start without its privilege separation directory,
	// which the Debian service creates at boot and a container may lack.
	if _, err := os.Stat("/run/sshd"); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			t.Fatalf("create /run/sshd: %v", err)
		}
	}
	dir := t.TempDir()
	s := &Server{t: t, Dir: dir, Config: filepath.Join(dir, "sshd_config"), procs: map[*exec.Cmd]struct{}{}}
	s.idle = sync.NewCond(&s.mu)

	hostSigner := writeKey(t, filepath.Join(dir, "host_ed25519"))
	s.HostPub = hostSigner.PublicKey()
	s.HostKey = ssh.FingerprintSHA256(s.HostPub)
	WriteFile(t, filepath.Join(dir, "host_ed25519.pub"), ssh.MarshalAuthorizedKey(s.HostPub))
	s.KnownHosts = filepath.Join(dir, "known_hosts")
	WriteFile(t, s.KnownHosts, []byte("[127.0.0.1]:* "+string(ssh.MarshalAuthorizedKey(s.HostPub))))

	for typ, want := range map[string]bool{"ecdsa": opts.ECDSAHostKey, "rsa": opts.RSAHostKey} {
		if !want {
			continue
		}
		if out, err := exec.Command("ssh-keygen", "-q", "-t", typ, "-N", "", "-f", filepath.Join(dir, "host_"+typ)).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v %s", err, out)
		}
	}
	s.UserKeyFile = filepath.Join(dir, "id_ed25519")
	s.UserPub = writeKey(t, s.UserKeyFile).PublicKey()
	var err error
	if s.UserKey, err = os.ReadFile(s.UserKeyFile); err != nil {
		t.Fatal(err)
	}
	WriteFile(t, filepath.Join(dir, "authorized_keys"), ssh.MarshalAuthorizedKey(s.UserPub))
	if opts.CA != nil {
		WriteFile(t, filepath.Join(dir, "user_ca.pub"), ssh.MarshalAuthorizedKey(opts.CA))
	}
	var cfg bytes.Buffer
	if err := configTmpl.Execute(&cfg, map[string]any{
		"Dir": dir, "CA": opts.CA != nil, "LogLevel": cmp.Or(opts.LogLevel, "DEBUG3"),
		"ECDSA": opts.ECDSAHostKey, "RSA": opts.RSAHostKey, "Ciphers": opts.Ciphers,
		"Extra": opts.Config,
	}); err != nil {
		t.Fatal(err)
	}
	WriteFile(t, s.Config, cfg.Bytes())
	if out, err := exec.Command(SSHDPath, "-t", "-f", s.Config).CombinedOutput(); err != nil {
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

// writeKey writes a new ed25519 private key to name and returns its signer.
func writeKey(t testing.TB, name string) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	WriteFile(t, name, pem.EncodeToMemory(block))
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return signer
}

// WriteFile writes data to name with mode 0600 (sshd and ssh insist on it
// for keys) or fails t.
func WriteFile(t testing.TB, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(name, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func (s *Server) serve() {
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
func (s *Server) spawn(c *net.TCPConn) error {
	defer c.Close()
	f, err := c.File()
	if err != nil {
		return err
	}
	defer f.Close()
	s.mu.Lock()
	logPath := filepath.Join(s.Dir, fmt.Sprintf("sshd-%d.log", len(s.logs)))
	s.logs = append(s.logs, logPath)
	s.mu.Unlock()
	// -E, not -e: with -e the session child's own debug lines would land
	// on the session's stderr.
	cmd := exec.Command(SSHDPath, "-i", "-E", logPath, "-f", s.Config)
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

// WaitIdle blocks until every sshd process started so far has exited (each
// exits when its client connection ends), or ctx ends.
func (s *Server) WaitIdle(ctx context.Context) error {
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

// Log returns every connection's sshd log.
func (s *Server) Log() string {
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

func (s *Server) close() {
	_ = s.ln.Close()
	s.mu.Lock()
	for cmd := range s.procs {
		_ = cmd.Process.Signal(os.Interrupt)
	}
	s.mu.Unlock()
	s.wg.Wait()
	if s.t.Failed() {
		s.t.Logf("sshd logs:\n%s", s.Log())
	}
}

// Addr is the loopback address sshd answers on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Dial connects to sshd or fails t.
func (s *Server) Dial(t testing.TB) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	return c
}
