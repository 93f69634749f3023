package hostgate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Signal names a POSIX signal the way SSH does (RFC 4254 §6.10): without the
// "SIG" prefix, e.g. "TERM", "KILL", "INT", "HUP".
type Signal string

// Common signals.
const (
	SIGTERM Signal = "TERM"
	SIGKILL Signal = "KILL"
	SIGINT  Signal = "INT"
	SIGHUP  Signal = "HUP"
)

// Canonical returns s as SSH names it, upper case and without a "SIG"
// prefix ("sigterm" is "TERM"), and whether it is one of the signals RFC
// 4254 names. An SSH server ignores a signal it does not know, without a
// word: a transport refuses one that is not valid instead.
func (s Signal) Canonical() (Signal, bool) {
	c := Signal(strings.TrimPrefix(strings.ToUpper(string(s)), "SIG"))
	switch c {
	case "ABRT", "ALRM", "FPE", "HUP", "ILL", "INT", "KILL", "PIPE", "QUIT", "SEGV", "TERM", "USR1", "USR2":
		return c, true
	}
	return s, false
}

// PTY asks for a pseudo-terminal for a spawned process.
type PTY struct {
	Term string // TERM value; "xterm-256color" when empty
	Cols int    // width in characters; 80 when zero
	Rows int    // height in characters; 24 when zero
}

// SpawnOptions are the knobs of [Transport.Spawn].
type SpawnOptions struct {
	// Dir is the working directory; empty means the transport's default
	// (usually the user's home).
	Dir string
	// Env is added to the process environment. Names must be valid shell
	// names ([A-Za-z_][A-Za-z0-9_]*); transports refuse others.
	Env map[string]string
	// PTY, when set, runs the process on a pseudo-terminal. Stderr is then
	// merged into Stdout by the terminal.
	PTY *PTY
}

// Process is a running process on a host. Stdout and Stderr must both be
// drained (or the process may block on a full pipe) until Wait returns.
type Process interface {
	// Stdin is the process's standard input; Close sends EOF.
	Stdin() io.WriteCloser
	// Stdout is the process's standard output.
	Stdout() io.Reader
	// Stderr is the process's standard error.
	Stderr() io.Reader
	// Wait blocks until the process has exited (and, for transports that
	// own supervision, until the remote side has terminated) and its output
	// streams are closed. It returns nil for exit status 0, an *ExitError
	// for a non-zero status or a signal, and another error when the
	// transport failed before an exit was reported. Wait may be called
	// from several goroutines; all get the same result.
	Wait() error
	// Kill sends sig to the process (its whole process group where the
	// transport supports it). Kill after exit is a no-op.
	Kill(sig Signal) error
}

// exitedOf is p's Exited where its transport hears how a process ended
// before its output streams close (sshlayer's client: the SSH
// exit-status, which OpenSSH's sshd sends as the command exits, while it
// keeps the session open as long as anything holds the command's
// output), else nil. Wait still waits for the streams.
func exitedOf(p Process) <-chan struct{} {
	if e, ok := p.(interface{ Exited() <-chan struct{} }); ok {
		return e.Exited()
	}
	return nil
}

// Resizer is implemented by processes that run on a PTY.
type Resizer interface {
	Resize(cols, rows int) error
}

// ExitError reports a process that exited with a non-zero status or was
// ended by a signal.
type ExitError struct {
	Code   int    // exit status; -1 when ended by a signal
	Signal Signal // the signal that ended the process, if any
	Msg    string // optional message from the transport (e.g. SSH exit-signal message)
}

func (e *ExitError) Error() string {
	if e.Signal != "" {
		return fmt.Sprintf("process killed by signal %s", e.Signal)
	}
	return fmt.Sprintf("process exited with status %d", e.Code)
}

// ExitCode returns the exit code err carries: 0 for nil, the status of an
// *ExitError (128+n style is not synthesised; -1 for a signal), and -1 for
// any other error. It reads Process.Wait's error. Host.Exec's error is no
// *ExitError (a non-zero exit is no error of Exec's): read its
// ExecResult.ExitCode, as ExitCode of Exec's error is 0 for a command that
// exited 3.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return -1
}

// Transport spawns processes on a host.
type Transport interface {
	// Spawn starts argv (argv[0] is looked up in PATH on the host). The ctx
	// bounds the process's lifetime: cancelling it kills the process.
	Spawn(ctx context.Context, argv []string, opts SpawnOptions) (Process, error)
}

// Supervisor is implemented by transports that already own supervision of
// remote processes: each process runs in its own process group that dies
// with it, and exit is reported only after remote termination (SSH does). A
// persistent host skips the watchdog for such transports.
type Supervisor interface {
	OwnsSupervision() bool
}
