package dockerhost

import (
	"context"
	"time"
)

// ExecutionHost is the stable boundary between a scheduler and a sandbox.
// Server code depends on these five methods only.
type ExecutionHost interface {
	// Provision creates and starts an execution. An ExecutionID in use,
	// or one that ended (as long as the host remembers it), is refused
	// (conflict): ids are not reused.
	Provision(ctx context.Context, req ProvisionRequest) (*Execution, error)
	// Exec runs one command in the execution and collects its output. A
	// timeout, an output overflow or ctx ending destroys the execution; a
	// command whose runner (the execution's agent) ended under it is
	// agent_lost, and the execution lives on. The *Error of a command cut
	// midway (these, a stop's interrupted, a refused output spool, the
	// execution's end under it) carries what it printed (Error.Output).
	Exec(ctx context.Context, executionID string, req ExecRequest) (*ExecResult, error)
	// Checkpoint saves the execution's workspace; it waits for running execs.
	Checkpoint(ctx context.Context, executionID string, req CheckpointRequest) (*Checkpoint, error)
	// Restore provisions a new execution from a checkpoint.
	Restore(ctx context.Context, req RestoreRequest) (*Execution, error)
	// Terminate destroys the execution. It is idempotent: an execution
	// that ended, or an id the host never saw, succeeds (nil).
	Terminate(ctx context.Context, executionID string) error
}

// Workspace kinds.
const (
	WorkspaceEmpty       = "empty"
	WorkspaceGitWorktree = "git-worktree"
)

// ProvisionRequest is the provision body (DESIGN.md "Execution bodies").
type ProvisionRequest struct {
	ExecutionID string            `json:"executionId,omitempty"`
	Image       string            `json:"image"`
	Workspace   WorkspaceSpec     `json:"workspace"`
	Resources   Resources         `json:"resources"`
	Network     Network           `json:"network"`
	Env         map[string]string `json:"env,omitempty"`
}

// WorkspaceSpec says what /workspace starts with: nothing, or one revision
// of a local git repository (git archive, no .git, never a bind mount).
type WorkspaceSpec struct {
	Kind           string `json:"kind"`
	RepositoryPath string `json:"repositoryPath,omitempty"`
	Revision       string `json:"revision,omitempty"`
}

// Resources are the execution's limits. Every field is mandatory: zero
// means missing and is refused, naming the field.
type Resources struct {
	CPUs           float64 `json:"cpus"`
	MemoryBytes    int64   `json:"memoryBytes"`
	DiskBytes      int64   `json:"diskBytes"`
	Pids           int64   `json:"pids"`
	RuntimeMs      int64   `json:"runtimeMs"`
	MaxOutputBytes int64   `json:"maxOutputBytes"`
}

// Network is the execution's network; only mode "none" exists here.
type Network struct {
	Mode string `json:"mode"`
}

// Execution is a provisioned execution.
type Execution struct {
	ExecutionID string    `json:"executionId"`
	Image       string    `json:"image"`
	ContainerID string    `json:"containerId"`
	CreatedAt   time.Time `json:"createdAt"`
	ExpiresAt   time.Time `json:"expiresAt"`
	Resources   Resources `json:"resources"`
	// WorkspaceBytes is the size /workspace got: Resources.DiskBytes, but
	// at most what the memory limit leaves room for (WorkspaceSize).
	WorkspaceBytes int64 `json:"workspaceBytes"`
	// RestoredFrom is the checkpoint id when Restore made the execution.
	RestoredFrom string `json:"restoredFrom,omitempty"`
}

// ExecRequest is the exec body. Command is run directly (no shell); use
// "/bin/sh" with "-c" for shell syntax.
type ExecRequest struct {
	Command   string            `json:"command"`
	Args      []string          `json:"args,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	Cwd       string            `json:"cwd,omitempty"` // default /workspace
	Stdin     string            `json:"stdin,omitempty"`
	TimeoutMs int64             `json:"timeoutMs"`
}

// ExecResult is what a finished command left.
type ExecResult struct {
	// ExitCode is as a POSIX shell's $? says it: 127 for a program not
	// found or a missing Cwd, 126 for one not executable (the shell's
	// message in Stderr), 128+N for a command signal N killed.
	ExitCode   int    `json:"exitCode"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	DurationMs int64  `json:"durationMs"`
	// OOMKilled is set when the command was killed by the memory limit
	// (exit code 137 and the container's cgroup recorded an OOM kill).
	OOMKilled bool `json:"oomKilled,omitempty"`
}

// CheckpointRequest is the checkpoint body.
type CheckpointRequest struct {
	Reason string `json:"reason,omitempty"`
}

// Checkpoint is a saved workspace.
type Checkpoint struct {
	CheckpointID string    `json:"checkpointId"`
	ExecutionID  string    `json:"executionId"`
	CreatedAt    time.Time `json:"createdAt"`
	SizeBytes    int64     `json:"sizeBytes"`
	SHA256       string    `json:"sha256"`
}

// RestoreRequest is the restore body. Env is supplied again because a
// checkpoint never holds environment values (they may be credentials).
type RestoreRequest struct {
	CheckpointID string            `json:"checkpointId"`
	ExecutionID  string            `json:"executionId,omitempty"`
	Env          map[string]string `json:"env,omitempty"`
}
