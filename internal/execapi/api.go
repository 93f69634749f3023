package execapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/dockerhost"
	"github.com/hostgate/hostgate/internal/execroutes"
	"github.com/hostgate/hostgate/internal/gateway"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/internal/textcut"
)

// Body bounds. An exec body carries the command's stdin; the others are
// small.
const (
	MaxBody     = 64 << 10
	MaxExecBody = 8 << 20
)

// Executions is the subset of dockerhost.Docker the API serves.
type Executions interface {
	dockerhost.ExecutionHost
	// ExecOutput is Exec with the output left where the host keeps it.
	ExecOutput(ctx context.Context, executionID string, req dockerhost.ExecRequest) (*dockerhost.ExecOutput, error)
	Get(ctx context.Context, executionID string) (*dockerhost.Execution, error)
	// The stored checkpoints (dockerhost.Docker's).
	ListCheckpoints(ctx context.Context, executionID string, limit int) (*dockerhost.CheckpointList, error)
	GetCheckpoint(ctx context.Context, checkpointID string) (*dockerhost.CheckpointInfo, error)
	DeleteCheckpoint(ctx context.Context, checkpointID string) error
	// ListExecutions returns the live executions, newest first (limit 0:
	// dockerhost's default).
	ListExecutions(ctx context.Context, limit int) (*dockerhost.ExecutionList, error)
	// SetTimeout sets a live execution's deadline to now + runtimeMs.
	SetTimeout(ctx context.Context, executionID string, runtimeMs int64) (*dockerhost.Execution, error)
}

var _ Executions = (*dockerhost.Docker)(nil)

// Config are the API's dependencies besides the executions.
type Config struct {
	// Authorize returns false, having answered, when r may not use the
	// executions API (an admin token is required). Required.
	Authorize func(w http.ResponseWriter, r *http.Request) bool
	// Agents, when set, makes every execution a host; without it
	// executions answer without hostKey.
	Agents *Agents
	// Connected reports whether a tunnel serves a host; nil means never.
	Connected func(hostID string) bool
	// Logger; nil discards.
	Logger *slog.Logger
}

// API serves /v1/executions…, /v1/restores and /v1/checkpoints….
type API struct {
	ex      Executions
	cfg     Config
	log     *slog.Logger
	bodyMem bodyMemory // exec bodies in flight
}

// New returns the API over ex.
func New(ex Executions, cfg *Config) (*API, error) {
	if cfg == nil || cfg.Authorize == nil {
		return nil, errors.New("execapi: Config.Authorize is required")
	}
	a := &API{ex: ex, cfg: *cfg, log: cfg.Logger, bodyMem: bodyMemory{limit: ExecBodyMemory}}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.cfg.Connected == nil {
		a.cfg.Connected = func(string) bool { return false }
	}
	return a, nil
}

// Register adds the API's routes to mux.
func (a *API) Register(mux *http.ServeMux) {
	handlers := []http.HandlerFunc{a.provision, a.get, a.exec, a.checkpoint, a.terminate, a.restore,
		a.listCheckpoints, a.getCheckpoint, a.deleteCheckpoint, a.list, a.setTimeout}
	for i, p := range execroutes.Routes {
		h := handlers[i]
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			if a.cfg.Authorize(w, r) {
				h(w, r)
			}
		})
	}
	execroutes.RegisterMethodNotAllowed(mux)
}

// Record is an execution as the API shows it: the execution and, when it
// is a host, its pinned host key.
type Record struct {
	dockerhost.Execution
	HostKey       string `json:"hostKey,omitempty"`       // "SHA256:…"
	HostPublicKey string `json:"hostPublicKey,omitempty"` // "ssh-ed25519 AAAA…"
	Connected     bool   `json:"connected"`
}

func (a *API) record(e *dockerhost.Execution, pub ssh.PublicKey) Record {
	rec := Record{Execution: *e, Connected: a.cfg.Connected(e.ExecutionID)}
	if pub != nil {
		rec.HostKey = ssh.FingerprintSHA256(pub)
		rec.HostPublicKey = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
	}
	return rec
}

func (a *API) provision(w http.ResponseWriter, r *http.Request) {
	var req dockerhost.ProvisionRequest
	if !decode(w, r, &req, MaxBody) {
		return
	}
	a.create(w, r, req.ExecutionID, func(ctx context.Context) (*dockerhost.Execution, error) { return a.ex.Provision(ctx, req) })
}

func (a *API) restore(w http.ResponseWriter, r *http.Request) {
	var req dockerhost.RestoreRequest
	if !decode(w, r, &req, MaxBody) {
		return
	}
	a.create(w, r, req.ExecutionID, func(ctx context.Context) (*dockerhost.Execution, error) { return a.ex.Restore(ctx, req) })
}

// create makes a new execution for a provision or a restore, which asked
// for id ("": the gateway picks one), and answers it (answerNew). The id
// must be a host id no machine's host has (Agents.CheckID). newExec's ctx
// is keepOnShutdown's, so that one cut by a gateway restart answers 503
// interrupted.
func (a *API) create(w http.ResponseWriter, r *http.Request, id string, newExec func(context.Context) (*dockerhost.Execution, error)) {
	if id != "" && !validExecutionID(w, id) {
		return
	}
	if a.cfg.Agents != nil && id != "" {
		if err := a.cfg.Agents.CheckID(r.Context(), id); err != nil {
			a.fail(w, err)
			return
		}
	}
	ctx, done := keepOnShutdown(r.Context())
	defer done()
	e, err := newExec(ctx)
	if err != nil {
		a.fail(w, err)
		return
	}
	a.answerNew(r.Context(), ctx, w, e)
}

// validExecutionID reports whether id, an executionId a request gave, can
// be one (a host id: store.ValidHostID), and answers 400 saying what one
// is when not.
func validExecutionID(w http.ResponseWriter, id string) bool {
	if store.ValidHostID(id) {
		return true
	}
	gateway.WriteError(w, http.StatusBadRequest, dockerhost.CodeInvalidRequest, "executionId: "+store.HostIDRule)
	return false
}

// answerNew starts a new execution's agent and answers 201; an execution
// whose agent cannot start is terminated, so the caller never holds an
// execution that is not a host. parent is the request's context, ctx its
// keepOnShutdown.
func (a *API) answerNew(parent, ctx context.Context, w http.ResponseWriter, e *dockerhost.Execution) {
	var pub ssh.PublicKey
	if a.cfg.Agents != nil {
		var err error
		pub, err = a.cfg.Agents.Start(ctx, e.ExecutionID)
		if err != nil && cutByShutdown(parent) {
			// Its caller would never learn of it: nothing is left.
			if terr := a.ex.Terminate(context.WithoutCancel(ctx), e.ExecutionID); terr != nil {
				a.log.Error("terminate", "execution", e.ExecutionID, "err", terr)
			}
			a.cfg.Agents.Forget(e.ExecutionID)
			gateway.WriteError(w, http.StatusServiceUnavailable, dockerhost.CodeInterrupted,
				gateway.ErrShuttingDown.Error()+": execution "+e.ExecutionID+" was terminated before its agent started; try again once the gateway is back")
			return
		}
		if err != nil && parent.Err() != nil {
			// The caller went away (a client's timeout): nobody will learn
			// of the execution, and the agent did not fail, it was cut.
			a.log.Info("the provision's caller went away before its execution's agent started; terminating the execution", "execution", e.ExecutionID)
			if terr := a.ex.Terminate(context.WithoutCancel(ctx), e.ExecutionID); terr != nil {
				a.log.Error("terminate", "execution", e.ExecutionID, "err", terr)
			}
			a.cfg.Agents.Forget(e.ExecutionID)
			gateway.WriteError(w, http.StatusServiceUnavailable, dockerhost.CodeAborted, "the request's caller went away; execution "+e.ExecutionID+" was terminated")
			return
		}
		if err != nil {
			if _, gerr := a.ex.Get(context.WithoutCancel(ctx), e.ExecutionID); dockerhost.ErrorCode(gerr) == dockerhost.CodeGone || dockerhost.ErrorCode(gerr) == dockerhost.CodeNotFound {
				// Terminated meanwhile (a DELETE while its agent started):
				// not the agent's failure.
				a.cfg.Agents.Forget(e.ExecutionID)
				gateway.WriteError(w, http.StatusGone, dockerhost.CodeGone, fmt.Sprintf("execution %q was terminated while provisioning", e.ExecutionID))
				return
			}
			a.log.Error("execution agent did not start; terminating the execution", "execution", e.ExecutionID, "err", err)
			if terr := a.ex.Terminate(context.WithoutCancel(ctx), e.ExecutionID); terr != nil {
				a.log.Error("terminate", "execution", e.ExecutionID, "err", terr)
			}
			if errors.Is(err, ErrNotExecutionHost) {
				gateway.WriteError(w, http.StatusConflict, dockerhost.CodeConflict, notExecutionHost(err))
				return
			}
			// Its host record (pinned before the agent started) goes
			// with it: a failed provision left a host in /v1/hosts.
			a.cfg.Agents.Forget(e.ExecutionID)
			if !e.ExpiresAt.IsZero() && !time.Now().Before(e.ExpiresAt) {
				gateway.WriteError(w, http.StatusBadRequest, dockerhost.CodeInvalidRequest,
					"resources.runtimeMs: the execution's runtime ran out while it was being provisioned; give it more time")
				return
			}
			gateway.WriteError(w, http.StatusBadGateway, "agent_failed", "the execution's agent did not start ("+err.Error()+"); the execution was terminated. Check that --agent-binary is a static linux agent and the gateway's log")
			return
		}
	}
	gateway.WriteJSON(w, http.StatusCreated, a.record(e, pub))
}

func (a *API) get(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	e, err := a.ex.Get(r.Context(), id)
	if err != nil {
		a.fail(w, err)
		return
	}
	gateway.WriteJSON(w, http.StatusOK, a.pinnedRecord(r.Context(), e))
}

// pinnedRecord is e as GET /v1/executions/{id} answers it, with the host
// key pinned for it (none without Agents).
func (a *API) pinnedRecord(ctx context.Context, e *dockerhost.Execution) Record {
	var pub ssh.PublicKey
	if a.cfg.Agents != nil {
		pub = a.cfg.Agents.PinnedKey(ctx, e.ExecutionID)
	}
	return a.record(e, pub)
}

// RecordList is GET /v1/executions' answer: the live executions, newest
// first, each as GET /v1/executions/{id} answers it.
type RecordList struct {
	Executions []Record `json:"executions"`
	// Truncated says that older live executions were left out by the
	// limit.
	Truncated bool `json:"truncated"`
}

// list answers {executions: [...], truncated}, the newest first: ?limit=
// (1-10000, default 1000) bounds the answer. It has no other parameter.
func (a *API) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !onlyParams(w, q, "GET /v1/executions (it takes limit only)", "limit") {
		return
	}
	limit, ok := listLimit(w, q, dockerhost.MaxExecutionListLimit)
	if !ok {
		return
	}
	list, err := a.ex.ListExecutions(r.Context(), limit)
	if err != nil {
		a.fail(w, err)
		return
	}
	out := RecordList{Executions: make([]Record, 0, len(list.Executions)), Truncated: list.Truncated}
	for i := range list.Executions {
		out.Executions = append(out.Executions, a.pinnedRecord(r.Context(), &list.Executions[i]))
	}
	gateway.WriteJSON(w, http.StatusOK, out)
}

// onlyParams refuses a query with a parameter not among names, or one
// given twice, naming it: a list that ignored them answered a misspelt
// filter (?executionid=X) with every checkpoint, the ones a caller
// cleaning up after X then deleted included.
func onlyParams(w http.ResponseWriter, q url.Values, route string, names ...string) bool {
	for k, vs := range q {
		msg := ""
		switch {
		case !slices.Contains(names, k):
			msg = "%s: not a parameter of " + route
		case len(vs) > 1:
			msg = "%s: given more than once; give it once"
		default:
			continue
		}
		gateway.WriteError(w, http.StatusBadRequest, dockerhost.CodeInvalidRequest, fmt.Sprintf(msg, textcut.Cut(k, 64)))
		return false
	}
	return true
}

// listLimit parses ?limit= (1-max; absent or empty is 0, the default), answering
// 400 naming the field when it is not such a number.
func listLimit(w http.ResponseWriter, q url.Values, max int) (int, bool) {
	v := q.Get("limit")
	if v == "" {
		return 0, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		gateway.WriteError(w, http.StatusBadRequest, dockerhost.CodeInvalidRequest,
			fmt.Sprintf("limit: want a number from 1 to %d", max))
		return 0, false
	}
	return n, true
}

// TimeoutRequest is the body of POST /v1/executions/{id}/timeout.
type TimeoutRequest struct {
	// RuntimeMs is the execution's runtime from now: its new deadline is
	// now + RuntimeMs, at most the gateway's maximum runtime.
	RuntimeMs int64 `json:"runtimeMs"`
}

// setTimeout sets a live execution's deadline to now + runtimeMs (E2B's
// setTimeout) and answers it as GET /v1/executions/{id} does, with the new
// expiresAt.
func (a *API) setTimeout(w http.ResponseWriter, r *http.Request) {
	var req TimeoutRequest
	if !decode(w, r, &req, MaxBody) {
		return
	}
	if req.RuntimeMs == 0 {
		gateway.WriteError(w, http.StatusBadRequest, dockerhost.CodeInvalidRequest,
			"runtimeMs: is required: the execution's runtime from now, in milliseconds")
		return
	}
	id := r.PathValue("id")
	ctx, done := keepOnShutdown(r.Context())
	defer done()
	e, err := a.ex.SetTimeout(ctx, id, req.RuntimeMs)
	if err != nil {
		a.fail(w, err)
		return
	}
	gateway.WriteJSON(w, http.StatusOK, a.pinnedRecord(r.Context(), e))
}

func (a *API) exec(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	held := &heldBody{ReadCloser: r.Body, mem: &a.bodyMem}
	defer held.release()
	r.Body = held
	var body execBody
	if !decode(w, r, &body, MaxExecBody) {
		return
	}
	if err := body.decodeStdin(); err != nil {
		a.fail(w, err)
		return
	}
	ctx, done := keepOnShutdown(r.Context())
	defer done()
	out, err := a.ex.ExecOutput(ctx, id, body.ExecRequest)
	if dockerhost.ErrorCode(err) == dockerhost.CodeAgentLost && cutByShutdown(r.Context()) {
		lost := &dockerhost.Error{Code: dockerhost.CodeInterrupted, Message: context.Cause(r.Context()).Error() + ": the command was cut; the execution is kept for the next start", Err: err}
		if de := (*dockerhost.Error)(nil); errors.As(err, &de) {
			// The output so far goes on with it (closed below, as the
			// error's Output).
			lost.Output, de.Output = de.Output, nil
		}
		err = lost
	}
	// The command is done with its stdin: a slow reader of the answer
	// holds none of it.
	body.Stdin = ""
	held.release()
	if err != nil {
		switch dockerhost.ErrorCode(err) {
		case dockerhost.CodeTimeout, dockerhost.CodeOutputLimit, dockerhost.CodeAborted, dockerhost.CodeGone:
			// The execution is gone: so is its host.
			a.stopAgent(id)
		}
		if de := (*dockerhost.Error)(nil); errors.As(err, &de) && de.Output != nil {
			defer func() { _ = de.Output.Close() }()
			if status, ok := statusOf[de.Code]; ok {
				// What the command printed before it was cut (its
				// timeout, output limit, agent's end, the gateway's
				// stop, its execution's end): the last lines of a test
				// run that hung.
				writeErrorOutput(w, a.log, status, errorOf(de), de.Output, body.Encoding)
				return
			}
		}
		a.fail(w, err)
		return
	}
	defer func() { _ = out.Close() }()
	writeAnswer(w, a.log, out, body.Encoding)
}

func (a *API) checkpoint(w http.ResponseWriter, r *http.Request) {
	var req dockerhost.CheckpointRequest
	// Its one field, reason, is optional, so a POST without a body (curl
	// -X POST, as the README's route reads) is a checkpoint too: it was
	// refused with "body: not valid JSON: EOF".
	if !decodeOptional(w, r, &req, MaxBody) {
		return
	}
	ctx, done := keepOnShutdown(r.Context())
	defer done()
	cp, err := a.ex.Checkpoint(ctx, r.PathValue("id"), req)
	if err != nil {
		a.fail(w, err)
		return
	}
	gateway.WriteJSON(w, http.StatusCreated, cp)
}

// listCheckpoints answers {checkpoints: [...], truncated}, the newest
// first: ?executionId= (not empty) keeps one execution's, ?limit=
// (1-10000, default 1000) bounds the answer.
func (a *API) listCheckpoints(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !onlyParams(w, q, "GET /v1/checkpoints (it takes executionId and limit)", "executionId", "limit") {
		return
	}
	limit, ok := listLimit(w, q, dockerhost.MaxCheckpointListLimit)
	if !ok {
		return
	}
	exec := q.Get("executionId")
	// An empty filter would list every execution's checkpoints, as a
	// misspelt one did before it was refused: a caller that built
	// ?executionId= from an unset variable meant one execution's.
	if q.Has("executionId") && exec == "" {
		gateway.WriteError(w, http.StatusBadRequest, dockerhost.CodeInvalidRequest,
			"executionId: empty; give an execution's id, or leave the parameter out to list every checkpoint")
		return
	}
	if exec != "" && !validExecutionID(w, exec) {
		return
	}
	list, err := a.ex.ListCheckpoints(r.Context(), exec, limit)
	if err != nil {
		a.fail(w, err)
		return
	}
	gateway.WriteJSON(w, http.StatusOK, list)
}

// checkpointID is the path's checkpoint id; a malformed one answers 404
// not_found here (no checkpoint has it) and is never passed on.
func checkpointID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if !dockerhost.ValidCheckpointID(id) {
		gateway.WriteError(w, http.StatusNotFound, dockerhost.CodeNotFound, "no such checkpoint (a checkpoint id is 32 lowercase hex digits)")
		return "", false
	}
	return id, true
}

func (a *API) getCheckpoint(w http.ResponseWriter, r *http.Request) {
	id, ok := checkpointID(w, r)
	if !ok {
		return
	}
	cp, err := a.ex.GetCheckpoint(r.Context(), id)
	if err != nil {
		a.fail(w, err)
		return
	}
	gateway.WriteJSON(w, http.StatusOK, cp)
}

// deleteCheckpoint answers 204, or 404 for a checkpoint that is not (or
// no longer) stored. A restore reading it still gets all of it.
func (a *API) deleteCheckpoint(w http.ResponseWriter, r *http.Request) {
	id, ok := checkpointID(w, r)
	if !ok {
		return
	}
	if err := a.ex.DeleteCheckpoint(r.Context(), id); err != nil {
		a.fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// terminate is idempotent: an execution that ended, or that this gateway
// does not know (any more), is gone either way. dockerhost's Terminate
// answers both with nil; not_found is taken as done too, for an
// ExecutionHost that answers it.
func (a *API) terminate(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !store.ValidHostID(id) {
		// No execution has it, so there is nothing to end; and the mux
		// hands on an escaped "/" (..%2F), which Agents.Forget would
		// have joined to its key directory's path and removed.
		w.WriteHeader(http.StatusNoContent)
		return
	}
	err := a.ex.Terminate(r.Context(), id)
	a.stopAgent(id)
	if err != nil && dockerhost.ErrorCode(err) != dockerhost.CodeNotFound {
		a.fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// stopAgent ends the agent of an execution that ended.
func (a *API) stopAgent(id string) {
	if a.cfg.Agents != nil {
		a.cfg.Agents.Forget(id)
	}
}

// statusOf is the one table from dockerhost error codes to HTTP statuses.
// The execution-ending codes say what ended it: a command over its time
// is the engine not answering in time (504), an output flood is content
// the gateway refuses to process (422), an abort (the caller left, the
// gateway stopping) is the service going away (503).
var statusOf = map[string]int{
	dockerhost.CodeInvalidRequest: http.StatusBadRequest,
	dockerhost.CodeNotFound:       http.StatusNotFound,
	dockerhost.CodeGone:           http.StatusGone,
	dockerhost.CodeConflict:       http.StatusConflict,
	dockerhost.CodeTimeout:        http.StatusGatewayTimeout,
	dockerhost.CodeOutputLimit:    http.StatusUnprocessableEntity,
	dockerhost.CodeAborted:        http.StatusServiceUnavailable,
	dockerhost.CodeAgentLost:      http.StatusBadGateway,
	dockerhost.CodeInterrupted:    http.StatusServiceUnavailable,
	// The gateway's own disk, not the engine: an operator frees it.
	dockerhost.CodeStorageUnavailable: http.StatusServiceUnavailable,
	// The gateway's bound on live sandboxes (--sandbox-max), not this
	// caller's rate: 503, as the exec bodies' memory answers, not 429.
	dockerhost.CodeBusy: http.StatusServiceUnavailable,
}

// keepOnShutdown is parent, ended when it is, but with dockerhost's
// ErrStopping in the cause when the gateway is shutting down: a command
// cut by a restart leaves its execution for the next start to adopt, as a
// crash would, where a caller gone destroys it. A checkpoint, provision or
// restore cut so answers 503 interrupted, leaving nothing of itself, where
// it answered 502, an engine failure.
func keepOnShutdown(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	stop := context.AfterFunc(parent, func() {
		cause := context.Cause(parent)
		if errors.Is(cause, gateway.ErrShuttingDown) {
			cause = stopping{cause}
		}
		cancel(cause)
	})
	return ctx, func() { stop(); cancel(context.Canceled) }
}

// cutByShutdown reports whether the gateway's shutdown ended parent, a
// request's own context. The gateway ends request contexts before it closes
// its tunnels, and net/http's contexts end with it at once; keepOnShutdown's
// context ends in a goroutine of its own, which may run after a command or
// an agent start saw its tunnel close. Without this such a command answered
// 502 agent_lost, where the shutdown cut it.
func cutByShutdown(parent context.Context) bool {
	return errors.Is(context.Cause(parent), gateway.ErrShuttingDown)
}

// stopping is the gateway's shutdown, in its own words, as dockerhost's
// ErrStopping.
type stopping struct{ error }

func (s stopping) Is(target error) bool { return target == dockerhost.ErrStopping }
func (s stopping) Unwrap() error        { return s.error }

// fail answers err: a dockerhost *Error by the table, with its field
// named; ErrNotExecutionHost as a conflict; anything else (the engine
// failing) 502 with a generic message and the detail in the log.
func (a *API) fail(w http.ResponseWriter, err error) {
	var de *dockerhost.Error
	if errors.As(err, &de) {
		status, ok := statusOf[de.Code]
		if ok {
			if de.Code == dockerhost.CodeBusy {
				// A sandbox ends when terminated or at its runtime: a
				// client that retries at once only adds load.
				w.Header().Set("Retry-After", "30")
			}
			gateway.WriteJSON(w, status, wire.ErrorBody{Error: errorOf(de)})
			return
		}
	}
	if errors.Is(err, ErrNotExecutionHost) {
		gateway.WriteError(w, http.StatusConflict, dockerhost.CodeConflict, notExecutionHost(err))
		return
	}
	if errors.Is(err, context.Canceled) {
		// keepOnShutdown's ctx ends so only when the request's does: the
		// caller went away (a shutdown's cause is ErrStopping). No engine
		// failed, and no one reads the answer.
		a.log.Info("executions: the request's caller went away", "err", err)
		gateway.WriteError(w, http.StatusServiceUnavailable, dockerhost.CodeAborted, "the request's caller went away")
		return
	}
	a.log.Error("executions", "err", err)
	gateway.WriteError(w, http.StatusBadGateway, "engine_error", "the container engine failed; see the gateway log")
}

// errorOf is de as the API's JSON error says it, its field named.
func errorOf(de *dockerhost.Error) wire.Error {
	msg := de.Message
	if de.Field != "" {
		msg = de.Field + ": " + msg
	}
	return gateway.EndedError(de.Code, msg, de.Reason, de.EndedAt)
}

// notExecutionHost is the conflict an ErrNotExecutionHost answers: it
// said "executionId: execapi: the id names a host that is not an
// execution: …", a package's name and no way on.
func notExecutionHost(err error) string {
	return "executionId: " + strings.TrimPrefix(err.Error(), "execapi: ") +
		": executions and hosts share ids; provision under another executionId, or leave it out for a new one"
}

// decode reads one bounded JSON object with no unknown fields and no key
// twice in one object into v, answering 400 (naming the field when it
// can) or 413 on failure.
func decode(w http.ResponseWriter, r *http.Request, v any, limit int64) bool {
	return decodeBody(w, r, v, limit, false)
}

// decodeOptional is decode for a route whose body may be left out: an
// empty body leaves v as it is, however it came (Content-Length: 0, or
// chunked with no data, whose length is unknown, -1, until it is read).
func decodeOptional(w http.ResponseWriter, r *http.Request, v any, limit int64) bool {
	if r.ContentLength == 0 {
		return true
	}
	return decodeBody(w, r, v, limit, true)
}

func decodeBody(w http.ResponseWriter, r *http.Request, v any, limit int64, optional bool) bool {
	if msg, ok := gateway.EncodedBody(r); ok {
		gateway.WriteError(w, http.StatusBadRequest, dockerhost.CodeInvalidRequest, msg)
		return false
	}
	body, tap := gateway.TapBody(http.MaxBytesReader(w, r.Body, limit), v)
	body, check := gateway.CheckBody(body, v)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if optional && err == io.EOF { // no JSON value at all: an empty body
		return true
	}
	if err == nil {
		if _, terr := dec.Token(); !errors.Is(terr, io.EOF) {
			err = errors.New("trailing data after the JSON object")
		} else if cerr := check(); cerr != nil {
			gateway.WriteError(w, http.StatusBadRequest, dockerhost.CodeInvalidRequest, cerr.Error())
			return false
		}
	}
	if err == nil {
		return true
	}
	if errors.Is(err, errBodyMemory) {
		w.Header().Set("Retry-After", "5")
		gateway.WriteError(w, http.StatusServiceUnavailable, "busy", fmt.Sprintf(
			"the exec requests in flight hold the %d MiB of memory the gateway keeps for them (their stdin, until their commands end): retry in a few seconds, or send large input as a file over SFTP", ExecBodyMemory>>20))
		return false
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		gateway.WriteError(w, http.StatusRequestEntityTooLarge, "too_large", tooLarge(limit))
		return false
	}
	var ute *json.UnmarshalTypeError
	if errors.As(err, &ute) {
		ute.Field = withoutEmbedded(reflect.TypeOf(v), ute.Field)
	}
	gateway.WriteError(w, http.StatusBadRequest, dockerhost.CodeInvalidRequest, gateway.BodyError(err, tap, v))
	return false
}

// tooLarge says what a body over limit can do instead: it said only
// "request body over 65536 bytes", and a provision's env, which counts
// toward that, or an exec's stdin has a way around it (a file).
func tooLarge(limit int64) string {
	if limit == MaxExecBody {
		return fmt.Sprintf("request body over %d bytes (%d MiB), the most an exec takes: send input this large as a file over SFTP (the execution is a host) and name it in the command", limit, limit>>20)
	}
	return fmt.Sprintf("request body over %d bytes (%d KiB), the most this route takes; a provision's or restore's env counts, and values this large belong in a file in the workspace (SFTP)", limit, limit>>10)
}

// withoutEmbedded is field, an UnmarshalTypeError's path, without the Go
// names of the embedded structs it starts with: encoding/json names
// them, so an exec's "timeoutMs": "100" was answered "ExecRequest.timeoutMs:
// want a JSON integer", a path no body has (execBody embeds ExecRequest).
func withoutEmbedded(t reflect.Type, field string) string {
	for t != nil {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		name, rest, ok := strings.Cut(field, ".")
		if t.Kind() != reflect.Struct || !ok {
			break
		}
		sf, found := t.FieldByName(name)
		if !found || !sf.Anonymous {
			break
		}
		t, field = sf.Type, rest
	}
	return field
}
