package main

import (
	"context"
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
	keys := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(keys, []byte(key.PublicKey+"\n"), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(e.cfg.agentBin, "serve", "--listen", "127.0.0.1:0", "--authorized-keys", keys, "--state-dir", dir)
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
