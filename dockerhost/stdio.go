package dockerhost

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	stop   func() bool

	closeOnce sync.Once
	done      chan struct{} // closed when the output pump ends
	pumpErr   error         // set before done is closed
}

// AttachStdio starts argv in the execution as its non-root user, in
// /workspace, with stdin and stdout attached, outside the execution mutex
// (it may run for the execution's whole life). The execution's end ends it.
// ctx bounds the attachment: when ctx ends, the Stdio is closed. stderr
// receives the command's stderr; nil discards it.
func (h *Docker) AttachStdio(ctx context.Context, executionID string, argv []string, stderr io.Writer) (*Stdio, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, invalid("command", "is required")
	}
	e, err := h.lookup(executionID)
	if err != nil {
		return nil, err
	}
	if stderr == nil {
		stderr = io.Discard
	}
	created, err := h.api.ContainerExecCreate(ctx, e.ContainerID, container.ExecOptions{
		User:         h.policy.User(),
		Cmd:          argv,
		Env:          envList(e.env), // a pooled container's provision env
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
	s := &Stdio{hj: hj, pr: pr, runner: h.runner, execID: created.ID, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		_, err := stdcopy.StdCopy(pw, stderr, hj.Reader)
		s.pumpErr = err
		_ = pw.CloseWithError(err) // nil: readers see EOF
	}()
	s.stop = context.AfterFunc(ctx, func() { _ = s.Close() })
	return s, nil
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
