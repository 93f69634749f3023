package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hostgate/hostgate/bench"
)

// Cipher is what both sides use: OpenSSH is pinned to it, and hostgate's
// client prefers it (Go has AES-GCM assembly on amd64).
const Cipher = "aes128-gcm@openssh.com"

// DefaultCipher is the cipher OpenSSH's ssh offers first, and so the one
// an ssh, sftp or scp without -c gets from any server that takes it. sshd
// takes it beside Cipher for the rows that measure it (the master keeps
// Cipher).
const DefaultCipher = "chacha20-poly1305@openssh.com"

// sshd serves OpenSSH's sshd on a loopback listener: each accepted
// connection runs `sshd -i` on the socket itself (as x/crypto's ssh/test
// does), so no port is guessed and bytes go straight from socket to sshd.
type sshd struct {
	log     *slog.Logger
	ln      net.Listener
	dir     string
	cfgPath string
	user    string
	key     string // the client's private key
	ctl     string // ControlMaster socket
	master  *exec.Cmd

	wg     sync.WaitGroup // the accept loop and one per sshd -i
	mu     sync.Mutex
	stderr bytes.Buffer
	served []int // pids of the sshd -i processes running (guarded by mu)
}

func startSSHD(ctx context.Context, log *slog.Logger, dir, user string) (*sshd, error) {
	d := &sshd{log: log, dir: filepath.Join(dir, "ssh"), user: user}
	if err := os.MkdirAll(d.dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		return nil, err
	}
	hostKey := filepath.Join(d.dir, "host_ed25519")
	d.key = filepath.Join(d.dir, "id_ed25519")
	for _, k := range []string{hostKey, d.key} {
		if out, err := exec.CommandContext(ctx, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", k).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("ssh-keygen: %w: %s", err, out)
		}
	}
	pub, err := os.ReadFile(d.key + ".pub")
	if err != nil {
		return nil, err
	}
	authKeys := filepath.Join(d.dir, "authorized_keys")
	if err := os.WriteFile(authKeys, pub, 0o644); err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf(`HostKey %s
AuthorizedKeysFile %s
AllowUsers %s
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
Ciphers %s,%s
Subsystem sftp /usr/lib/openssh/sftp-server
AllowTcpForwarding yes
MaxSessions 1000
PidFile none
LogLevel ERROR
`, hostKey, authKeys, user, Cipher, DefaultCipher)
	d.cfgPath = filepath.Join(d.dir, "sshd_config")
	if err := os.WriteFile(d.cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	if out, err := exec.CommandContext(ctx, "/usr/sbin/sshd", "-t", "-f", d.cfgPath).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("sshd -t: %w: %s", err, out)
	}
	d.ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	d.wg.Add(1)
	go d.serve()
	if err := d.startMaster(ctx); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

func (d *sshd) serve() {
	defer d.wg.Done()
	for {
		c, err := d.ln.Accept()
		if err != nil {
			return
		}
		f, err := c.(*net.TCPConn).File()
		_ = c.Close()
		if err != nil {
			d.log.Warn("sshd: socket file", "err", err)
			continue
		}
		cmd := exec.Command("/usr/sbin/sshd", "-i", "-e", "-f", d.cfgPath)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = f, f, &lockedBuf{mu: &d.mu, b: &d.stderr}
		err = cmd.Start()
		_ = f.Close()
		if err != nil {
			d.log.Warn("sshd -i", "err", err)
			continue
		}
		pid := cmd.Process.Pid
		d.mu.Lock()
		d.served = append(d.served, pid)
		d.mu.Unlock()
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			_ = cmd.Wait()
			// Reaped: the pid may name another process from now on.
			d.mu.Lock()
			d.served = slices.DeleteFunc(d.served, func(p int) bool { return p == pid })
			d.mu.Unlock()
		}()
	}
}

// processes returns the pid of the ssh master and those of the sshd
// processes serving connections: each sshd -i started and what it forked
// (privilege separation runs the session in a child).
func (d *sshd) processes() (master int, server []int, err error) {
	d.mu.Lock()
	served := slices.Clone(d.served)
	d.mu.Unlock()
	for _, p := range served {
		below, err := bench.Descendants(p)
		if err != nil {
			return 0, nil, err
		}
		server = append(append(server, p), below...)
	}
	return d.master.Process.Pid, server, nil
}

// masterArgs are ssh's options through the master at ctl to the server
// at port with cipher (connection setup is not measured).
func (d *sshd) masterArgs(ctl, port, cipher string) []string {
	return append(d.argsTo(port, cipher), "-o", "ControlPath="+ctl, "-o", "ControlMaster=no")
}

// argsTo are ssh's options for a server at port (sshd's, or another that
// takes sshd's client key) with cipher. (ssh keeps the first value an
// option is given, so these cannot be amended after.)
func (d *sshd) argsTo(port, cipher string) []string {
	return []string{"-F", "/dev/null", "-i", d.key, "-p", port, "-l", d.user,
		"-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
		"-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "Ciphers=" + cipher,
		"-o", "Compression=no"}
}

// plainCommand is ssh with cipher, on a connection of its own (no master),
// running remote on the server at port: sshd's, or another that takes
// sshd's client key.
func (d *sshd) plainCommand(ctx context.Context, port, cipher, remote string) *exec.Cmd {
	args := append(d.argsTo(port, cipher), "127.0.0.1", remote)
	return exec.CommandContext(ctx, "ssh", args...)
}

// masterTo starts `ssh -M -N` with cipher to the server at port (sshd's,
// or another that takes sshd's client key), its control socket at ctl,
// and waits until `ssh -O check` answers; commands then go through it
// (viaMaster). Its stderr joins sshd's (errors). Stop it with stopMaster.
func (d *sshd) masterTo(ctx context.Context, port, cipher, ctl string) (*exec.Cmd, error) {
	args := append(d.argsTo(port, cipher), "-M", "-N", "-o", "ControlPath="+ctl, "-o", "ServerAliveInterval=0", "127.0.0.1")
	m := exec.Command("ssh", args...)
	m.Stderr = &lockedBuf{mu: &d.mu, b: &d.stderr}
	if err := m.Start(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := d.viaMaster(ctx, ctl, port, cipher, []string{"-O", "check"}).Run()
		if err == nil {
			return m, nil
		}
		if time.Now().After(deadline) {
			stopMaster(m)
			return nil, fmt.Errorf("ssh ControlMaster to port %s not up in 20 s: %w; stderr: %s", port, err, d.errors())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// viaMaster is ssh through the master at ctl (masterTo's) running remote:
// its options, extra, the host, remote.
func (d *sshd) viaMaster(ctx context.Context, ctl, port, cipher string, extra []string, remote ...string) *exec.Cmd {
	args := append(append(d.masterArgs(ctl, port, cipher), extra...), "127.0.0.1")
	return exec.CommandContext(ctx, "ssh", append(args, remote...)...)
}

// stopMaster ends a master masterTo started.
func stopMaster(m *exec.Cmd) {
	_ = m.Process.Kill()
	_ = m.Wait()
}

// port is sshd's listening port.
func (d *sshd) port() string { return strconv.Itoa(d.ln.Addr().(*net.TCPAddr).Port) }

// startMaster starts sshd's own master, through which Command, SFTP and
// forwardL go.
func (d *sshd) startMaster(ctx context.Context) (err error) {
	d.ctl = filepath.Join(d.dir, "ctl")
	d.master, err = d.masterTo(ctx, d.port(), Cipher, d.ctl)
	return err
}

// Command is ssh (through the master) running remote on the server.
func (d *sshd) Command(ctx context.Context, extra []string, remote ...string) *exec.Cmd {
	return d.viaMaster(ctx, d.ctl, d.port(), Cipher, extra, remote...)
}

// forwardL adds a local forward to target on the master (ssh -O forward
// -L) and returns the address it listens on.
func (d *sshd) forwardL(ctx context.Context, target string) (string, error) {
	port, err := freePort()
	if err != nil {
		return "", err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	if out, err := d.Command(ctx, []string{"-O", "forward", "-L", addr + ":" + target}).CombinedOutput(); err != nil {
		return "", fmt.Errorf("ssh -O forward: %w: %s", err, out)
	}
	return addr, nil
}

// SFTP runs an sftp batch through the master.
func (d *sshd) SFTP(ctx context.Context, batch string) error {
	return d.sftp(ctx, d.masterArgs(d.ctl, d.port(), Cipher), batch)
}

// sftpTo runs an sftp batch with cipher on a connection of its own to the
// server at port (see argsTo).
func (d *sshd) sftpTo(ctx context.Context, port, cipher, batch string) error {
	return d.sftp(ctx, d.argsTo(port, cipher), batch)
}

func (d *sshd) sftp(ctx context.Context, sshArgs []string, batch string) error {
	args := append([]string{"-b", "-", "-q"}, sshArgs...)
	// sftp takes -P for the port; ssh's -p would be taken as preserve.
	for i := range args {
		if args[i] == "-p" {
			args[i] = "-P"
		}
	}
	// -l is not an sftp option (it is a bandwidth limit): use user@host.
	var clean []string
	for i := 0; i < len(args); i++ {
		if args[i] == "-l" {
			i++
			continue
		}
		clean = append(clean, args[i])
	}
	clean = append(clean, d.user+"@127.0.0.1")
	cmd := exec.CommandContext(ctx, "sftp", clean...)
	cmd.Stdin = bytes.NewBufferString(batch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("sftp: %w: %s", err, out)
	}
	return nil
}

func (d *sshd) errors() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stderr.String()
}

// Close stops the master, the listener and waits for every sshd -i.
func (d *sshd) Close() {
	if d.master != nil && d.master.Process != nil {
		_ = d.master.Process.Kill()
		_ = d.master.Wait()
	}
	_ = d.ln.Close()
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		d.log.Warn("sshd sessions still running after 10 s")
	}
	if s := d.errors(); s != "" {
		d.log.Debug("openssh stderr", "text", s)
	}
}

type lockedBuf struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w *lockedBuf) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.b.Len() > 1<<20 {
		return len(p), nil // bounded: keep the first MiB
	}
	return w.b.Write(p)
}

var errTimeout = errors.New("timed out")
