package dockerhost

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Error codes callers branch on; the gateway maps them to HTTP statuses
// (invalid_request 400, not_found 404, gone 410, conflict 409, timeout,
// output_limit and aborted as the execution's end, agent_lost 502,
// interrupted 503, storage_unavailable 503, busy 503).
const (
	CodeInvalidRequest = "invalid_request"
	CodeNotFound       = "not_found"
	CodeGone           = "gone"
	CodeTimeout        = "timeout"
	CodeOutputLimit    = "output_limit"
	CodeAborted        = "aborted"
	CodeConflict       = "conflict"
	// CodeAgentLost: the command's runner (the execution's agent) ended
	// before the command did, as when the command kills it; the command's
	// result is unknown, it may still run (bound by the execution's
	// runtime, no longer by its timeout), and the execution lives on.
	CodeAgentLost = "agent_lost"
	// CodeInterrupted: the command was cut because its caller's server is
	// stopping (ErrStopping), and the execution is kept, for the server's
	// next start to adopt. A command the agent ran was killed; one docker
	// exec ran may still run, bound by the execution's runtime. A
	// checkpoint, provision or restore cut so leaves nothing of itself:
	// no checkpoint, no new execution, the source execution unchanged.
	CodeInterrupted = "interrupted"
	// CodeStorageUnavailable: the gateway's checkpoint storage refused a
	// write (full, read-only, not writable); the execution lives on.
	CodeStorageUnavailable = "storage_unavailable"
	// CodeBusy: the host runs as many executions as Config.MaxLive
	// allows; a provision or restore is refused, making nothing, until
	// one ends (terminated, or at its runtime deadline).
	CodeBusy = "busy"
)

// ErrStopping, as the cause of the context an Exec runs under (wrapped or
// not), says the caller's server is stopping rather than the caller gone:
// the command is cut but the execution is kept (CodeInterrupted). Any other
// end of the context destroys the execution (CodeAborted). Checkpoint,
// Provision and Restore answer CodeInterrupted for it too, rather than an
// engine failure.
var ErrStopping = errors.New("dockerhost: the server is stopping")

// interrupted returns the CodeInterrupted *Error of an operation whose ctx
// ended with ErrStopping in its cause, saying what became of it, or nil
// when ctx did not end so.
func interrupted(ctx context.Context, what string) error {
	if ctx.Err() == nil || !errors.Is(context.Cause(ctx), ErrStopping) {
		return nil
	}
	return &Error{Code: CodeInterrupted, Message: context.Cause(ctx).Error() + ": " + what, Err: context.Cause(ctx)}
}

// Error is the typed error every ExecutionHost method returns for what a
// caller can act on. Field names the offending request field (JSON path,
// e.g. "resources.cpus") for invalid_request. Reason and EndedAt say why
// and when the execution ended, for code gone (and for a conflict that
// refuses an ended id): one of the End* reasons; empty and zero otherwise.
type Error struct {
	Code    string
	Field   string
	Message string
	Reason  string
	EndedAt time.Time
	// Output, for an exec whose command ended midway (timeout,
	// output_limit, aborted, agent_lost, interrupted,
	// storage_unavailable, and gone when the execution ended under it),
	// is what the command printed before (ExitCode -1): at most
	// maxOutputBytes in all, and for output_limit the bytes up to that
	// limit. From ExecOutput it holds the host's output memory or a spool
	// file until closed: close it. From Exec it is in memory. Nil
	// otherwise.
	Output *ExecOutput
	Err    error // the cause, if any; not meant for the peer
}

// cutOutput is the Output of err's *Error, nil if none.
func cutOutput(err error) *ExecOutput {
	var e *Error
	if errors.As(err, &e) {
		return e.Output
	}
	return nil
}

// withOutput is err, when it is an *Error, as a copy carrying out (what
// its command printed before it ended). Otherwise it is err, and out is
// still the caller's to close.
func withOutput(err error, out *ExecOutput) error {
	var e *Error
	if out == nil || !errors.As(err, &e) {
		return err
	}
	c := *e
	c.Output = out
	return &c
}

// outputInMemory is err with its Error's Output (if any) read into memory
// and the host's copy closed, for callers that take no output to close
// (Exec); an output it cannot read is dropped, the error kept.
func outputInMemory(err error) error {
	var e *Error
	if !errors.As(err, &e) || e.Output == nil {
		return err
	}
	out := e.Output
	defer func() { _ = out.Close() }()
	e.Output = nil
	stdout, serr := out.Stdout.bytes()
	if serr != nil {
		return err
	}
	stderr, serr := out.Stderr.bytes()
	if serr != nil {
		return err
	}
	e.Output = &ExecOutput{ExitCode: out.ExitCode, Stdout: OutputOf(stdout), Stderr: OutputOf(stderr), DurationMs: out.DurationMs}
	return err
}

func (e *Error) Error() string {
	s := "dockerhost: " + e.Code
	if e.Field != "" {
		s += ": " + e.Field
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// ErrorCode returns the Code of the *Error in err's chain, or "" when there
// is none (an internal failure).
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func invalid(field, format string, args ...any) *Error {
	return &Error{Code: CodeInvalidRequest, Field: field, Message: fmt.Sprintf(format, args...)}
}
