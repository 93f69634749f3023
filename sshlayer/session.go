//go:build unix

package sshlayer

import (
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/hostgate/hostgate/third_party/github.com/pkg/sftp"
	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/internal/shell"
	"github.com/hostgate/hostgate/internal/textcut"
)

// Bounds on what a client may set up in one session.
const (
	maxSessionEnv = 256       // env requests accepted per session
	maxEnvBytes   = 128 << 10 // total bytes of names and values
)

// session is one "session" channel (RFC 4254 §6). Its request loop runs on
// the channel handler's goroutine; the process it starts is owned by
// srvProcess, which the loop waits for before returning.
type session struct {
	c   *serverConn
	log *slog.Logger
	ch  ssh.Channel

	env      []string // client env requests, NAME=value, names validated
	envBytes int
	pty      *ptyRequest   // set by pty-req before the command starts
	proc     *srvProcess   // the running command; nil before exec/shell
	agent    *agentForward // the forwarded agent; nil unless granted
	sftpDone chan struct{}
	sftpSrv  *sftp.Server // the SFTP subsystem's server; nil without one
	started  bool
}

// session serves a session channel until it closes, then kills what it
// started and waits for it.
func (c *serverConn) session(nc ssh.NewChannel, log *slog.Logger) {
	ch, reqs, err := nc.Accept()
	if err != nil {
		return
	}
	s := &session{c: c, log: log, ch: ch}
	defer s.finish()
	for {
		select {
		case r, ok := <-reqs:
			if !ok {
				return
			}
			s.handle(r)
		case <-c.ctx.Done():
			return
		}
	}
}

// finish runs when the channel closed (or the connection went): the
// process group is killed and every goroutine of the session waited for.
func (s *session) finish() {
	if s.proc != nil {
		s.proc.terminate()
		s.proc.wait()
	}
	_ = s.ch.Close()
	if s.sftpSrv != nil {
		// Its receive loop may not be reading the channel (it waits
		// behind a request not answered, such as a long copy-data),
		// and a copy-data in progress would run on: Close ends both.
		_ = s.sftpSrv.Close()
	}
	if s.sftpDone != nil {
		<-s.sftpDone
	}
	if s.agent != nil {
		s.agent.close()
	}
}

func (s *session) reply(r *ssh.Request, ok bool) {
	if r.WantReply {
		_ = r.Reply(ok, nil)
	}
}

func (s *session) handle(r *ssh.Request) {
	switch r.Type {
	case "env":
		s.reply(r, s.setEnv(r.Payload))
	case "pty-req":
		if s.started || s.pty != nil || !s.c.permitPTY {
			s.reply(r, false)
			return
		}
		p, err := parsePtyRequest(r.Payload)
		if err != nil {
			s.reply(r, false)
			return
		}
		s.pty = p
		s.reply(r, true)
	case "window-change":
		w, err := parseWindowChange(r.Payload)
		if err != nil || s.pty == nil {
			s.reply(r, false)
			return
		}
		s.pty.Cols, s.pty.Rows = w.Cols, w.Rows
		if s.proc != nil {
			s.proc.resize(w.Cols, w.Rows)
		}
		s.reply(r, true)
	case "exec", "shell":
		if s.started {
			s.reply(r, false)
			return
		}
		var cmd string
		if r.Type == "exec" {
			var err error
			if cmd, err = parseExec(r.Payload); err != nil {
				s.reply(r, false)
				return
			}
		}
		s.start(r, r.Type, cmd)
	case "subsystem":
		name, err := parseSubsystem(r.Payload)
		if s.started || err != nil || name != "sftp" {
			s.reply(r, false)
			return
		}
		s.started = true
		s.audit("subsystem", name)
		s.reply(r, true)
		s.serveSFTP()
	case "signal":
		sig, err := parseSignal(r.Payload)
		if err != nil || s.proc == nil {
			s.reply(r, false)
			return
		}
		s.reply(r, s.proc.signal(sig) == nil)
	case agentRequest:
		s.reply(r, s.grantAgent())
	case "eow@openssh.com":
		// OpenSSH's ssh says its output failed (the reader of its
		// stdout went), to servers it takes for OpenSSH (serverVersion).
		s.reply(r, s.proc != nil && s.proc.endOutput())
	default:
		// x11-req, keepalive@openssh.com, …
		s.reply(r, false)
	}
}

// parseExec returns the command of an exec request (RFC 4254 §6.5).
func parseExec(payload []byte) (string, error) {
	var m struct{ Command string }
	if err := ssh.Unmarshal(payload, &m); err != nil {
		return "", fmt.Errorf("sshlayer: malformed exec request: %w", err)
	}
	return m.Command, nil
}

// parseSubsystem returns the name of a subsystem request (RFC 4254 §6.5).
func parseSubsystem(payload []byte) (string, error) {
	var m struct{ Name string }
	if err := ssh.Unmarshal(payload, &m); err != nil {
		return "", fmt.Errorf("sshlayer: malformed subsystem request: %w", err)
	}
	return m.Name, nil
}

// parseSignal returns the signal a signal request names (RFC 4254 §6.10),
// one of srvSignals.
func parseSignal(payload []byte) (syscall.Signal, error) {
	var m struct{ Signal string }
	if err := ssh.Unmarshal(payload, &m); err != nil {
		return 0, fmt.Errorf("sshlayer: malformed signal request: %w", err)
	}
	sig, ok := signalByName(m.Signal)
	if !ok {
		return 0, fmt.Errorf("sshlayer: signal %.32q is not one this server sends", m.Signal)
	}
	return sig, nil
}

// setEnv accepts an env request whose name is a valid shell name, within
// the session's bounds. The names are those a shell could export anyway.
// A value with a NUL byte is refused here: no process can be started with
// it (execve takes C strings), so accepting it failed the session's
// command instead, and only the agent's log said why.
func (s *session) setEnv(payload []byte) bool {
	var m struct{ Name, Value string }
	if s.started || ssh.Unmarshal(payload, &m) != nil || !shell.ValidName(m.Name) || strings.IndexByte(m.Value, 0) >= 0 {
		return false
	}
	n := len(m.Name) + len(m.Value)
	if len(s.env) >= maxSessionEnv || s.envBytes+n > maxEnvBytes {
		return false
	}
	s.env = append(s.env, m.Name+"="+m.Value)
	s.envBytes += n
	return true
}

func (s *session) audit(kind, cmd string) {
	cfg := s.c.srv.cfg
	s.log.Info("ssh session", "kind", kind, "command", textcut.Cut(cmd, 200), "pty", s.pty != nil)
	if cfg.OnSession != nil {
		cfg.OnSession(SessionInfo{
			User: s.c.sc.User(), RemoteAddr: addrString(s.c.sc.RemoteAddr()),
			Fingerprint: s.c.fingerprint, CertKeyID: s.c.certKeyID,
			Kind: kind, Command: cmd, PTY: s.pty != nil,
		})
	}
}

func (s *session) start(r *ssh.Request, kind, cmd string) {
	s.started = true
	p, err := startProcess(s, cmd)
	if err != nil {
		s.log.Warn("ssh start command", "err", err)
		s.reply(r, false)
		// The channel cannot carry anything more; close it (sshd does too).
		_ = s.ch.Close()
		return
	}
	s.audit(kind, cmd)
	s.proc = p
	s.reply(r, true)
	// The process's output may only start after the reply (RFC 4254 §6.5
	// clients expect the success reply first).
	p.run()
}

// serveSFTP runs the SFTP subsystem over the channel in its own goroutine,
// waited for by finish; exit-status 0 is sent when the client ends it.
func (s *session) serveSFTP() {
	s.sftpDone = make(chan struct{})
	// Answer reads as large as clients ask (up to OpenSSH's own limit):
	// pkg/sftp's concurrent reader takes a short read for EOF, so a
	// server capped at the 32 KiB default truncates large reads.
	dir, notice := workDir(s.c.srv.cfg.Dir)
	dir, _ = filepath.Abs(dir) // pkg/sftp answered REALPATH absolute
	opts := []sftp.ServerOption{sftp.WithServerWorkingDirectory(dir), sftp.WithMaxTxPacket(sftpMaxPacket)}
	if s.c.srv.cfg.SFTPReuseBuffers {
		opts = append(opts, sftp.WithAllocator())
	}
	srv, err := sftp.NewServer(newSFTPCompat(s.ch, dir), opts...)
	if err != nil {
		_ = s.ch.Close()
		close(s.sftpDone)
		return
	}
	s.sftpSrv = srv // for finish, on this goroutine
	go func() {
		defer close(s.sftpDone)
		if notice != "" {
			// OpenSSH's sftp prints it, as from sshd.
			_, _ = io.WriteString(s.ch.Stderr(), notice)
		}
		if err := srv.Serve(); err != nil && s.c.ctx.Err() == nil {
			s.log.Debug("sftp ended", "err", err)
		}
		_, _ = s.ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{0}))
		_ = srv.Close() // closes the channel
	}()
}
