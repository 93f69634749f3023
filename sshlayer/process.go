package sshlayer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/shell"
)

// killGrace is how long Kill(KILL) waits for the process to exit before it
// closes the session channel. Some servers ignore "signal" requests: OpenSSH
// before 7.9, and any OpenSSH sshd for a root login (it refuses signalling
// without post-auth privilege separation, which root skips). Closing the
// channel makes this project's server kill the process group and makes sshd
// hang up a PTY session; sshd keeps a non-PTY command running until it exits
// on its own, and Wait waits for that.
var killGrace = 3 * time.Second

// probeTimeout bounds the liveness probe after a session ended without an
// exit status.
const probeTimeout = 10 * time.Second

// Spawn starts argv on the host as one shell command line: cd to opts.Dir,
// export opts.Env, exec argv with every word quoted. An invalid environment
// variable name fails before anything is sent. ctx bounds the process: when
// it ends the process is sent KILL and its session closed.
func (c *Client) Spawn(ctx context.Context, argv []string, opts hostgate.SpawnOptions) (hostgate.Process, error) {
	line, err := shell.CommandLine(argv, opts.Dir, opts.Env)
	if err != nil {
		return nil, fmt.Errorf("sshlayer: spawn: %w", err)
	}
	p, err := await(ctx, c, func() (*clientProcess, error) { return c.start(line, opts.PTY) }, func(p *clientProcess) { _ = p.sess.Close() })
	if err != nil {
		return nil, c.opErr("spawn", err)
	}
	if !c.track() {
		_ = p.sess.Close()
		return nil, ErrClientClosed
	}
	p.stopCtx = context.AfterFunc(ctx, func() { p.cancel(context.Cause(ctx)) })
	go p.wait()
	return p, nil
}

// start opens a session, asks for a PTY when wanted and execs line. It
// takes the spare session when there is one, or is about to be (and opens
// the next spare at once, its open going out with this command's
// request), so a command costs one round trip where a channel open plus
// an exec request took two, also the next of commands run one after
// another. A command without a spare opens the next once its own channel
// is open, with its exec request.
func (c *Client) start(line string, pty *hostgate.PTY) (*clientProcess, error) {
	return c.startOn(line, pty, true)
}

func (c *Client) startOn(line string, pty *hostgate.PTY, useSpare bool) (*clientProcess, error) {
	var (
		sess  *ssh.Session
		spare bool
	)
	if useSpare && pty == nil {
		sess, spare = c.takeSpareWait()
	}
	if sess == nil {
		var err error
		// A terminal's session opens with a small window, not the
		// spare's 1 MiB, which the host could fill before its reader
		// limits it (SetOutputWindow): a web terminal's page then had
		// that megabyte of its first flood to draw before a Ctrl-C's
		// prompt. It grows to ptyWindow as the reader keeps up; the
		// cost, against a server without early requests, is the
		// channel open's round trip the spare saves.
		open := c.newSession
		if pty != nil {
			open = func() (*ssh.Session, error) {
				if c.earlyReqs {
					return c.ssh.NewSessionEarlyWindow(ptyStartWindow)
				}
				return c.ssh.NewSessionWindow(ptyStartWindow)
			}
		}
		if sess, err = open(); err != nil {
			return nil, openSessionErr(err)
		}
	}
	// The next spare's open goes out with this command's request, once
	// the command holds its channel: where the server allows one session,
	// the spare must not take the command's place. (An early open, held
	// for its request, goes out first in whichever write comes first.)
	c.refillSpare()
	p := &clientProcess{c: c, sess: sess, pty: pty != nil, done: make(chan struct{})}
	if err := p.setup(line, pty); err != nil {
		_ = sess.Close()
		if spare && c.usable() == nil {
			// The spare may have gone stale (the server closed it): one
			// more try on a new channel before calling the command failed.
			return c.startOn(line, pty, false)
		}
		if oce := (*ssh.OpenChannelError)(nil); errors.As(err, &oce) {
			return nil, openSessionErr(err) // an early open, refused
		}
		return nil, err
	}
	return p, nil
}

// newSession opens a session channel. With a server that takes early
// requests it returns before the server's answer, and the command's
// request and first bytes go out right behind the open: a command on a
// channel of its own (the first on a connection, or one beside others)
// waits one round trip where it waited two. A refused open is then the
// request's error.
func (c *Client) newSession() (*ssh.Session, error) {
	if c.earlyReqs {
		return c.ssh.NewSessionEarly()
	}
	return c.ssh.NewSession()
}

// openSessionErr names a session channel's failed open.
func openSessionErr(err error) error {
	var oce *ssh.OpenChannelError
	if errors.As(err, &oce) && oce.Reason == ssh.ResourceShortage {
		return fmt.Errorf("open session: the host runs no more commands at once on this connection (a hostgate agent 64, sshd its MaxSessions, 10 by default): wait for one to end, or connect again: %w", err)
	}
	return fmt.Errorf("open session: %w", err)
}

// takeSpare returns the spare session, if one is open, and whether it was.
func (c *Client) takeSpare() (*ssh.Session, bool) {
	c.spareMu.Lock()
	defer c.spareMu.Unlock()
	s := c.spare
	c.spare = nil
	return s, s != nil
}

// takeSpareWait is takeSpare that, when the spare is being opened and no
// other caller waits for it, waits for it: its open went out before any
// this caller could send, so its answer comes first. Callers after the
// first open their own rather than queue for the one spare.
func (c *Client) takeSpareWait() (*ssh.Session, bool) {
	c.spareMu.Lock()
	opened := c.spareOpened
	if c.spare != nil || opened == nil || c.spareClaimed {
		c.spareMu.Unlock()
		return c.takeSpare()
	}
	c.spareClaimed = true
	c.spareMu.Unlock()
	<-opened
	c.spareMu.Lock()
	c.spareClaimed = false
	c.spareMu.Unlock()
	return c.takeSpare()
}

// refillSpare opens a spare session in the background unless one is open
// or opening. A failure (a server at its session limit) leaves none: the
// next command opens its own channel.
func (c *Client) refillSpare() {
	c.spareMu.Lock()
	if c.spare != nil || c.spareOpened != nil {
		c.spareMu.Unlock()
		return
	}
	opened := make(chan struct{})
	c.spareOpened = opened
	c.spareMu.Unlock()
	if !c.track() {
		c.spareMu.Lock()
		c.spareOpened = nil
		c.spareMu.Unlock()
		close(opened)
		return
	}
	go func() {
		defer c.wg.Done()
		s, err := c.ssh.NewSession()
		c.spareMu.Lock()
		c.spareOpened = nil
		if err == nil && c.spare == nil && c.usable() == nil {
			c.spare, s = s, nil
		}
		c.spareMu.Unlock()
		close(opened)
		if s != nil {
			_ = s.Close()
		}
	}()
}

func (p *clientProcess) setup(line string, pty *hostgate.PTY) error {
	var err error
	if p.stdin, err = p.sess.StdinPipe(); err != nil {
		return err
	}
	if p.stdout, err = p.sess.StdoutPipe(); err != nil {
		return err
	}
	if p.stderr, err = p.sess.StderrPipe(); err != nil {
		return err
	}
	if p.c.cfg.ForwardAgent != nil {
		// No reply wanted, as ssh -A asks: no round trip more per
		// command; a refusal leaves the process without SSH_AUTH_SOCK.
		if _, err := p.sess.SendRequest(agentRequest, false, nil); err != nil {
			return fmt.Errorf("request agent forwarding: %w", err)
		}
	}
	if pty != nil {
		term, cols, rows := pty.Term, pty.Cols, pty.Rows
		if term == "" {
			term = "xterm-256color"
		}
		if cols <= 0 {
			cols = 80
		}
		if rows <= 0 {
			rows = 24
		}
		modes := ssh.TerminalModes{ssh.ECHO: 1, ssh.TTY_OP_ISPEED: 38400, ssh.TTY_OP_OSPEED: 38400}
		if err := p.sess.RequestPty(term, rows, cols, modes); err != nil {
			return fmt.Errorf("request pty: %w", err)
		}
		p.sess.SetWindowLimit(ptyWindow)
	}
	if err := p.sess.Start(line); err != nil {
		if p.c.usable() == nil && strings.HasPrefix(err.Error(), "ssh: command ") {
			// x/crypto's words for an exec request the server refused,
			// "ssh: command LINE failed", are left out: the line is the
			// environment's values (a token) and every argument, to
			// any length, which the caller's logs would keep.
			if len(line) >= maxShellArg {
				return fmt.Errorf("exec: the host could not start the command: its command line is %d bytes, past the %d KiB a Linux host passes its shell as one argument (the arguments and the environment's values together): pass large data on stdin or in a file", len(line), maxShellArg>>10)
			}
			return errors.New("exec: the host could not start the command (it could not make a process: its shell missing, or, in a sandbox, no process left under its pids limit or its memory spent; the host's log says which)")
		}
		return fmt.Errorf("exec: %w", err)
	}
	return nil
}

// maxShellArg is Linux's bound on one argument (MAX_ARG_STRLEN, 32
// pages): the host's shell gets the whole command line as the one
// argument of -c, so a line this long cannot start there.
const maxShellArg = 128 << 10

// ptyWindow bounds what a terminal's host may print ahead of what its
// reader has taken: 1 MiB, where its window stops growing rather than at
// 8 MiB as a bulk channel's does (SetOutputWindow sets less). A terminal is read by a
// person's screen, whose reader may fall behind for good (the web
// terminal holds its output at the page's pace): what the window holds
// when they press Ctrl-C is still drawn before the prompt comes back, and
// the gateway holds it meanwhile. Grown under a flood, 7.7 MiB of yes
// arrived after a Ctrl-C (3.4 s of drawing in headless Chromium).
const ptyWindow = 1 << 20

// clientProcess is a command running in one SSH session.
type clientProcess struct {
	c      *Client
	sess   *ssh.Session
	pty    bool
	stdin  io.WriteCloser
	stdout io.Reader
	stderr io.Reader

	stopCtx func() bool   // unregisters the ctx hook; set before wait starts
	done    chan struct{} // closed by wait; err is set before
	err     error

	mu       sync.Mutex
	killedBy hostgate.Signal // set when Kill closed the channel after killGrace
	ctxErr   error           // set when ctx ended the process
	grace    *time.Timer
}

var _ hostgate.Process = (*clientProcess)(nil)
var _ hostgate.Resizer = (*clientProcess)(nil)

func (p *clientProcess) Stdin() io.WriteCloser { return p.stdin }
func (p *clientProcess) Stdout() io.Reader     { return p.stdout }
func (p *clientProcess) Stderr() io.Reader     { return p.stderr }

// Exited is closed once the server has said how the command ended (its
// exit status or signal), which may be long before Wait returns: OpenSSH's
// sshd keeps the session open as long as anything holds the command's
// output, a process left in the background say (x/crypto fork change 29).
func (p *clientProcess) Exited() <-chan struct{} { return p.sess.Exited() }

// Wait returns nil for exit status 0, *hostgate.ExitError for a non-zero
// status or a signal, an error matching ErrConnectionLost when the
// connection ended first, and ctx's cause when ctx ended the process.
func (p *clientProcess) Wait() error {
	<-p.done
	return p.err
}

// wait is owned by the client's WaitGroup; it ends when the session channel
// closes, which closing the connection forces.
func (p *clientProcess) wait() {
	defer p.c.wg.Done()
	werr := p.sess.Wait()
	p.stopCtx()
	p.mu.Lock()
	if p.grace != nil {
		p.grace.Stop()
	}
	killedBy, ctxErr := p.killedBy, p.ctxErr
	p.mu.Unlock()
	p.err = p.classify(werr, killedBy, ctxErr)
	_ = p.sess.Close()
	close(p.done)
}

func (p *clientProcess) classify(werr error, killedBy hostgate.Signal, ctxErr error) error {
	var ee *ssh.ExitError
	switch {
	case werr == nil:
		return nil
	case ctxErr != nil:
		return fmt.Errorf("sshlayer: process: %w", ctxErr)
	case errors.As(werr, &ee):
		if ee.Signal() != "" {
			return &hostgate.ExitError{Code: -1, Signal: hostgate.Signal(ee.Signal()), Msg: ee.Msg()}
		}
		return &hostgate.ExitError{Code: ee.ExitStatus(), Msg: ee.Msg()}
	case killedBy != "":
		return &hostgate.ExitError{Code: -1, Signal: killedBy, Msg: "session closed: the server ignored the signal"}
	}
	// The channel closed without an exit status: either the connection
	// died (the mux closes every channel before it reports its own end) or
	// the server closed the channel. A round trip tells them apart.
	if lost := p.c.lostErr(); lost != nil {
		return fmt.Errorf("sshlayer: process: %w", lost)
	}
	return fmt.Errorf("sshlayer: process: session closed without exit status: %w", werr)
}

// Kill sends sig to the process. For KILL, a process still running after
// killGrace has its session channel closed (see killGrace), and one whose
// exit the host told already has it closed at once, the status told kept.
// Kill after Wait returned is a no-op.
func (p *clientProcess) Kill(sig hostgate.Signal) error {
	sig, ok := sig.Canonical()
	if !ok {
		return fmt.Errorf("sshlayer: kill: unknown signal %q", sig)
	}
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.sess.Signal(ssh.Signal(sig)); err != nil {
		select {
		case <-p.done:
			return nil
		default:
		}
		return p.c.opErr("kill", err)
	}
	if sig != hostgate.SIGKILL {
		return nil
	}
	select {
	case <-p.sess.Exited():
		// The host told the exit already: what holds the session open is
		// not the process but its output's holders (a background process,
		// under OpenSSH's sshd), which the signal does not reach, and
		// killGrace would only delay the callers that kill to stop
		// waiting for them (hostgate's waitTold).
		p.mu.Lock()
		p.killedBy = sig
		p.mu.Unlock()
		_ = p.sess.Close()
		return nil
	default:
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.grace == nil {
		p.grace = time.AfterFunc(killGrace, func() {
			p.mu.Lock()
			p.killedBy = sig
			p.mu.Unlock()
			_ = p.sess.Close()
		})
	}
	return nil
}

// cancel ends the process because its ctx ended.
func (p *clientProcess) cancel(cause error) {
	p.mu.Lock()
	p.ctxErr = cause
	p.mu.Unlock()
	_ = p.sess.Signal(ssh.SIGKILL)
	_ = p.sess.Close()
}

// Resize changes the PTY's window size (an SSH window-change request).
func (p *clientProcess) Resize(cols, rows int) error {
	if !p.pty {
		return errors.New("sshlayer: resize: process has no pty")
	}
	if cols <= 0 || rows <= 0 {
		return fmt.Errorf("sshlayer: resize: invalid size %dx%d", cols, rows)
	}
	if err := p.sess.WindowChange(rows, cols); err != nil {
		return p.c.opErr("resize", err)
	}
	return nil
}

// SetOutputWindow bounds what the host may send of a PTY's output ahead
// of what is read to n bytes, from one packet (32 KiB) up to ptyWindow: a
// web terminal sets it to what its page draws in a fraction of a second
// (webterm.Windower), so that a slow page's Ctrl-C does not wait behind a
// full 1 MiB at the gateway. A process without a PTY keeps its window.
func (p *clientProcess) SetOutputWindow(n int) {
	if !p.pty {
		return
	}
	p.sess.SetWindowLimit(uint32(min(max(n, minOutputWindow), ptyWindow)))
}

// ptyStartWindow is what a terminal's host may send before its reader
// has read anything.
const ptyStartWindow = 64 << 10

// minOutputWindow is the least SetOutputWindow sets: one packet, which a
// host sends whole.
const minOutputWindow = 32 << 10

// alive reports whether the connection still answers a round trip.
func (c *Client) alive() bool {
	if c.usable() != nil || !c.track() {
		return false
	}
	reply := make(chan error, 1)
	go func() {
		defer c.wg.Done()
		_, _, err := c.ssh.SendRequest("keepalive@openssh.com", true, nil)
		reply <- err
	}()
	t := time.NewTimer(probeTimeout)
	defer t.Stop()
	select {
	case err := <-reply:
		return err == nil
	case <-c.done:
		return false
	case <-t.C:
		return true // unknown; do not claim a loss we have not seen
	}
}

// lostErr returns nil while the connection answers a round trip, else the
// reason it ended. An operation that failed with a bare io.EOF may have raced
// the connection's end: the mux closes every channel before it reports its
// own end, so only asking tells a refused request from a dead connection.
func (c *Client) lostErr() error {
	if c.alive() {
		return nil
	}
	<-c.done // the connection is closed or closing; watch publishes why
	return c.endErr()
}

// opErr wraps err from operation op, preferring the connection's end reason
// when the connection is gone.
func (c *Client) opErr(op string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrClientClosed) ||
		errors.Is(err, ErrConnectionLost) {
		return fmt.Errorf("sshlayer: %s: %w", op, err)
	}
	if lost := c.lostErr(); lost != nil {
		return fmt.Errorf("sshlayer: %s: %w", op, lost)
	}
	return fmt.Errorf("sshlayer: %s: %w", op, err)
}
