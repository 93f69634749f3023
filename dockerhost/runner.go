package dockerhost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/hostgate/hostgate/internal/shell"
)

// stdinGrace is how long stdin may keep flowing after the output ended.
const stdinGrace = 5 * time.Second

var (
	errOutputLimit = errors.New("output limit exceeded")
	errTimeout     = errors.New("command timed out")
)

// ProcessRunner runs commands inside containers through the Docker exec
// API and enforces timeouts, cancellation and the combined output limit.
// Any of them destroys the whole container, not just the exec client: a
// killed docker exec client leaves its process running in the container.
type ProcessRunner struct {
	api DockerAPI
	// mem is the output memory of every command the runner runs; nil
	// keeps every output in memory whole.
	mem *outputMemory
	// destroy removes a container and everything in it; it must not depend
	// on the caller's (possibly cancelled) context.
	destroy func(containerID string) error
}

// process is one command to run with docker exec.
// ownEnv is the environment of the host's own commands in a container
// (tar, the checks): the container's environment is the caller's, and a
// PATH of theirs must not decide which tar runs, or whether one does.
var ownEnv = []string{"PATH=" + defaultPath}

type process struct {
	containerID string
	user        string
	argv        []string
	env         []string
	dir         string
	stdin       io.Reader // nil: stdin not attached
	// stdinUnread: the command may leave its stdin unread, and stdin
	// cannot fail (an exec request's): once the command's output ended
	// (it exited), its copy is cut at once, as the agent tunnel cuts it.
	// The engine reads no more of it then, and a stdin over what a pipe
	// holds kept the command stdinGrace past its exit, its timeout too.
	stdinUnread bool
	stdout      io.Writer
	stderr      io.Writer
}

// Exec runs req in containerID as user, collecting at most maxOutput bytes
// of stdout and stderr together. On timeout, output overflow or ctx ending
// it destroys the container and returns an *Error whose Code says which;
// every *Error of a command cut midway carries the output so far
// (Error.Output), in memory.
func (r *ProcessRunner) Exec(ctx context.Context, containerID, user string, req ExecRequest, maxOutput int64) (*ExecResult, error) {
	out, _, err := r.exec(ctx, containerID, user, req, maxOutput, nil, nil, nil)
	if err != nil {
		return nil, outputInMemory(err)
	}
	return out.Result()
}

// Ways an exec ran.
const (
	wayDocker   = iota // the Docker exec API
	wayRunner          // a CommandRunner (the agent tunnel)
	wayFallback        // the runner could not start it; Docker ran it
)

// exec is Exec through via when it is not nil, falling back to docker exec
// when via could not start the command. The timeout, the output budget,
// the destroy and the error codes are the same either way. notStarted, when
// set, gets via's error when it falls back; destroying, when set, is
// called with the error's code just before the container is destroyed,
// so that the execution is
// known to be ending by the host's hand before its agent sees the
// container go.
func (r *ProcessRunner) exec(ctx context.Context, containerID, user string, req ExecRequest, maxOutput int64, via CommandRunner, notStarted func(error), destroying func(code string)) (_ *ExecOutput, way int, err error) {
	start := time.Now()
	runCtx, cancel := context.WithTimeoutCause(ctx, time.Duration(req.TimeoutMs)*time.Millisecond, errTimeout)
	defer cancel()

	budget := &outputBudget{left: maxOutput}
	stdout := &limitedBuffer{budget: budget, out: &Output{mem: r.mem}}
	stderr := &limitedBuffer{budget: budget, out: &Output{mem: r.mem}}
	handedOut := false // the outputs went out in the error (Error.Output)
	defer func() {
		if err != nil && !handedOut {
			_ = stdout.out.Close()
			_ = stderr.out.Close()
		}
	}()
	stdin := func() io.Reader {
		if req.Stdin == "" {
			return nil
		}
		return strings.NewReader(req.Stdin)
	}
	argv := append([]string{req.Command}, req.Args...)
	way = wayDocker
	code, err := func() (int, error) {
		if via != nil {
			code, err := via.Run(runCtx, Command{Argv: argv, Env: req.Env, Dir: req.Cwd, Stdin: stdin(), Stdout: stdout, Stderr: stderr})
			switch {
			case !errors.Is(err, ErrNotStarted):
				way = wayRunner
				return code, err
			case runCtx.Err() != nil:
				way = wayRunner
				return -1, context.Cause(runCtx)
			}
			way = wayFallback
			if notStarted != nil {
				notStarted(err)
			}
		}
		p := process{
			containerID: containerID,
			user:        user,
			argv:        shellArgv(argv, req.Cwd, req.Env),
			env:         envList(req.Env),
			dir:         "/",
			stdout:      stdout,
			stderr:      stderr,
			stdin:       stdin(),
			stdinUnread: true,
		}
		return r.run(runCtx, p)
	}()
	// A CommandRunner returns as runCtx ends, and its copies of the
	// command's output may write a moment longer: what the answer holds,
	// or an error carries, is fixed here.
	budget.seal()
	if err != nil {
		// cut is e with what the command printed before it was cut (the
		// last lines of a test run that hung, of a command that killed
		// its agent): at most maxOutput bytes in all, as a result's. An
		// overflow keeps the bytes up to the limit; the rest was never
		// read, as the command was killed for it.
		cut := func(e *Error) *Error {
			e.Output = &ExecOutput{ExitCode: -1, Stdout: stdout.out, Stderr: stderr.out, DurationMs: time.Since(start).Milliseconds()}
			handedOut = true
			return e
		}
		var e *Error
		switch {
		case errors.Is(err, errOutputLimit):
			e = &Error{Code: CodeOutputLimit, Message: fmt.Sprintf("stdout and stderr exceeded %d bytes; the execution was destroyed", maxOutput)}
		case errors.Is(context.Cause(runCtx), errTimeout) && ctx.Err() == nil:
			e = &Error{Code: CodeTimeout, Message: fmt.Sprintf("command ran longer than %d ms; the execution was destroyed", req.TimeoutMs)}
		case ctx.Err() != nil && errors.Is(context.Cause(ctx), ErrStopping):
			// An operator's restart must not cost a busy execution its
			// workspace when a crash would not: adoption takes it back.
			how := "the command was cut"
			if way != wayRunner {
				// Docker's exec API cannot kill what it started: the
				// process outlives the attach the stop cut.
				how += " (the process docker exec started may still be running)"
			}
			return nil, way, cut(&Error{Code: CodeInterrupted, Message: context.Cause(ctx).Error() + ": " + how + "; the execution is kept for the next start", Err: context.Cause(ctx)})
		case ctx.Err() != nil:
			// Why the request ended: the caller left (net/http's plain
			// cancel), or a cause its server gave (the gateway stopping).
			why := "the caller went away"
			if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) && !errors.Is(c, context.DeadlineExceeded) {
				why = c.Error()
			}
			e = &Error{Code: CodeAborted, Message: why + "; the execution was destroyed", Err: context.Cause(ctx)}
		case errors.Is(err, errOutputSpool):
			// The gateway's disk, not the command: nothing about the
			// execution is wrong, so it is kept.
			how := "the command was cut"
			if way != wayRunner {
				how += " (the process docker exec started may still be running)"
			}
			// What it printed up to the write the disk refused is kept.
			return nil, way, cut(&Error{Code: CodeStorageUnavailable, Message: fmt.Sprintf("the gateway could not keep the command's output, which its output memory had no room for, in a file (%v): free space in its state dir, or retry when fewer commands with large output run; %s, the execution lives on", err, how), Err: err})
		case errors.Is(err, ErrRunnerLost):
			// Not the execution's end: the gateway attaches a new agent.
			why := "ended while the command ran (did the command kill it?)"
			if le := (*LostError)(nil); errors.As(err, &le) && le.Why != "" {
				why = le.Why + " while the command ran"
			}
			return nil, way, cut(&Error{Code: CodeAgentLost, Message: "the execution's agent " + why + ": its exit status and the rest of its output are unknown, and it may still be running, no longer bound by timeoutMs (the execution's runtime still is); later commands run as usual", Err: err})
		default:
			return nil, way, err
		}
		// An abort's too: over HTTP no one reads it, but a Go caller
		// whose own deadline cut the command does.
		cut(e)
		if destroying != nil {
			destroying(e.Code)
		}
		if derr := r.destroy(containerID); derr != nil {
			// Not destroyed, whatever the message said: it ran on,
			// and a Terminate found nothing left to end.
			e.Err = errors.Join(e.Err, &destroyError{err: derr})
			e.Message = strings.TrimSuffix(e.Message, "; the execution was destroyed") +
				fmt.Sprintf("; the execution ended, but the engine did not remove its container (%v): terminate it to try again", derr)
		}
		return nil, way, e
	}
	return &ExecOutput{
		ExitCode:   code,
		Stdout:     stdout.out,
		Stderr:     stderr.out,
		DurationMs: time.Since(start).Milliseconds(),
	}, way, nil
}

// destroyError is a container the runner had to destroy (a command's
// timeout, output flood or abort) and the engine did not remove.
type destroyError struct{ err error }

func (e *destroyError) Error() string { return "destroy container: " + e.err.Error() }
func (e *destroyError) Unwrap() error { return e.err }

// shellOwnEnv are the variables the shell sets in its children's
// environment (cd's PWD and OLDPWD, busybox ash's SHLVL), which docker
// exec does not give a command.
var shellOwnEnv = []string{"PWD", "OLDPWD", "SHLVL"}

// CommandOOMScoreAdj is the oom_score_adj of a sandbox's commands, those
// docker exec runs (shellArgv) and those its agent does (the gateway's
// keys preamble): out of memory, the kernel takes a command (half the
// limit added to its score) rather than the agent, whose end loses every
// command's channel and leaves the hog running. An unprivileged process
// may raise its own.
const CommandOOMScoreAdj = 500

// shellArgv is argv run through the image's /bin/sh in dir (WorkspaceDir
// when empty), so that a program it cannot find exits 127 and one it
// cannot execute 126, a missing dir 127, each with the shell's message on
// stderr, as over SSH (Host.Exec) and the agent tunnel. Run directly,
// docker exec answered 126 for all three, with runc's message on stdout.
// $0 is "sh", as the agent names the shell it starts, so the messages are
// the same word for word. The shell's own variables are unset unless env
// (the command's) sets them. The shell raises its oom_score_adj to
// CommandOOMScoreAdj, which the command inherits, as the agent's commands
// have it: docker exec runs the API's commands until the agent's tunnel
// is up, and they had 0, the agent's own.
func shellArgv(argv []string, dir string, env map[string]string) []string {
	if dir == "" {
		dir = WorkspaceDir
	}
	// As Host.Exec's command line (shell.CommandLine) and the agent
	// tunnel's script: `cd DIR || exit 127`, then `exec ARGV`, the words
	// passed as the script's arguments (shell.ExecArgs: without exec for
	// a program whose name starts with '-', which exec takes for an option).
	script := `echo ` + strconv.Itoa(CommandOOMScoreAdj) + ` 2>/dev/null >/proc/self/oom_score_adj; cd "$1" || exit 127; `
	for _, k := range shellOwnEnv {
		if _, ok := env[k]; !ok {
			script += "unset " + k + "; "
		}
	}
	program := ""
	if len(argv) > 0 {
		program = argv[0]
	}
	script += `shift; ` + shell.ExecArgs(program)
	return append([]string{"/bin/sh", "-c", script, "sh", dir}, argv...)
}

// stdinBufs holds the 256 KiB copy buffers of commands' stdin, so that
// each command with stdin does not allocate and zero its own.
var stdinBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// run runs p to completion and returns its exit code. ctx ending closes the
// attachment and returns context.Cause(ctx); the process itself may live on
// in the container, which is why callers destroy the container then.
func (r *ProcessRunner) run(ctx context.Context, p process) (int, error) {
	created, err := r.api.ContainerExecCreate(ctx, p.containerID, container.ExecOptions{
		User:         p.user,
		Cmd:          p.argv,
		Env:          p.env,
		WorkingDir:   p.dir,
		AttachStdin:  p.stdin != nil,
		AttachStdout: true,
		AttachStderr: true,
	})
	if err != nil {
		return -1, r.ctxErr(ctx, fmt.Errorf("create exec: %w", err))
	}
	hj, err := r.api.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return -1, r.ctxErr(ctx, fmt.Errorf("attach exec: %w", err))
	}
	defer hj.Close()
	stop := context.AfterFunc(ctx, hj.Close)
	defer stop()

	var (
		wg     sync.WaitGroup
		srcErr error // a failure of p.stdin itself (e.g. a checksum mismatch)
	)
	if p.stdin != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := &errReader{r: p.stdin}
			// Large writes: workspace tars are the big stdin here.
			bp := stdinBufs.Get().(*[]byte)
			_, werr := io.CopyBuffer(struct{ io.Writer }{hj.Conn}, src, *bp)
			stdinBufs.Put(bp)
			if src.err != nil {
				// Never let the command see a clean EOF after a bad read:
				// tar would happily end at a file boundary.
				srcErr = src.err
				hj.Close()
				return
			}
			if werr == nil {
				// Half-close: tar reading stdin waits for this EOF.
				_ = hj.CloseWrite()
			}
		}()
	}
	_, copyErr := stdcopy.StdCopy(p.stdout, p.stderr, hj.Reader)
	if copyErr != nil || p.stdinUnread {
		hj.Close() // unblock the stdin copier
	} else if p.stdin != nil {
		// The command is done with its output; give the stdin copier a
		// moment to finish (tar leaves trailing padding unread), then
		// unblock it should the daemon keep the connection open.
		grace := time.AfterFunc(stdinGrace, hj.Close)
		defer grace.Stop()
	}
	wg.Wait()
	switch {
	case srcErr != nil:
		return -1, srcErr
	case ctx.Err() != nil:
		return -1, context.Cause(ctx)
	case copyErr != nil:
		return -1, fmt.Errorf("read exec output: %w", copyErr)
	}
	return r.exitCode(ctx, created.ID)
}

func (r *ProcessRunner) ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

// exitCode waits for the daemon to record the exec's exit: the output
// stream can end a moment before the exit is processed.
func (r *ProcessRunner) exitCode(ctx context.Context, execID string) (int, error) {
	for i := 1; ; i++ {
		ins, err := r.api.ContainerExecInspect(ctx, execID)
		if err != nil {
			return -1, r.ctxErr(ctx, fmt.Errorf("inspect exec: %w", err))
		}
		if !ins.Running {
			return ins.ExitCode, nil
		}
		if i == 100 {
			return -1, errors.New("inspect exec: still running after its output ended")
		}
		t := time.NewTimer(time.Duration(min(i, 10)) * 10 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return -1, context.Cause(ctx)
		case <-t.C:
		}
	}
}

// outputBudget is the byte budget stdout and stderr share. A CommandRunner
// writes both from separate goroutines, hence the lock.
type outputBudget struct {
	mu     sync.Mutex
	left   int64
	sealed bool // the command's exec returned: no more writes
}

// errOutputSealed refuses a write after the command's exec returned.
var errOutputSealed = errors.New("output closed: the command's exec returned")

// seal refuses every later write, so the output can be read (or closed)
// while a runner's copier that has not seen its end yet still writes.
func (b *outputBudget) seal() {
	b.mu.Lock()
	b.sealed = true
	b.mu.Unlock()
}

// limitedBuffer is one of stdout/stderr sharing one byte budget, kept in
// an Output: an output may be maxOutputBytes (64 MiB), and the gateway
// runs many commands at once.
type limitedBuffer struct {
	budget *outputBudget
	out    *Output // guarded by budget.mu
}

func (w *limitedBuffer) Write(p []byte) (int, error) {
	w.budget.mu.Lock()
	defer w.budget.mu.Unlock()
	if w.budget.sealed {
		return 0, errOutputSealed
	}
	if int64(len(p)) > w.budget.left {
		n := w.budget.left
		if err := w.out.write(p[:n]); err != nil {
			return 0, err
		}
		w.budget.left = 0
		return int(n), errOutputLimit
	}
	if err := w.out.write(p); err != nil {
		return 0, err
	}
	w.budget.left -= int64(len(p))
	return len(p), nil
}

// errReader remembers a non-EOF read error of its source.
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF {
		e.err = err
	}
	return n, err
}

func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}
