//go:build unix

package sshlayer

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hostgate/hostgate/internal/accept"
)

// maxAgentConns bounds the connections to a session's forwarded agent open
// at once: each one is a channel to the client, and a program that dials
// the socket in a loop must not open them without end. ssh-add, git and
// ssh hold one each while they sign.
const maxAgentConns = 16

// agentForward is a session's forwarded agent (auth-agent-req@openssh.com,
// OpenSSH's PROTOCOL.agent): a Unix socket, mode 0600 in a directory of
// its own (0700), whose every connection is carried to the client on an
// auth-agent@openssh.com channel. Its accept loop and copies are owned by
// wg; close stops them, waits, and removes the socket and directory.
type agentForward struct {
	c    *serverConn
	dir  string
	path string // SSH_AUTH_SOCK
	ln   net.Listener

	ctx    context.Context // ends the copies; cancelled by close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex // guards conns
	conns int        // connections being carried, against maxAgentConns
	drops dropLog    // connections refused at maxAgentConns
}

// grantAgent answers auth-agent-req@openssh.com. Agent forwarding is
// granted as sshd grants it: the server must allow it (AgentForwarding,
// sshd's AllowAgentForwarding) and the key must permit it (a plain
// authorized key does; a certificate only with permit-agent-forwarding).
// OpenSSH asks before it starts the command and wants no reply, so a
// refusal shows only in the server's log.
func (s *session) grantAgent() bool {
	switch {
	case s.started:
		// The command's environment is already set.
		s.log.Info("agent forwarding refused: asked after the command started")
		return false
	case s.agent != nil:
		return true
	case !s.c.srv.cfg.AgentForwarding:
		s.log.Info("agent forwarding refused: off on this server (always in a sandbox; on a machine with agent --no-agent-forwarding)")
		return false
	case !s.c.permitAgent:
		s.log.Info("agent forwarding refused: key lacks permit-agent-forwarding")
		return false
	}
	a, err := s.c.listenAgent()
	if err != nil {
		s.log.Warn("agent forwarding: listen", "err", err)
		return false
	}
	s.agent = a
	s.log.Info("agent forwarding", "socket", a.path)
	return true
}

// listenAgent makes the socket and starts its accept loop.
func (c *serverConn) listenAgent() (*agentForward, error) {
	// MkdirTemp makes the directory 0700: only this user may reach the
	// socket inside, from its first moment (sshd's /tmp/ssh-XXXXXXXXXX).
	dir, err := os.MkdirTemp("", "ssh-")
	if err != nil {
		return nil, fmt.Errorf("agent socket directory: %w", err)
	}
	track := c.srv.cfg.AgentSockets
	if track != nil {
		track(dir, true)
	}
	path := filepath.Join(dir, fmt.Sprintf("agent.%d", os.Getpid()))
	var lc net.ListenConfig
	ln, err := lc.Listen(c.ctx, "unix", path)
	if err == nil {
		if err = os.Chmod(path, 0o600); err != nil {
			_ = ln.Close()
		}
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		if track != nil {
			track(dir, false)
		}
		return nil, fmt.Errorf("agent socket: %w", err)
	}
	a := &agentForward{c: c, dir: dir, path: path, ln: ln}
	a.ctx, a.cancel = context.WithCancel(c.ctx)
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		a.accept()
	}()
	return a, nil
}

// accept carries every connection to the socket to the client until the
// listener closes.
func (a *agentForward) accept() {
	for {
		uc, err := accept.Next(a.c.ctx, a.ln, func(err error, wait time.Duration) {
			a.c.log.Warn("agent socket accept failed for now; trying again", "socket", a.path, "err", err, "retry", wait)
		})
		if err != nil {
			return
		}
		a.mu.Lock()
		full := a.conns >= maxAgentConns
		if !full {
			a.conns++
		}
		a.mu.Unlock()
		if full {
			if n, ok := a.drops.drop(time.Now()); ok {
				a.c.log.Warn("agent connection refused: too many open in the session (logged at most once a minute)", "socket", a.path, "max", maxAgentConns, "refused", n)
			}
			_ = uc.Close()
			continue
		}
		release := func() { a.mu.Lock(); a.conns--; a.mu.Unlock() }
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			// Opened per connection, not ahead, as sshd does: the client
			// may refuse (ssh without -A for this session) and says why.
			// The wait for its answer ends with the session; an open
			// given up counts against maxAgentConns until answered.
			a.c.carry(a.ctx, uc, agentChannel, nil, release)
		}()
	}
}

// close stops accepting, ends every connection, waits for them, and
// removes the socket and its directory. A connection whose channel open
// the client has not answered yet is closed without waiting for the
// answer (serverConn.openChannel).
func (a *agentForward) close() {
	_ = a.ln.Close()
	a.cancel()
	a.wg.Wait()
	if err := os.RemoveAll(a.dir); err != nil {
		a.c.log.Warn("agent forwarding: remove socket directory", "dir", a.dir, "err", err)
	} else if track := a.c.srv.cfg.AgentSockets; track != nil {
		track(a.dir, false)
	}
	if h := a.c.srv.agentClosed; h != nil {
		h(a.dir)
	}
}
