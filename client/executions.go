package client

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// The executions API's bodies (DESIGN.md "Execution bodies"), mirrored
// here so callers need not link the Docker client.

// ProvisionRequest is the provision body.
type ProvisionRequest struct {
	ExecutionID string    `json:"executionId,omitempty"`
	Image       string    `json:"image"`
	Workspace   Workspace `json:"workspace"`
	Resources   Resources `json:"resources"`
	Network     Network   `json:"network"`
	// Env is the environment of every command the execution runs (API
	// execs and SSH sessions alike). A name that looks like it carries
	// a credential (GH_TOKEN, OPENAI_API_KEY, DB_PASSWORD, AWS_SECRET…)
	// is refused with 400 naming it, here and in ExecRequest.Env: the
	// environment is kept in the container's configuration. Write such a
	// value into the workspace (SFTP) or pass it on a command's stdin.
	Env map[string]string `json:"env,omitempty"`
}

// Workspace is {kind: "empty"} or a git revision of a repository on the
// gateway's machine.
type Workspace struct {
	Kind           string `json:"kind"`
	RepositoryPath string `json:"repositoryPath,omitempty"`
	Revision       string `json:"revision,omitempty"`
}

// Resources are the execution's limits; every field is required.
type Resources struct {
	CPUs           float64 `json:"cpus"`
	MemoryBytes    int64   `json:"memoryBytes"`
	DiskBytes      int64   `json:"diskBytes"`
	Pids           int64   `json:"pids"`
	RuntimeMs      int64   `json:"runtimeMs"`
	MaxOutputBytes int64   `json:"maxOutputBytes"`
}

// Network is the execution's network; only mode "none" exists.
type Network struct {
	Mode string `json:"mode"`
}

// Execution is a provisioned execution; it is also a host with the same
// id (Dial it), whose pinned host key HostKey is.
type Execution struct {
	ExecutionID string    `json:"executionId"`
	Image       string    `json:"image"`
	CreatedAt   time.Time `json:"createdAt"`
	ExpiresAt   time.Time `json:"expiresAt"`
	Resources   Resources `json:"resources"`
	// WorkspaceBytes is the size /workspace got: diskBytes, at most what
	// the memory limit leaves room for.
	WorkspaceBytes int64 `json:"workspaceBytes"`
	// RestoredFrom is the checkpoint id a Restore made it from.
	RestoredFrom  string `json:"restoredFrom,omitempty"`
	HostKey       string `json:"hostKey,omitempty"`
	HostPublicKey string `json:"hostPublicKey,omitempty"`
	Connected     bool   `json:"connected"`
}

// ExecRequest runs Command with Args directly (no shell).
type ExecRequest struct {
	Command string   `json:"command"`
	Args    []string `json:"args,omitempty"`
	// Env is added to the command's environment; a name that looks like
	// a credential is refused as in ProvisionRequest.Env.
	Env       map[string]string `json:"env,omitempty"`
	Cwd       string            `json:"cwd,omitempty"`
	Stdin     string            `json:"stdin,omitempty"`
	TimeoutMs int64             `json:"timeoutMs"`
	// Encoding is how stdin and the output travel: "" (or "utf-8") as
	// JSON text, where bytes that are not UTF-8 become U+FFFD, or
	// EncodingBase64 for any bytes. Either way Stdin here and the
	// result's Stdout and Stderr hold the raw bytes: Exec does the
	// base64. Gateways older than the encoding answer 400 naming it.
	Encoding string `json:"encoding,omitempty"`
}

// EncodingBase64 is the ExecRequest.Encoding that carries binary stdin
// and output intact.
const EncodingBase64 = "base64"

// ExecResult is a finished command.
type ExecResult struct {
	// ExitCode is the command's exit status as a POSIX shell's $? says
	// it: 127 for a program not found or a missing Cwd, 126 for one not
	// executable (the shell's message in Stderr), 128+N for a command
	// signal N killed (137: KILL, also the memory limit's, see OOMKilled).
	// hostgate.Host.Exec answers the same but for signals, which it says
	// as ExitCode -1 and a Signal.
	ExitCode   int    `json:"exitCode"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	DurationMs int64  `json:"durationMs"`
	OOMKilled  bool   `json:"oomKilled,omitempty"`
	// Encoding is the request's, as the gateway named it.
	Encoding string `json:"encoding,omitempty"`
	// StdoutLossy and StderrLossy say that the output was not valid UTF-8
	// and came as text, with U+FFFD where bytes were: run it again with
	// EncodingBase64 to get them.
	StdoutLossy bool `json:"stdoutLossy,omitempty"`
	StderrLossy bool `json:"stderrLossy,omitempty"`
}

// Checkpoint is a saved workspace.
type Checkpoint struct {
	CheckpointID string    `json:"checkpointId"`
	ExecutionID  string    `json:"executionId"`
	CreatedAt    time.Time `json:"createdAt"`
	SizeBytes    int64     `json:"sizeBytes"`
	SHA256       string    `json:"sha256"`
}

// StoredCheckpoint is a checkpoint as the gateway keeps it: what its
// checkpoint answered, and what its manifest records of where it came
// from and what a restore of it gets.
type StoredCheckpoint struct {
	Checkpoint
	Reason    string    `json:"reason,omitempty"`
	Image     string    `json:"image"`
	Resources Resources `json:"resources"`
}

// CheckpointList is the newest stored checkpoints, newest first.
type CheckpointList struct {
	Checkpoints []StoredCheckpoint `json:"checkpoints"`
	// Truncated says that older checkpoints were left out by the limit.
	Truncated bool `json:"truncated"`
}

// ListCheckpointsOptions narrow ListCheckpoints: ExecutionID keeps one
// execution's checkpoints; Limit (1-10000, 0 for the gateway's default
// of 1000) bounds the answer.
type ListCheckpointsOptions struct {
	ExecutionID string
	Limit       int
}

// RestoreRequest restores a checkpoint into a new execution. Env is given
// again: checkpoints never hold environment values.
type RestoreRequest struct {
	CheckpointID string            `json:"checkpointId"`
	ExecutionID  string            `json:"executionId,omitempty"`
	Env          map[string]string `json:"env,omitempty"`
}

// Provision creates an execution (admin token). A refused request is an
// *APIError with Status 400 whose message starts with the field. An
// ExecutionID in use is refused with Status 409, and so is one that
// ended, as long as the gateway remembers it (its newest 100,000 ended
// ids, across restarts): ids are not reused, so a caller still holding an
// ended id never reaches another sandbox through it. The error's Reason
// and EndedAt say how that one ended.
func (c *Client) Provision(ctx context.Context, req ProvisionRequest) (*Execution, error) {
	var e Execution
	if err := c.doLong(ctx, "POST", "/v1/executions", req, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// ExecutionList is the newest live executions, newest first.
type ExecutionList struct {
	Executions []Execution `json:"executions"`
	// Truncated says that older live executions were left out by the
	// limit.
	Truncated bool `json:"truncated"`
}

// ListExecutionsOptions bound Executions: Limit (1-10000, 0 for the
// gateway's default of 1000) is the most executions answered.
type ListExecutionsOptions struct {
	Limit int
}

// Executions lists the live executions, newest first, each as Execution
// returns it (admin token). Gateways older than the list answer an
// *APIError with Status 405.
func (c *Client) Executions(ctx context.Context, opts ListExecutionsOptions) (*ExecutionList, error) {
	path := "/v1/executions"
	if opts.Limit != 0 {
		path += "?limit=" + strconv.Itoa(opts.Limit)
	}
	var l ExecutionList
	if err := c.do(ctx, "GET", path, nil, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// SetTimeout sets a live execution's deadline to now + d (E2B's
// setTimeout): later or earlier, at most the gateway's maximum runtime
// from now (more is an *APIError with Status 400 naming runtimeMs and the
// maximum). It returns the execution with its new ExpiresAt, which a
// gateway restart keeps, as it keeps the container's own deadline. d is
// sent in whole milliseconds; less than one is refused here. Gateways
// older than the call answer Status 405; an execution an older gateway
// made, Status 409.
func (c *Client) SetTimeout(ctx context.Context, id string, d time.Duration) (*Execution, error) {
	if id == "" {
		return nil, errEmptyID("execution")
	}
	if d < time.Millisecond {
		return nil, fmt.Errorf("client: SetTimeout: the runtime from now is %v; want at least 1ms", d)
	}
	var e Execution
	body := struct {
		RuntimeMs int64 `json:"runtimeMs"`
	}{d.Milliseconds()}
	if err := c.do(ctx, "POST", "/v1/executions/"+url.PathEscape(id)+"/timeout", body, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// Execution returns a live execution; an ended one (or one a command's
// timeout, output flood or abort is destroying) is an *APIError with
// Status 410 whose Reason and EndedAt say why and when it ended, as do
// those of every later call on it.
func (c *Client) Execution(ctx context.Context, id string) (*Execution, error) {
	if id == "" {
		return nil, errEmptyID("execution")
	}
	var e Execution
	if err := c.do(ctx, "GET", "/v1/executions/"+url.PathEscape(id), nil, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// maxExecAnswer bounds the answer of an exec: its output may be as long as
// the largest maxOutputBytes a gateway takes (64 MiB, stdout and stderr
// together, dockerhost.DefaultMaxResources), which JSON text may spell in
// six bytes a byte ("\u0000"; base64 takes four for three), plus the
// answer's other fields. A 16 MiB bound, the other calls', failed an exec
// of 20 MiB of text in an execution with maxOutputBytes 64 MiB as
// "unexpected end of JSON input" (found by the audit31 audit).
const maxExecAnswer = 6*(64<<20) + 64<<10

// Exec runs one command in the execution. A timeout, output overflow or
// abort is an *APIError with Code "timeout", "output_limit" or "aborted",
// and the execution is gone afterwards. Every answer that cuts a command
// midway (those, "gone" when the execution ends under it, "agent_lost",
// "interrupted", "storage_unavailable") holds in its Stdout and Stderr
// what the command printed before it was cut. ctx ending before the answer is
// such an abort: Exec returns ctx's error (for errors.Is), saying so, and
// the gateway, seeing its caller gone, destroys the execution (410 from
// then on); bound a command with TimeoutMs (which also destroys it), or
// run it on the execution as a host (Dial, then Host.Exec or Spawn) to
// cancel one command alone. A command that kills the execution's agent it
// runs under is "agent_lost" (502): its result is unknown, it may still
// be running (bound by the execution's runtime, no longer by TimeoutMs),
// and the execution lives on.
//
// With Encoding EncodingBase64, stdin and the output travel as base64, so
// any bytes arrive intact; the output limit counts the raw bytes.
func (c *Client) Exec(ctx context.Context, id string, req ExecRequest) (*ExecResult, error) {
	if id == "" {
		return nil, errEmptyID("execution")
	}
	b64 := req.Encoding == EncodingBase64
	if b64 {
		req.Stdin = base64.StdEncoding.EncodeToString([]byte(req.Stdin))
	}
	var r ExecResult
	if err := c.doLimit(ctx, c.longHTTP(), maxExecAnswer, "POST", "/v1/executions/"+url.PathEscape(id)+"/exec", req, &r); err != nil {
		if ctx.Err() != nil {
			// net/http's words ("Post \"…/exec\": context canceled")
			// leave out what it costs, which the caller learnt only from
			// its next call's 410.
			return nil, fmt.Errorf("client: exec in execution %q: %w before its answer; the gateway destroys an execution whose exec's caller goes away (410 gone, reason aborted, from then on): bound a command with TimeoutMs, or stop one alone with Host.Exec on the execution dialed as a host", id, ctx.Err())
		}
		return nil, err
	}
	if b64 {
		if r.Encoding != EncodingBase64 {
			return nil, fmt.Errorf("client: exec asked for encoding base64 and the answer is in %q", r.Encoding)
		}
		for _, s := range []*string{&r.Stdout, &r.Stderr} {
			raw, err := base64.StdEncoding.DecodeString(*s)
			if err != nil {
				return nil, fmt.Errorf("client: exec answer: output is not base64: %w", err)
			}
			*s = string(raw)
		}
	}
	return &r, nil
}

// Checkpoint saves the execution's workspace.
func (c *Client) Checkpoint(ctx context.Context, id, reason string) (*Checkpoint, error) {
	if id == "" {
		return nil, errEmptyID("execution")
	}
	var cp Checkpoint
	body := map[string]string{"reason": reason}
	if err := c.doLong(ctx, "POST", "/v1/executions/"+url.PathEscape(id)+"/checkpoints", body, &cp); err != nil {
		return nil, err
	}
	return &cp, nil
}

// ListCheckpoints lists the stored checkpoints, newest first (admin
// token).
func (c *Client) ListCheckpoints(ctx context.Context, opts ListCheckpointsOptions) (*CheckpointList, error) {
	q := url.Values{}
	if opts.ExecutionID != "" {
		q.Set("executionId", opts.ExecutionID)
	}
	if opts.Limit != 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	path := "/v1/checkpoints"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var l CheckpointList
	if err := c.do(ctx, "GET", path, nil, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// GetCheckpoint returns one stored checkpoint; an unknown one is an
// *APIError with Status 404.
func (c *Client) GetCheckpoint(ctx context.Context, checkpointID string) (*StoredCheckpoint, error) {
	if checkpointID == "" {
		return nil, errEmptyID("checkpoint")
	}
	var cp StoredCheckpoint
	if err := c.do(ctx, "GET", "/v1/checkpoints/"+url.PathEscape(checkpointID), nil, &cp); err != nil {
		return nil, err
	}
	return &cp, nil
}

// DeleteCheckpoint deletes a stored checkpoint; an unknown (or already
// deleted) one is an *APIError with Status 404. A restore already reading
// it still gets all of it.
func (c *Client) DeleteCheckpoint(ctx context.Context, checkpointID string) error {
	if checkpointID == "" {
		return errEmptyID("checkpoint")
	}
	return c.do(ctx, "DELETE", "/v1/checkpoints/"+url.PathEscape(checkpointID), nil, nil)
}

// Restore makes a new execution from a checkpoint.
func (c *Client) Restore(ctx context.Context, req RestoreRequest) (*Execution, error) {
	var e Execution
	if err := c.doLong(ctx, "POST", "/v1/restores", req, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// Terminate destroys the execution. It is idempotent: terminating one
// that ended, or an id the gateway does not know, succeeds.
func (c *Client) Terminate(ctx context.Context, id string) error {
	if id == "" {
		return errEmptyID("execution")
	}
	return c.do(ctx, "DELETE", "/v1/executions/"+url.PathEscape(id), nil, nil)
}
