package execapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/hostgate/hostgate/internal/yamux"
	"github.com/hostgate/hostgate/third_party/github.com/pkg/sftp"
	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/dockerhost"
	"github.com/hostgate/hostgate/internal/gateway"
	"github.com/hostgate/hostgate/internal/proxyproto"
	"github.com/hostgate/hostgate/sshlayer"
)

// Certify signs a user certificate for pub with principal (an execution
// id), as the gateway's CA does for callers (sshca.CA.Sign).
type Certify func(pub ssh.PublicKey, principal string) (*ssh.Certificate, error)

// Runner returns a CommandRunner that runs commands through executionID's
// live agent tunnel (one SSH connection of the gateway's own, kept while
// the tunnel lives), or nil when there is none: no agent, the tunnel is
// down or being re-attached, the agent left a command's channel unopened
// or a ping unanswered and has not answered one since, or
// AgentsConfig.Certify is not set. It is dockerhost.Docker.SetExecVia's
// function.
func (a *Agents) Runner(executionID string) dockerhost.CommandRunner {
	if a.cfg.Certify == nil {
		return nil
	}
	a.mu.Lock()
	r := a.runs[executionID]
	a.mu.Unlock()
	if r == nil {
		return nil
	}
	r.mu.Lock()
	// A suspect agent (a command's channel did not open in time, a ping
	// went unanswered) is being pinged: docker exec runs commands until
	// it answers.
	up := r.tunnel != nil && !r.suspect
	r.mu.Unlock()
	if !up {
		return nil
	}
	return &tunnelRunner{a: a, r: r}
}

// agentConn is the gateway's own SSH connection to an execution's agent,
// over one stream of its tunnel, and the environment docker exec gives a
// command there.
type agentConn struct {
	c     *sshlayer.Client
	sess  *yamux.Session  // the tunnel c runs over
	ended <-chan struct{} // closed once sess ended and why is known (run.lostReason)
	env   []string        // nil: the environment cannot be reproduced (readEnviron failed)
}

// setTunnel records sess as r's live tunnel; clearTunnel forgets it, closes
// the gateway's connection over it and waits for Run's goroutines. Both run
// on r's loop goroutine, around the tunnel's registration.
func (r *run) setTunnel(sess *yamux.Session, callers bool, ended <-chan struct{}) {
	r.mu.Lock()
	r.tunnel, r.callers, r.ended = sess, callers, ended
	r.suspect = false
	r.mu.Unlock()
}

func (r *run) clearTunnel() {
	r.mu.Lock()
	r.tunnel = nil
	conn := r.conn
	r.conn = nil
	r.mu.Unlock()
	if conn != nil {
		_ = conn.c.Close()
	}
	r.runs.Wait()
}

// connect returns the live gateway connection to r's agent, dialing one
// over the tunnel when there is none. Concurrent callers share one dial.
func (a *Agents) connect(ctx context.Context, r *run) (*agentConn, error) {
	select {
	case r.dialing <- struct{}{}:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	defer func() { <-r.dialing }()
	r.mu.Lock()
	sess, callers, conn, ended := r.tunnel, r.callers, r.conn, r.ended
	r.mu.Unlock()
	if conn != nil {
		select {
		case <-conn.c.Done():
		default:
			return conn, nil
		}
	}
	if sess == nil {
		return nil, errors.New("tunnel down")
	}
	conn, err := a.dial(ctx, r, sess, callers)
	if err != nil {
		return nil, err
	}
	conn.ended = ended
	r.mu.Lock()
	if r.tunnel != sess {
		// The tunnel ended while dialing: clearTunnel did not see conn.
		r.mu.Unlock()
		_ = conn.c.Close()
		return nil, errors.New("tunnel down")
	}
	old := r.conn
	r.conn = conn
	r.mu.Unlock()
	if old != nil {
		_ = old.c.Close()
	}
	return conn, nil
}

// dial opens the gateway's SSH connection over a new stream of sess: a
// short certificate for the principal the agent requires (the execution
// id), the execution's pinned host key. Then it reads the container's
// environment over SFTP.
func (a *Agents) dial(ctx context.Context, r *run, sess *yamux.Session, callers bool) (*agentConn, error) {
	t0 := time.Now()
	cert, err := a.cfg.Certify(a.key.Signer.PublicKey(), r.id)
	if err != nil {
		return nil, fmt.Errorf("certificate: %w", err)
	}
	signer, err := ssh.NewCertSigner(cert, a.key.Signer)
	if err != nil {
		return nil, fmt.Errorf("certificate: %w", err)
	}
	var stream net.Conn
	if callers {
		// Shared by every API call: the gateway names no caller.
		stream, err = gateway.OpenCallerStream(ctx, sess, proxyproto.Header{})
	} else {
		stream, err = sess.OpenStreamContext(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("open stream: %w", err)
	}
	c, err := sshlayer.Connect(ctx, stream, sshlayer.Auth{User: "hostgate", Signer: signer, HostKey: ssh.FingerprintSHA256(r.signer.PublicKey())})
	if err != nil {
		_ = stream.Close()
		return nil, fmt.Errorf("ssh: %w", err)
	}
	// SFTP calls take no ctx: closing the connection ends them.
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	env, err := a.readEnviron(c.SSH(), a.environPaths, a.environForged)
	if !stop() {
		return nil, context.Cause(ctx)
	}
	if err != nil && sess.IsClosed() {
		// The tunnel ended meanwhile (the gateway stopping, the agent
		// gone): nothing to warn about, and nothing to keep.
		_ = c.Close()
		return nil, fmt.Errorf("tunnel down while reading the container's environment: %w", err)
	}
	if err != nil {
		// Kept with no environment: Run then refuses at once, and docker
		// exec runs this connection's commands, without a dial each.
		a.log.Warn("the container's environment cannot be reproduced; its API commands use docker exec", "execution", r.id, "err", err)
	}
	a.log.Info("gateway connected to the execution agent", "execution", r.id, "took", time.Since(t0))
	return &agentConn{c: c, sess: sess, env: env}, nil
}

// readEnviron reads the environment of the container's init (pid 1, the
// execution's user, started with the environment the engine gives every
// process of the container: the image's PATH, HOSTNAME, HOME from the
// container's passwd, the container's env). docker exec gives commands the
// same, plus the exec's env, which a pooled container's provision env
// travels in (dockerhost adds it to every Command). The agent's own
// /proc/self/environ is not readable: it makes itself non-dumpable to
// guard its keys. When PID 1 is the deadline (dockerhost's DeadlineTool),
// non-dumpable too, the copy it wrote is read: in its own directory
// (deadline.InitEnvironFile), or in /dev/shm (deadline.EnvironFile) in a
// container made before PID 1 had a uid of its own. The first of paths
// that opens counts, but never forged.path in a container that has
// forged.dir.
func readEnviron(c *ssh.Client, paths []string, forged forgedCopy) ([]string, error) {
	sc, err := sftp.NewClient(c)
	if err != nil {
		return nil, fmt.Errorf("sftp: %w", err)
	}
	defer func() { _ = sc.Close() }()
	var f *sftp.File
	var errs []error
	for _, p := range paths {
		if p == forged.path {
			if _, err := sc.Stat(forged.dir); err == nil {
				errs = append(errs, fmt.Errorf("%s: not read: the container has %s, where PID 1 writes its copy, so a file here is sandbox code's", p, forged.dir))
				break
			}
		}
		if f, err = sc.Open(p); err == nil {
			break
		}
		errs = append(errs, fmt.Errorf("%s: %w", p, err))
	}
	if f == nil {
		return nil, fmt.Errorf("read environment: %w", errors.Join(errs...))
	}
	defer func() { _ = f.Close() }()
	// Plain reads: /proc files stat as empty, which ReadFrom-style
	// helpers would take for their size.
	b, err := io.ReadAll(io.LimitReader(struct{ io.Reader }{f}, maxEnviron+1))
	if err != nil {
		return nil, fmt.Errorf("read environment: %w", err)
	}
	return parseEnviron(b)
}

// forgedCopy names the environment copy of containers made before PID 1
// had a uid of its own (deadline.EnvironFile, in /dev/shm, which every
// process of the container may write) and the directory that PID 1 of a
// newer one writes its copy in instead (deadline.InitDir). Where that
// directory is, a file at path was made by sandbox code, maybe to choose
// what the gateway's commands start with (PATH, LD_PRELOAD), when PID 1
// could not write its own copy.
type forgedCopy struct{ path, dir string }

// errTunnelBusy means maxTunnelCommands commands are running through the
// tunnel already.
var errTunnelBusy = errors.New("execapi: the tunnel runs its maximum of commands")

// maxScriptLine is Linux's MAX_ARG_STRLEN, the longest single argument
// execve takes, its NUL included. The agent runs a command's script as
// `sh -c SCRIPT`, one argument, where docker exec passes the command's
// argv word by word: 200 arguments of 1000 bytes ran under docker exec
// but failed through the agent (E2BIG), answered 126 as a spent pids
// limit. A longer script goes to docker exec.
const maxScriptLine = 128 << 10

// errScriptTooLong means a command's script is longer than one execve
// argument may be.
var errScriptTooLong = fmt.Errorf("execapi: the command's script is over %d bytes, the most one argument of execve may hold", maxScriptLine-1)

// tunnelRunner runs commands over r's agent tunnel.
type tunnelRunner struct {
	a *Agents
	r *run
}

var _ dockerhost.CommandRunner = (*tunnelRunner)(nil)

// maxTunnelCommands bounds the commands one execution runs through its
// tunnel at once; more go through docker exec. It is the agent's own bound
// (sessions per SSH connection): a command costs the agent goroutines and
// a child process, no OS thread (it waits on a pidfd in Go's poller, and
// a sandbox's agent makes its threads as it starts), so a burst no
// longer needs docker exec to keep the agent's threads under the pids
// limit. docker exec is the slow way: the engine starts its commands one
// after the other, about 0.5 s each on a loaded 2-core machine.
const maxTunnelCommands = sshlayer.DefaultMaxSessions

// runGoroutines is how many goroutines one Run starts; all are counted in
// run.runs, so that a wedged agent never blocks Run past its ctx: what
// Run stops waiting for, the tunnel's end releases (clearTunnel).
const runGoroutines = 5

// hold counts n goroutines of a Run in r.runs while the tunnel is up.
func (r *run) hold(n int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tunnel == nil {
		return false
	}
	r.runs.Add(n)
	return true
}

// Run implements dockerhost.CommandRunner with one SSH session: the agent
// runs `sh -c SCRIPT` (commandScript) as the execution's user.
func (t *tunnelRunner) Run(ctx context.Context, c dockerhost.Command) (int, error) {
	notStarted := func(err error) (int, error) {
		if ctx.Err() != nil {
			return -1, context.Cause(ctx)
		}
		return -1, fmt.Errorf("%w: agent tunnel: %w", dockerhost.ErrNotStarted, err)
	}
	// Until the agent has opened the command's channel nothing was sent
	// that could start it: past OpenTimeout docker exec may run it.
	openCtx, cancel := context.WithTimeoutCause(ctx, t.a.cfg.OpenTimeout, errNoChannel{t.a.cfg.OpenTimeout})
	defer cancel()
	conn, err := t.a.connect(openCtx, t.r)
	if err != nil {
		if errors.As(context.Cause(openCtx), new(errNoChannel)) && ctx.Err() == nil {
			t.r.suspectAgent()
		}
		return notStarted(err)
	}
	if conn.env == nil {
		return notStarted(errNoEnviron)
	}
	line, err := commandScript(conn.env, c.Argv, c.Env, c.Dir)
	if err != nil {
		return notStarted(err)
	}
	if len(line) >= maxScriptLine {
		return notStarted(errScriptTooLong)
	}
	select {
	case t.r.commands <- struct{}{}:
		defer func() { <-t.r.commands }()
	default:
		return notStarted(errTunnelBusy)
	}
	if !t.r.hold(runGoroutines) {
		return notStarted(errors.New("tunnel down"))
	}
	p, err := t.start(ctx, openCtx, conn, line)
	if errors.As(err, new(errNoChannel)) {
		t.r.suspectAgent()
	}
	if errors.Is(err, errRefused) {
		// The agent could not fork the command's shell: in a sandbox, its
		// pids limit (or memory) is spent. docker exec cannot do better
		// there (runc's init needs pids too, and fails), only slower: each
		// failed start costs the engine about half a second, one after the
		// other, and a burst of them ran past the commands' timeouts.
		t.r.runs.Add(1 - runGoroutines)
		if _, werr := io.WriteString(c.Stdout, refusedMessage); werr != nil {
			return -1, werr
		}
		return 126, nil
	}
	if err != nil {
		t.r.runs.Add(1 - runGoroutines)
		if errors.Is(err, errExecUnanswered) && ctx.Err() == nil {
			return -1, t.lost(ctx, conn, err)
		}
		return notStarted(err)
	}
	defer func() { _ = p.sess.Close() }()

	// Stdin as docker exec feeds it: write errors (the command exited
	// without reading it all) are not the command's failure.
	go func() {
		defer t.r.runs.Done()
		if c.Stdin != nil {
			_, _ = io.Copy(p.stdin, c.Stdin)
		}
		_ = p.stdin.Close()
	}()
	// The copies end at the channel's EOF; a failed write (the output
	// budget) ends Run, whose deferred Close stops the command's output.
	outputs := make(chan error, 2)
	for _, o := range []struct {
		w io.Writer
		r io.Reader
	}{{c.Stdout, p.stdout}, {c.Stderr, p.stderr}} {
		go func() {
			defer t.r.runs.Done()
			_, err := io.Copy(o.w, o.r)
			outputs <- err
		}()
	}
	waited := make(chan error, 1)
	go func() {
		defer t.r.runs.Done()
		waited <- p.sess.Wait()
	}()

	// Output sent before the exit status may still be in the pipes: wait
	// for both copies and the exit.
	var werr error
	for exited, copied := false, 0; !exited || copied < 2; {
		select {
		case werr = <-waited:
			exited = true
		case err := <-outputs:
			copied++
			if err != nil {
				return -1, err
			}
		case <-ctx.Done():
			return -1, context.Cause(ctx)
		}
	}
	var ee *ssh.ExitError
	switch {
	case werr == nil:
		return 0, nil
	case errors.As(werr, &ee) && ee.Signal() != "":
		return signalExit(ee.Signal())
	case errors.As(werr, &ee):
		return ee.ExitStatus(), nil
	}
	// No exit status: the session ended under the command (the agent
	// died, or the gateway closed its tunnel as unresponsive).
	return -1, t.lost(ctx, conn, werr)
}

// lost is the error of a command whose session ended under it, err, with
// the agent's end: the tunnel's loop learns how the agent ended a moment
// later.
func (t *tunnelRunner) lost(ctx context.Context, conn *agentConn, err error) error {
	verdict := time.NewTimer(endedWait)
	select {
	case <-conn.ended:
	case <-verdict.C:
	case <-ctx.Done():
	}
	verdict.Stop()
	if kill := t.r.killVerdict(); kill != nil {
		// The agent was killed as stopped, or is about to be: the
		// kill is bounded (killStoppedTimeout).
		select {
		case <-kill:
		case <-ctx.Done():
		}
	}
	if why := t.r.lostReason(conn.sess); why != "" {
		return &dockerhost.LostError{Why: why, Err: err}
	}
	return fmt.Errorf("execapi: agent tunnel: %w: %w", dockerhost.ErrRunnerLost, err)
}

// errNoChannel means the agent did not open a command's channel within
// AgentsConfig.OpenTimeout.
type errNoChannel struct{ after time.Duration }

func (e errNoChannel) Error() string {
	return fmt.Sprintf("execapi: the agent did not open the command's channel within %v", e.after)
}

// session is one started command.
type session struct {
	sess           *ssh.Session
	stdin          io.WriteCloser
	stdout, stderr io.Reader
}

// start opens a session, bounded by open, and starts line in it, bounded
// by ctx: the SSH library's calls take no ctx, so they run on a goroutine
// counted in r.runs (one of runGoroutines). A session that opens after
// open ended is closed unused: its command was never asked for, so docker
// exec may run it instead; one that starts after ctx ended is closed.
func (t *tunnelRunner) start(ctx, open context.Context, conn *agentConn, line string) (*session, error) {
	type started struct {
		p   *session
		err error
	}
	opened := make(chan error) // unbuffered: a send means the caller took it
	done := make(chan started)
	go func() {
		defer t.r.runs.Done()
		sess, err := conn.c.SSH().NewSession()
		select {
		case opened <- err:
		case <-open.Done():
			if err == nil {
				_ = sess.Close()
			}
			return
		}
		if err != nil {
			return
		}
		if testHookChannelOpened != nil {
			testHookChannelOpened()
		}
		p, err := startSession(sess, line)
		select {
		case done <- started{p, err}:
		case <-ctx.Done():
			if err == nil {
				_ = p.sess.Close()
			}
		}
	}()
	select {
	case err := <-opened:
		if err != nil {
			return nil, fmt.Errorf("open session: %w", err)
		}
	case <-open.Done():
		return nil, context.Cause(open)
	}
	// The exec request is on its way, and the command may start from
	// now on. An agent that leaves it unanswered for OpenTimeout is
	// pinged at once, as one that left the channel unopened: found
	// stopped, it is killed and its tunnel closed, which ends the request
	// (errExecUnanswered); a slow one is waited for. The watch's own pings
	// found a stopped agent only after up to twice PingTimeout.
	answer := time.NewTimer(t.a.cfg.OpenTimeout)
	defer answer.Stop()
	for {
		select {
		case s := <-done:
			return s.p, s.err
		case <-answer.C:
			t.r.suspectAgent()
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// testHookChannelOpened, when set, runs as a command's channel opened,
// before its exec request is sent.
var testHookChannelOpened func()

// startSession starts line in sess.
func startSession(sess *ssh.Session, line string) (*session, error) {
	p := &session{sess: sess}
	var err error
	if p.stdin, err = sess.StdinPipe(); err == nil {
		if p.stdout, err = sess.StdoutPipe(); err == nil {
			if p.stderr, err = sess.StderrPipe(); err == nil {
				err = sess.Start(line)
			}
		}
	}
	if err != nil {
		_ = sess.Close()
		if err.Error() == fmt.Sprintf("ssh: command %v failed", line) {
			// The agent answered the exec request no (x/crypto's
			// Session.Start words a refusal so, and nothing else).
			return nil, fmt.Errorf("start: %w", errRefused)
		}
		if errors.Is(err, io.EOF) {
			// The channel closed with the request sent: the agent may
			// have started the command.
			return nil, fmt.Errorf("start: %w: %w", errExecUnanswered, err)
		}
		return nil, fmt.Errorf("start: %w", err)
	}
	return p, nil
}

// errExecUnanswered means the command's channel closed before the agent
// answered its exec request (the agent was lost): the command may have
// started, so docker exec must not run it again.
var errExecUnanswered = errors.New("execapi: the agent's tunnel ended before it answered the exec request")

// errRefused means the agent refused to start a command: it could not
// start its shell (sshlayer refuses the exec request when the fork fails).
var errRefused = errors.New("execapi: the agent could not start the command")

// refusedMessage is what a command the agent refused prints, with exit
// code 126, in the words docker exec uses for a command runc cannot start.
const refusedMessage = ociPrefix + "the execution's agent could not start a process for it (the execution's processes and threads may be at its pids limit, or its memory spent): unknown\r\n"
