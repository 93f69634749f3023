package dockerhost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
)

// Stdio is a long-lived command's standard input and output, e.g. the
// in-container agent speaking yamux over them. It is an io.ReadWriteCloser
// with CloseWrite, so bicopy and stream multiplexers take it as is. Its
// stderr goes to the writer given to AttachStdio.
type Stdio struct {
	hj     types.HijackedResponse
	pr     *io.PipeReader
	runner *ProcessRunner
	execID string
	cid    string // the container's id
	name   string // the command's comm: argv[0]'s base name, at most 15 bytes
	proc   string // Docker.proc
	stderr *handoffWriter
	stop   func() bool // guarded by the owner: set once more by adopt, before handing over

	env []string // Env's; set before handing over

	closeOnce sync.Once
	done      chan struct{} // closed when the output pump ends
	pumpErr   error         // set before done is closed
}

// AttachStdio starts argv in the execution as its non-root user, in
// /workspace, with stdin and stdout attached, outside the execution mutex
// (it may run for the execution's whole life). The execution's end ends it.
// ctx bounds the attachment: when ctx ends, the Stdio is closed. stderr
// receives the command's stderr; nil discards it.
//
// A pooled execution's first AttachStdio of PoolConfig.Agent gets the
// attachment the pool started ahead of the claim (the command has read
// nothing yet), unless it has ended.
func (h *Docker) AttachStdio(ctx context.Context, executionID string, argv []string, stderr io.Writer) (*Stdio, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, invalid("command", "is required")
	}
	e, err := h.live(ctx, executionID)
	if err != nil {
		return nil, err
	}
	if stderr == nil {
		stderr = io.Discard
	}
	env := envList(e.env)
	if s := h.takeAgent(e, argv); s != nil {
		if s.adopt(ctx, stderr) {
			s.env = env
			return s, nil
		}
		_ = s.Close()
	}
	s, err := h.attachStdio(ctx, ctx, e.ContainerID, userOf(e.uid), env, argv, stderr)
	if err != nil {
		return nil, err
	}
	s.env = env
	return s, nil
}

// Env is the execution's provision env (NAME=value) when its container was
// created without it, as a pooled one is: the process may have started
// before the claim, without it (a pre-started agent), and should pass it
// on to what it runs.
func (s *Stdio) Env() []string { return s.env }

// takeAgent returns e's pre-started agent attachment when argv is its, and
// forgets it: it is handed out once.
func (h *Docker) takeAgent(e *execution, argv []string) *Stdio {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e.agent == nil || !slices.Equal(e.agentArgv, argv) {
		return nil
	}
	s := e.agent
	e.agent = nil
	return s
}

// earlyAgent is what startAgent started, or why not.
type earlyAgent struct {
	s   *Stdio
	err error
}

// startAgent starts Config.LoadAgent in container cid as user while the
// caller goes on (a workspace load), its attachment living with the
// container as a pooled one's does; ctx bounds the start. The channel
// gives the outcome once.
func (h *Docker) startAgent(ctx context.Context, cid, user string) <-chan earlyAgent {
	out := make(chan earlyAgent, 1)
	go func() {
		s, err := h.attachStdio(ctx, context.Background(), cid, user, nil, h.loadAgent, io.Discard)
		out <- earlyAgent{s, err}
	}()
	return out
}

// attachStdio starts argv in container cid; ctx bounds the API calls and
// life the attachment.
func (h *Docker) attachStdio(ctx, life context.Context, cid, user string, env, argv []string, stderr io.Writer) (*Stdio, error) {
	created, err := h.api.ContainerExecCreate(ctx, cid, container.ExecOptions{
		User:         user,
		Cmd:          argv,
		Env:          env, // a pooled container's provision env
		WorkingDir:   WorkspaceDir,
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
	})
	if err != nil {
		return nil, fmt.Errorf("dockerhost: create exec: %w", err)
	}
	hj, err := h.api.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return nil, fmt.Errorf("dockerhost: attach exec: %w", err)
	}
	pr, pw := io.Pipe()
	s := &Stdio{hj: hj, pr: pr, runner: h.runner, execID: created.ID, cid: cid, name: commOf(argv[0]), proc: h.proc,
		stderr: &handoffWriter{w: stderr}, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		_, err := stdcopy.StdCopy(pw, s.stderr, hj.Reader)
		s.pumpErr = err
		_ = pw.CloseWithError(err) // nil: readers see EOF
	}()
	s.stop = context.AfterFunc(life, func() { _ = s.Close() })
	return s, nil
}

// adopt hands a pre-started attachment to its execution: ctx bounds it
// from now on, stderr gets its stderr. It reports false when the command
// has ended.
func (s *Stdio) adopt(ctx context.Context, stderr io.Writer) bool {
	select {
	case <-s.done:
		return false
	default:
	}
	s.stderr.set(stderr)
	s.stop()
	s.stop = context.AfterFunc(ctx, func() { _ = s.Close() })
	return true
}

// handoffWriter forwards to a writer that can be replaced (a pre-started
// agent's stderr goes to its execution's log once claimed).
type handoffWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (w *handoffWriter) set(to io.Writer) {
	w.mu.Lock()
	w.w = to
	w.mu.Unlock()
}

func (w *handoffWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// Read reads the command's stdout.
func (s *Stdio) Read(p []byte) (int, error) { return s.pr.Read(p) }

// Write writes to the command's stdin.
func (s *Stdio) Write(p []byte) (int, error) { return s.hj.Conn.Write(p) }

// CloseWrite closes the command's stdin; its stdout stays readable.
func (s *Stdio) CloseWrite() error { return s.hj.CloseWrite() }

// Close tears the attachment down and waits for its reader. The command
// itself is not killed by this (Docker has no exec kill); it sees its stdin
// and stdout close, and ends with the execution at the latest.
func (s *Stdio) Close() error {
	s.closeOnce.Do(func() {
		s.stop()
		s.hj.Close()
		_ = s.pr.Close()
	})
	<-s.done
	return nil
}

// Wait waits for stdout to end and returns the command's exit code.
func (s *Stdio) Wait(ctx context.Context) (int, error) {
	select {
	case <-s.done:
	case <-ctx.Done():
		return -1, ctx.Err()
	}
	if s.pumpErr != nil && !errors.Is(s.pumpErr, io.ErrClosedPipe) {
		return -1, fmt.Errorf("dockerhost: read output: %w", s.pumpErr)
	}
	return s.runner.exitCode(ctx, s.execID)
}
