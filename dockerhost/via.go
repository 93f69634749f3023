package dockerhost

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// Command is one Exec command as a CommandRunner gets it.
type Command struct {
	// Argv is the command and its arguments, run without a shell. Argv[0]
	// without a slash is looked up in the command's PATH, as docker exec
	// does.
	Argv []string
	// Env is added to the container's own environment (the one docker
	// exec gives: the image's and the provision env, HOSTNAME, HOME) and
	// wins over it.
	Env map[string]string
	// Dir is the absolute working directory.
	Dir string
	// Stdin is the command's stdin; nil means none (reads see EOF).
	Stdin io.Reader
	// Stdout and Stderr share the execution's output budget and are safe
	// for concurrent use. A write error (the budget is spent) must end Run
	// promptly with that error in its chain.
	Stdout, Stderr io.Writer
}

// CommandRunner runs Exec commands in a live execution by a way other than
// the Docker exec API: the execution's agent tunnel (internal/execapi).
// Exec still holds the execution mutex, enforces the timeout and output
// limit, destroys the container and maps errors; the runner only runs.
type CommandRunner interface {
	// Run runs c to completion as the execution's non-root user and
	// returns its exit code as docker exec reports it: 126 with the reason
	// on stdout when it cannot start, 128+N when signal N killed it. When
	// ctx ends, Run returns context.Cause(ctx) promptly; the command may
	// live on (Exec destroys the container then). An error wrapping
	// ErrNotStarted means the command did not start and read no stdin:
	// Exec then runs it through the Docker exec API instead; one wrapping
	// ErrRunnerLost, that the runner lost a started command.
	Run(ctx context.Context, c Command) (int, error)
}

// ErrNotStarted is wrapped by a CommandRunner's error when the command
// never started (no tunnel, the session refused), so that Exec falls back
// to docker exec.
var ErrNotStarted = errors.New("dockerhost: command not started")

// ErrRunnerLost is wrapped by a CommandRunner's error when it lost a
// command it had started (its connection ended without the exit status:
// the agent died, as when the command kills it). Exec answers
// CodeAgentLost and leaves the execution be.
var ErrRunnerLost = errors.New("dockerhost: the command runner ended before the command")

// LostError is a CommandRunner's error for a command it lost, saying how
// the runner was lost; it wraps ErrRunnerLost. Exec's agent_lost answer
// gives Why, which completes "the execution's agent …", in place of its
// guess that the command killed the agent.
type LostError struct {
	Why string
	Err error // how the command's connection ended
}

func (e *LostError) Error() string {
	return fmt.Sprintf("%v: the execution's agent %s: %v", ErrRunnerLost, e.Why, e.Err)
}

func (e *LostError) Unwrap() []error { return []error{ErrRunnerLost, e.Err} }

// ExecStats count which way Exec commands ran since the host started.
type ExecStats struct {
	// Runner counts commands a CommandRunner (the agent tunnel) ran.
	Runner int64
	// Docker counts commands the Docker exec API ran, fallbacks included.
	Docker int64
	// Fallbacks counts commands a CommandRunner could not start, which
	// then ran through Docker.
	Fallbacks int64
}

// SetExecVia makes Exec ask via for a CommandRunner of the execution
// before each command; a nil answer (no live tunnel) means docker exec.
// The image check, OOM and workspace commands always use docker exec. Call
// it before serving; nil turns it off.
func (h *Docker) SetExecVia(via func(executionID string) CommandRunner) {
	h.mu.Lock()
	h.via = via
	h.mu.Unlock()
}

// ExecStats returns the counters of Exec's ways.
func (h *Docker) ExecStats() ExecStats {
	return ExecStats{Runner: h.execRunner.Load(), Docker: h.execDocker.Load(), Fallbacks: h.execFallbacks.Load()}
}

func (h *Docker) runnerFor(executionID string) CommandRunner {
	h.mu.Lock()
	via := h.via
	h.mu.Unlock()
	if via == nil {
		return nil
	}
	return via(executionID)
}
