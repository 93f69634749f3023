package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/bench"
	"github.com/hostgate/hostgate/internal/agent"
	"github.com/hostgate/hostgate/sshlayer"
)

// listenRE finds the address `agent serve --listen` bound in its log.
var listenRE = regexp.MustCompile(`agent serving SSH.* listen=(\S+)`)

// aloneAgent is `agent serve --listen` on loopback TCP as the bench user,
// with the Go client connected straight to it: the SSH layer alone, no
// WebSocket, gateway or yamux.
type aloneAgent struct {
	c    *sshlayer.Client
	pid  int
	addr string // where the agent listens
	auth sshlayer.Auth
	p    *proc
}

// agentServe starts an aloneAgent. Stop it when done.
func (e *env) agentServe(ctx context.Context) (a *aloneAgent, err error) {
	return e.agentServeBin(ctx, e.cfg.agentBin)
}

// agentServeBin is agentServe of the agent binary bin.
func (e *env) agentServeBin(ctx context.Context, bin string) (a *aloneAgent, err error) {
	key, err := sshlayer.GenerateSessionKey()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(e.dir, "agent-serve-")
	if err != nil {
		return nil, err
	}
	if err := os.Chown(dir, e.uid, e.gid); err != nil {
		return nil, err
	}
	// OpenSSH's client key too, for the rows where ssh is the client.
	sshKey, err := os.ReadFile(e.sshd.key + ".pub")
	if err != nil {
		return nil, err
	}
	keys := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(keys, []byte(key.PublicKey+"\n"+string(sshKey)), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--authorized-keys", keys, "--state-dir", dir)
	cmd.Dir = e.home
	cmd.Env = []string{"HOME=" + e.home, "USER=" + e.cfg.user, "LOGNAME=" + e.cfg.user, "PATH=/usr/local/bin:/usr/bin:/bin"}
	cmd.Env = append(cmd.Env, procEnv()...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(e.uid), Gid: uint32(e.gid)}}
	p, err := startProc("agent serve", cmd)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			p.Stop()
		}
	}()
	m, err := p.waitLine(listenRE, 30*time.Second)
	if err != nil {
		return nil, fmt.Errorf("agent serve: %w", err)
	}
	pem, err := os.ReadFile(filepath.Join(dir, agent.HostKeyFile))
	if err != nil {
		return nil, err
	}
	hk, err := ssh.ParsePrivateKey(pem)
	if err != nil {
		return nil, err
	}
	a = &aloneAgent{pid: p.Pid(), addr: m[1], p: p,
		auth: sshlayer.Auth{User: e.cfg.user, Signer: key.Signer, HostKey: sshlayer.Fingerprint(hk.PublicKey())}}
	if a.c, err = a.connect(ctx, a.addr); err != nil {
		return nil, err
	}
	return a, nil
}

// connect opens another SSH connection to the agent through addr: the
// agent's own address, or a relay's in front of it.
func (a *aloneAgent) connect(ctx context.Context, addr string) (*sshlayer.Client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return sshlayer.Connect(ctx, conn, a.auth)
}

// stop ends the client and the agent.
func (a *aloneAgent) stop() {
	_ = a.c.Close()
	a.p.Stop()
}

// bulkSSHAlone streams the bulk scenario's bytes over the SSH layer alone
// (agentServe), against OpenSSH again. With the full-path row it splits
// the gap to OpenSSH into the SSH implementation's share and the relay's.
func (e *env) bulkSSHAlone(ctx context.Context) ([]*bench.Scenario, error) {
	a, err := e.agentServe(ctx)
	if err != nil {
		return nil, err
	}
	defer a.stop()

	to := &bench.Scenario{Name: fmt.Sprintf("bulk stream %d MiB, SSH layer alone", e.cfg.bulkMiB), Unit: "MiB/s",
		PeerName: "OpenSSH ssh → sshd, " + Cipher, Better: bench.Higher,
		Note: "the Go client straight to `agent serve --listen` over loopback TCP: no WebSocket, gateway or yamux"}
	from := &bench.Scenario{Name: fmt.Sprintf("bulk stream %d MiB from head -c, SSH layer alone", e.cfg.bulkMiB), Unit: "MiB/s",
		PeerName: "OpenSSH ssh → sshd, " + Cipher, Better: bench.Higher}
	if err := e.bothWays(ctx, a.c, "ssh layer", to, from, nil, nil); err != nil {
		return nil, err
	}
	return []*bench.Scenario{to, from}, nil
}

// bulkOpenSSHClient streams bulk bytes from and to OpenSSH's ssh, the
// client on both sides, with the cipher it picks by default: one side's
// server is `agent serve --listen`, the other's sshd. What an ssh, sftp or
// scp user gets from an agent (through gateway proxy's direct session)
// or a sandbox, against what they get from sshd.
func (e *env) bulkOpenSSHClient(ctx context.Context) ([]*bench.Scenario, error) {
	a, err := e.agentServe(ctx)
	if err != nil {
		return nil, err
	}
	defer a.stop()
	_, agentPort, err := net.SplitHostPort(a.addr)
	if err != nil {
		return nil, err
	}
	n := int64(e.cfg.bulkMiB/2) * mib
	peer := "OpenSSH ssh → sshd, " + DefaultCipher
	to := &bench.Scenario{Name: fmt.Sprintf("bulk stream %d MiB, OpenSSH ssh to the agent, its default cipher", n/mib), Unit: "MiB/s",
		PeerName: peer, Better: bench.Higher,
		Note: "OpenSSH's ssh on both sides, " + DefaultCipher + " (the cipher it offers first), a connection per run: into `cat >/dev/null` on `agent serve --listen`, against sshd: the two servers, one client"}
	from := &bench.Scenario{Name: fmt.Sprintf("bulk stream %d MiB from head -c, OpenSSH ssh to the agent, its default cipher", n/mib), Unit: "MiB/s",
		PeerName: peer, Better: bench.Higher}
	toCPU, fromCPU := newCPURow(to, "MiB"), newCPURow(from, "MiB")
	err = e.pairOpenSSH(a, agentPort, to, toCPU, n, func(port string) error {
		return sshIn(e.sshd.plainCommand(ctx, port, DefaultCipher, "cat >/dev/null"), n)
	}, nil)
	if err == nil {
		err = e.pairOpenSSH(a, agentPort, from, fromCPU, n, func(port string) error {
			return sshOut(e.sshd.plainCommand(ctx, port, DefaultCipher, fmt.Sprintf("head -c %d /dev/zero", n)), n)
		}, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("ssh with %s: %w", DefaultCipher, err)
	}
	ss := []*bench.Scenario{to, toCPU.scenario(), from, fromCPU.scenario()}
	sftp, err := e.sftpOpenSSHClient(ctx, a, agentPort)
	ss = append(ss, sftp...)
	if err != nil {
		return ss, err
	}
	ex, err := e.execOpenSSHClient(ctx, agentPort)
	ss = append(ss, ex...)
	if err != nil || e.cfg.agentBefore == "" {
		return ss, err
	}
	ab, err := e.sshclientAB(ctx, a)
	return append(ss, ab...), err
}

// execOpenSSHClient is bulkOpenSSHClient's exec round trip: `true` through
// an OpenSSH ControlMaster on each side, one to the agent and one to sshd,
// both with the default cipher (what a tool that runs many commands over
// ssh, such as Ansible with its ControlPersist, pays per command).
func (e *env) execOpenSSHClient(ctx context.Context, agentPort string) ([]*bench.Scenario, error) {
	type side struct {
		port, ctl string
	}
	ours := side{agentPort, filepath.Join(e.dir, "ctl-agent")}
	theirs := side{e.sshd.port(), filepath.Join(e.dir, "ctl-sshd")}
	for _, s := range []side{ours, theirs} {
		m, err := e.sshd.masterTo(ctx, s.port, DefaultCipher, s.ctl)
		if err != nil {
			return nil, err
		}
		defer stopMaster(m)
	}
	p50 := &bench.Scenario{Name: "exec round trip of true, OpenSSH ssh to the agent, p50", Unit: "ms", PeerName: "OpenSSH ControlMaster → sshd", Better: bench.Lower,
		Note: fmt.Sprintf("OpenSSH's ssh through a ControlMaster on both sides, one to `agent serve --listen` and one to sshd, %d round trips per side per pair: the two servers, one client", e.cfg.execN)}
	run := func(s side, out *[]float64) func() error {
		return func() (err error) {
			*out, err = samples(e.cfg.execN, func() error {
				if out, err := e.sshd.viaMaster(ctx, s.ctl, s.port, DefaultCipher, nil, "true").CombinedOutput(); err != nil {
					return fmt.Errorf("ssh to port %s: %w: %s", s.port, err, out)
				}
				return nil
			})
			return err
		}
	}
	for i := range e.cfg.pairs {
		var a, b []float64
		if err := bench.Alternate(i, run(ours, &a), run(theirs, &b)); err != nil {
			return nil, err
		}
		p50.Add(bench.Percentile(a, 50), bench.Percentile(b, 50))
	}
	return []*bench.Scenario{p50}, nil
}

// sftpOpenSSHClient is bulkOpenSSHClient's SFTP: OpenSSH's sftp, the
// client on both sides (and scp's since OpenSSH 9.0), getting and putting
// one file through the agent's SFTP server and through sshd's sftp-server.
func (e *env) sftpOpenSSHClient(ctx context.Context, a *aloneAgent, agentPort string) ([]*bench.Scenario, error) {
	n := int64(e.cfg.sftpMiB) * mib
	src, dst, err := e.sshclientFiles(n)
	if err != nil {
		return nil, err
	}
	peer := "OpenSSH sftp → sshd, " + DefaultCipher
	down := &bench.Scenario{Name: fmt.Sprintf("SFTP download %d MiB, OpenSSH sftp to the agent, its default cipher", n/mib), Unit: "MiB/s",
		PeerName: peer, Better: bench.Higher,
		Note: "OpenSSH's sftp on both sides (scp's protocol too since OpenSSH 9.0), " + DefaultCipher + ", a connection per run: get to /dev/null from `agent serve --listen`'s SFTP server against sshd's sftp-server"}
	up := &bench.Scenario{Name: fmt.Sprintf("SFTP upload %d MiB, OpenSSH sftp to the agent, its default cipher", n/mib), Unit: "MiB/s",
		PeerName: peer, Better: bench.Higher,
		Note: "put of the same file; the upload's write-back is neither timed nor metered"}
	downCPU, upCPU := newCPURow(down, "MiB"), newCPURow(up, "MiB")
	sftp := func(batch string) func(port string) error {
		return func(port string) error { return e.sshd.sftpTo(ctx, port, DefaultCipher, batch) }
	}
	err = e.pairOpenSSH(a, agentPort, down, downCPU, n, sftp("get "+src+" /dev/null\n"), nil)
	if err == nil {
		err = e.pairOpenSSH(a, agentPort, up, upCPU, n, sftp("put "+src+" "+dst+"\n"), func() error {
			if st, err := os.Stat(dst); err != nil || st.Size() != n {
				return fmt.Errorf("upload: %v bytes arrived (%v), want %d", sizeOf(st), err, n)
			}
			return errors.Join(settle(dst), os.Remove(dst))
		})
	}
	if err != nil {
		return nil, fmt.Errorf("sftp with %s: %w", DefaultCipher, err)
	}
	return []*bench.Scenario{down, downCPU.scenario(), up, upCPU.scenario()}, nil
}

// sshclientFiles writes the sshclient group's SFTP source, n bytes, in a
// directory the bench user owns, and names it and the upload's target.
func (e *env) sshclientFiles(n int64) (src, dst string, err error) {
	files, err := e.userDir("sshclient-files")
	if err != nil {
		return "", "", err
	}
	src = filepath.Join(files, "src.bin")
	return src, filepath.Join(files, "dst.bin"), writeFileN(src, n)
}

// sshIn writes n bytes to cmd's stdin and waits for it.
func sshIn(cmd *exec.Cmd, n int64) error {
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	return sshIO(cmd, func() error {
		werr := writeN(in, n)
		_ = in.Close()
		return werr
	})
}

// sshOut reads cmd's stdout to the end, wanting n bytes, and waits for it.
func sshOut(cmd *exec.Cmd, n int64) error {
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	return sshIO(cmd, func() error {
		got, err := readAll(out)
		if err == nil && got != n {
			err = fmt.Errorf("read %d bytes, want %d", got, n)
		}
		return err
	})
}

// sshIO starts cmd, moves its bytes with move, and waits for it; an error
// carries what ssh said on stderr.
func sshIO(cmd *exec.Cmd, move func() error) error {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	if err := errors.Join(move(), cmd.Wait()); err != nil {
		return fmt.Errorf("%w: %s", err, stderr.Bytes())
	}
	return nil
}

// pairOpenSSH runs the pairs of one sshclient row moving n bytes: run
// against the agent at agentPort (its CPU metered as the agent's alone)
// and against sshd, alternating, then after (untimed, unmetered; may be
// nil) following each side.
func (e *env) pairOpenSSH(a *aloneAgent, agentPort string, s *bench.Scenario, cpu *cpuRow, n int64, run func(port string) error, after func() error) error {
	cpu.alone = true
	rate := func(d time.Duration) float64 { return float64(n) / mib / d.Seconds() }
	if after == nil {
		after = func() error { return nil }
	}
	for i := range sshclientPairs(e.cfg.pairs) {
		var (
			ta, tb time.Duration
			ua, ub cpuUse
		)
		side := func(port string, d *time.Duration) func() error {
			return func() (err error) {
				*d, err = timeIt(func() error { return run(port) })
				return err
			}
		}
		ours := e.meteredAlone(&ua, a.pid, side(agentPort, &ta))
		theirs := e.metered(&ub, false, side(e.sshd.port(), &tb))
		err := bench.Alternate(i, func() error { return errors.Join(ours(), after()) }, func() error { return errors.Join(theirs(), after()) })
		if err != nil {
			return err
		}
		s.Add(rate(ta), rate(tb))
		cpu.add(ua, ub, float64(n)/mib)
	}
	return nil
}

// sshclientPairs bounds the sshclient group's bulk and SFTP rows to 4
// pairs (even, so each side runs first in half), as the checkpoint's: a
// connection per run at OpenSSH's pace, they took a minute and a half of
// the harness's 10 at 6.
func sshclientPairs(pairs int) int { return min(pairs, 4) }
