// Package localexec is a hostgate.Transport that runs processes on this
// machine with os/exec. It exists for tests: it is a real process transport
// (real pipes, real exit statuses, real signals) that honours Dir and Env but
// offers no PTY and does NOT own supervision — Kill and ctx cancellation
// reach only the direct child, so a persistent Host over it runs processes
// under the hostgate watchdog.
package localexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/shell"
)

// Transport spawns local processes. The zero value is ready to use.
type Transport struct {
	// Credential, when set, runs processes as that user (the test process
	// must be root): tests use it to see permission errors.
	Credential *syscall.Credential

	mu    sync.Mutex
	procs map[*process]struct{}
}

var _ hostgate.Transport = (*Transport)(nil)

// Spawn starts argv (looked up in PATH) with opts.Dir as working directory
// (the current one when empty) and opts.Env added to this process's
// environment. Cancelling ctx sends SIGKILL to the direct child only.
func (t *Transport) Spawn(ctx context.Context, argv []string, opts hostgate.SpawnOptions) (hostgate.Process, error) {
	if len(argv) == 0 {
		return nil, errors.New("localexec: empty argv")
	}
	if opts.PTY != nil {
		return nil, fmt.Errorf("localexec: pty: %w", hostgate.ErrNotSupported)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = opts.Dir
	if t.Credential != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: t.Credential}
	}
	cmd.Env = os.Environ()
	for k, v := range opts.Env {
		if !shell.ValidName(k) {
			return nil, fmt.Errorf("localexec: environment variable name %q is not a valid shell name", k)
		}
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("localexec: stdin: %w", err)
	}
	p := &process{t: t, cmd: cmd, stdin: stdin, done: make(chan struct{})}
	// io.Pipe, not cmd.StdoutPipe: os/exec then copies until every holder
	// of the pipe (grandchildren too) has closed it, so Wait returns only
	// when the output streams are closed, as hostgate.Process requires.
	var outW, errW *io.PipeWriter
	p.stdout, outW = io.Pipe()
	p.stderr, errW = io.Pipe()
	cmd.Stdout, cmd.Stderr = outW, errW
	if err := cmd.Start(); err != nil {
		_ = stdin.Close()
		return nil, fmt.Errorf("localexec: start %s: %w", argv[0], err)
	}
	t.track(p, true)
	go func() {
		err := cmd.Wait()
		outW.Close()
		errW.Close()
		p.err = convert(err)
		t.track(p, false)
		close(p.done)
	}()
	return p, nil
}

// Pids returns the process ids of the direct children still running, so a
// test can simulate a lost connection by killing them from outside.
func (t *Transport) Pids() []int {
	t.mu.Lock()
	defer t.mu.Unlock()
	var pids []int
	for p := range t.procs {
		pids = append(pids, p.cmd.Process.Pid)
	}
	return pids
}

func (t *Transport) track(p *process, add bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.procs == nil {
		t.procs = make(map[*process]struct{})
	}
	if add {
		t.procs[p] = struct{}{}
	} else {
		delete(t.procs, p)
	}
}

// process is one running child. The goroutine started by Spawn owns cmd.Wait
// and closes done after setting err.
type process struct {
	t      *Transport
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *io.PipeReader
	stderr *io.PipeReader
	done   chan struct{}
	err    error
}

func (p *process) Stdin() io.WriteCloser { return p.stdin }
func (p *process) Stdout() io.Reader     { return p.stdout }
func (p *process) Stderr() io.Reader     { return p.stderr }

func (p *process) Wait() error {
	<-p.done
	return p.err
}

// Pid is the child's process id.
func (p *process) Pid() int { return p.cmd.Process.Pid }

func (p *process) Kill(sig hostgate.Signal) error {
	sig, _ = sig.Canonical()
	select {
	case <-p.done:
		return nil
	default:
	}
	s, ok := signals[sig]
	if !ok {
		return fmt.Errorf("localexec: unknown signal %q", sig)
	}
	err := p.cmd.Process.Signal(s)
	if errors.Is(err, os.ErrProcessDone) {
		return nil
	}
	return err
}

var signals = map[hostgate.Signal]syscall.Signal{
	"ABRT": syscall.SIGABRT, "ALRM": syscall.SIGALRM, "FPE": syscall.SIGFPE,
	"HUP": syscall.SIGHUP, "ILL": syscall.SIGILL, "INT": syscall.SIGINT,
	"KILL": syscall.SIGKILL, "PIPE": syscall.SIGPIPE, "QUIT": syscall.SIGQUIT,
	"SEGV": syscall.SIGSEGV, "TERM": syscall.SIGTERM, "USR1": syscall.SIGUSR1,
	"USR2": syscall.SIGUSR2,
}

// convert turns os/exec's wait error into the hostgate form.
func convert(err error) error {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return err
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() {
		for n, s := range signals {
			if s == ws.Signal() {
				return &hostgate.ExitError{Code: -1, Signal: n}
			}
		}
		// The other names sshlayer's server has beyond RFC 4254's
		// (srvSignals: CONT, STOP, TSTP, WINCH) end no process.
		switch ws.Signal() {
		case syscall.SIGBUS:
			return &hostgate.ExitError{Code: -1, Signal: "BUS"}
		case syscall.SIGTRAP:
			return &hostgate.ExitError{Code: -1, Signal: "TRAP"}
		}
		// What sshlayer's server tells hostgate's client of a signal
		// it has no name for (session_process.go's sendExit), so a
		// test over this transport sees what it would over SSH.
		return &hostgate.ExitError{Code: 128 + int(ws.Signal())}
	}
	return &hostgate.ExitError{Code: ee.ExitCode()}
}
