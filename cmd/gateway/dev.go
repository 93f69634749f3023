//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/agent"
	"github.com/hostgate/hostgate/internal/gateway/sshca"
	"github.com/hostgate/hostgate/internal/shell"
	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/sshlayer"
)

func init() {
	register("dev", "the embedded default: a gateway with this machine attached as host \"local\"", runDev)
}

// devHost is the id this machine is attached as.
const devHost = "local"

// runDev is `gateway dev`: a gateway whose state sits in a local folder,
// this machine attached as host "local" by an in-process agent (dialing
// out over the same WebSocket path a remote agent uses), Docker executions
// when an engine answers, and everything a person needs printed: the admin
// token, the web URL and a ready ssh command.
func runDev(ctx context.Context, sio stdio, args []string) error {
	c, err := parseServeFlags("dev", sio, args, serveConfig{Listen: "127.0.0.1:8080", StateDir: ".hostgate-dev", PreviewDomain: "localhost"})
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(c.StateDir)
	if err != nil {
		return err
	}
	c.StateDir = abs
	logger := newLogger(sio, c.LogFormat)

	// Locked before the tokens are replaced: a second `gateway dev` on the
	// same dir must stop there, not revoke the running one's tokens first.
	unlock, err := lockStateDir(c.StateDir)
	if err != nil {
		return err
	}
	defer unlock()
	c.stateLocked = true
	c.unknownTokenFix = "under gateway dev, an admin token an earlier start printed is one (each start ends it): use the one this start printed, or make one of your own that restarts leave alone: gateway token create --state-dir " + shell.Quote(c.StateDir) + " --role admin"
	admin, agentTok, err := devTokens(ctx, c.StateDir, logger)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	ready := func(addr net.Addr) {
		url := "http://" + addr.String()
		tunnelUp := make(chan struct{})
		var once sync.Once
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := agent.Connect(ctx, &agent.ConnectConfig{
				GatewayURL: url,
				Token:      agentTok,
				HostID:     devHost,
				StateDir:   filepath.Join(c.StateDir, "agent"),
				Info:       hostgate.Info{Kind: "local", Persistent: true},
				Logger:     logger.With("component", "agent"),
				OnTunnel:   func(string) { once.Do(func() { close(tunnelUp) }) },
			})
			if err != nil {
				logger.Error("local agent stopped", "err", err)
				cancel()
			}
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-ctx.Done():
				return
			case <-tunnelUp:
			}
			sshCmd, cert, err := devSSHCommand(ctx, c.StateDir, url, admin)
			if err != nil {
				logger.Warn("no ssh command", "err", err)
			}
			fmt.Fprintf(sio.out, "\nhostgate dev is running.\n\n  web UI:       %s/  (log in with the admin token)\n  admin token:  %s\n  host:         %s (this machine, attached by an in-process agent)\n", url, admin, devHost)
			if sshCmd != "" {
				fmt.Fprintf(sio.out, "  ssh:          %s\n", sshCmd)
			}
			fmt.Fprintf(sio.out, "  Go:           client.Dial(ctx, %q, TOKEN, %q)\n\nStop with Ctrl-C.\n", url, devHost)
			if cert != nil {
				cert.keepFresh(ctx, logger)
			}
		}()
	}
	err = serve(ctx, logger, c, ready)
	cancel()
	return err
}

// devTokens makes a fresh admin token (printed for the person) and the
// local agent's token, and revokes those of earlier runs: each start added
// two tokens that never expire, and every admin token printed before kept
// working.
func devTokens(ctx context.Context, dir string, logger *slog.Logger) (admin, agentTok string, err error) {
	st, _, err := openState(ctx, dir, logTightened(logger))
	if err != nil {
		return "", "", err
	}
	defer st.Close()
	old, err := st.Tokens(ctx)
	var ue *store.UnreadableTokensError
	if err != nil && !errors.As(err, &ue) { // an unreadable row is not dev's
		return "", "", err
	}
	for _, t := range old {
		if t.Name == devAdminToken || t.Name == devAgentToken {
			if err := st.DeleteToken(ctx, t.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
				return "", "", err
			}
		}
	}
	admin, _, err = st.CreateToken(ctx, store.TokenSpec{Name: devAdminToken, Role: store.RoleAdmin})
	if err != nil {
		return "", "", err
	}
	agentTok, _, err = st.CreateToken(ctx, store.TokenSpec{Name: devAgentToken, Role: store.RoleAgent, Hosts: []string{devHost}})
	if err != nil {
		return "", "", err
	}
	return admin, agentTok, nil
}

// The names of the tokens `gateway dev` makes.
const (
	devAdminToken = "dev-admin"
	devAgentToken = "dev-agent-local"
)

// devSSHCommand writes a session key, a certificate for it (at the longest
// TTL the CA allows) and a known_hosts line for the local host, and returns
// an OpenSSH command line that reaches the host through `gateway proxy`,
// and the certificate, which dev keeps fresh while it runs.
func devSSHCommand(ctx context.Context, dir, url, token string) (string, *devCert, error) {
	st, ca, err := openState(ctx, dir, func(store.TightenedFile) {}) // devTokens opened it first
	if err != nil {
		return "", nil, err
	}
	defer st.Close()
	h, err := st.Host(ctx, devHost)
	if err != nil {
		return "", nil, err
	}
	key, err := sshlayer.GenerateSessionKey()
	if err != nil {
		return "", nil, err
	}
	sshDir := filepath.Join(dir, "ssh")
	if err := os.MkdirAll(sshDir, 0o700); err != nil {
		return "", nil, err
	}
	keyPath := filepath.Join(sshDir, "id_ed25519")
	cert := &devCert{ca: ca, pub: key.Signer.PublicKey(), path: keyPath + "-cert.pub"}
	files := map[string][]byte{
		keyPath:                              key.PrivateKey,
		filepath.Join(sshDir, "known_hosts"): []byte(devHost + " " + strings.TrimSpace(h.HostKey) + "\n"),
	}
	for p, b := range files {
		// writeAtomic sets the mode of a file already there too:
		// os.WriteFile left one a umask or a hand had opened up so.
		if err := writeAtomic(p, b, 0o600); err != nil {
			return "", nil, err
		}
	}
	if err := cert.renew(); err != nil {
		return "", nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	if self, err = proxyBinary(dir, self); err != nil {
		return "", nil, err
	}
	// ssh expands %-tokens in ProxyCommand: a literal % must be %%. The
	// token goes in ssh's environment, which the proxy inherits, so that
	// it is not on the proxy's command line for ps to show.
	proxy := strings.ReplaceAll(shell.Join([]string{self, "proxy", "--url", url}), "%", "%%") + " %h"
	return "HOSTGATE_TOKEN=" + shell.Quote(token) + " " + shell.Join([]string{"ssh", "-i", keyPath,
		"-o", "CertificateFile=" + cert.path,
		"-o", "UserKnownHostsFile=" + filepath.Join(sshDir, "known_hosts"),
		"-o", "StrictHostKeyChecking=yes",
		"-o", "ProxyCommand=" + proxy,
		devHost}), cert, nil
}

// devCertRenew is how often dev signs the printed ssh command's
// certificate again: half its lifetime, so a renewal that fails once
// (a full disk) has another go before ssh is refused.
var devCertRenew = sshca.MaxTTL / 2

// devCert is the certificate of the printed ssh command's key. The CA
// signs at most sshca.MaxTTL (a day), and a dev gateway runs for longer:
// without renewal the printed command stopped working a day in, refused
// as "Permission denied (publickey)", which says nothing of why.
type devCert struct {
	ca   *sshca.CA
	pub  ssh.PublicKey
	path string
}

// renew signs a new certificate for the key and writes it where the
// printed command reads it (ssh reads CertificateFile at each start).
func (c *devCert) renew() error {
	// The in-process agent forwards an agent (ssh -A), as an agent
	// without --no-agent-forwarding does.
	cert, err := c.ca.Sign(c.pub, devHost, "dev-ssh", sshca.MaxTTL, true)
	if err != nil {
		return err
	}
	return writeAtomic(c.path, ssh.MarshalAuthorizedKey(cert), 0o600)
}

// keepFresh renews the certificate every devCertRenew until ctx ends.
func (c *devCert) keepFresh(ctx context.Context, logger *slog.Logger) {
	t := time.NewTicker(devCertRenew)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := c.renew(); err != nil {
			logger.Warn("could not renew the printed ssh command's certificate; it stops working when the one there expires (restart gateway dev for a new command)", "path", c.path, "err", err)
			continue
		}
		logger.Debug("renewed the printed ssh command's certificate", "path", c.path, "valid", sshca.MaxTTL)
	}
}

// proxyBinary is the gateway binary the printed ssh command runs as its
// ProxyCommand: self, unless `go run` built it, in which case go deletes
// it when dev stops and the command would break; a copy in the state dir
// is used then.
func proxyBinary(dir, self string) (string, error) {
	if !strings.Contains(self, string(filepath.Separator)+"go-build") {
		return self, nil
	}
	b, err := os.ReadFile(self)
	if err != nil {
		return "", err
	}
	dst := filepath.Join(dir, "bin", "gateway")
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return "", err
	}
	if err := writeAtomic(dst, b, 0o755); err != nil {
		return "", fmt.Errorf("copy the gateway binary for the ssh command: %w", err)
	}
	return dst, nil
}
