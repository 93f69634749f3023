package dockerhost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// fakeDocker is the DockerAPI seam's fake for paths an engine cannot be
// made to take on demand (engine errors, odd labels). Methods a test does
// not set fail.
type fakeDocker struct {
	DockerAPI // nil: unexpected calls panic, failing the test loudly

	mu        sync.Mutex
	list      []container.Summary
	removed   []string
	removeErr map[string]error
	createErr []error  // consumed one per ContainerCreate
	warnings  []string // every ContainerCreate's answer's Warnings
	pulled    []string
	pullErr   error
	// pullStream, when set, is the progress stream a pull answers.
	pullStream string
	renamed    []string // "ID NAME" per ContainerRename
}

var _ DockerAPI = (*fakeDocker)(nil)

func (f *fakeDocker) Ping(context.Context) (types.Ping, error) { return types.Ping{}, nil }

// ContainerInspect fails: what inspects a container (reading its
// environment at adoption) goes on without it.
func (f *fakeDocker) ContainerInspect(context.Context, string) (container.InspectResponse, error) {
	return container.InspectResponse{}, errors.New("fake: no inspect")
}

func (f *fakeDocker) ContainerList(context.Context, container.ListOptions) ([]container.Summary, error) {
	return f.list, nil
}

func (f *fakeDocker) ContainerRemove(_ context.Context, id string, _ container.RemoveOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, id)
	return f.removeErr[id]
}

func (f *fakeDocker) ContainerRename(_ context.Context, id, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.renamed = append(f.renamed, id+" "+name)
	return nil
}

// ContainerWait answers a removal wait at once: whatever the fake was
// removing is gone.
func (f *fakeDocker) ContainerWait(context.Context, string, container.WaitCondition) (<-chan container.WaitResponse, <-chan error) {
	ok := make(chan container.WaitResponse, 1)
	ok <- container.WaitResponse{}
	return ok, make(chan error)
}

func (f *fakeDocker) ContainerCreate(context.Context, *container.Config, *container.HostConfig, *network.NetworkingConfig, *ocispec.Platform, string) (container.CreateResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.createErr) == 0 {
		return container.CreateResponse{}, errors.New("fake: no more creates")
	}
	err := f.createErr[0]
	f.createErr = f.createErr[1:]
	return container.CreateResponse{ID: "c-new", Warnings: f.warnings}, err
}

func (f *fakeDocker) ImagePull(_ context.Context, ref string, _ image.PullOptions) (io.ReadCloser, error) {
	f.pulled = append(f.pulled, ref)
	if f.pullErr != nil {
		return nil, f.pullErr
	}
	if f.pullStream != "" {
		return io.NopCloser(strings.NewReader(f.pullStream)), nil
	}
	return io.NopCloser(strings.NewReader(`{"status":"done"}`)), nil
}

func fakeHost(t *testing.T, f *fakeDocker, now time.Time) *Docker {
	t.Helper()
	h, err := NewDocker(testCtx(t, time.Minute), nil, f, &Config{Owner: "gw", CheckpointDir: t.TempDir(), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

func TestAdoptSortsContainers(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	spec, _ := json.Marshal(redact(validReq()))
	labels := func(id string, expires time.Time, spec string) map[string]string {
		return map[string]string{LabelExecution: id, LabelExpires: fmtUnix(expires), LabelSpec: spec, LabelOwner: "gw"}
	}
	f := &fakeDocker{list: []container.Summary{
		{ID: "c-live", State: "running", Labels: labels("live", now.Add(time.Hour), string(spec))},
		{ID: "c-expired", State: "running", Labels: labels("expired", now.Add(-time.Second), string(spec))},
		{ID: "c-exited", State: "exited", Labels: labels("exited", now.Add(time.Hour), string(spec))},
		{ID: "c-created", State: "created", Labels: labels("created", now.Add(time.Hour), string(spec))},
		{ID: "c-nospec", State: "running", Labels: labels("nospec", now.Add(time.Hour), "{")},
		{ID: "c-badid", State: "running", Labels: labels("../x", now.Add(time.Hour), string(spec))},
		// A run killed while loading a workspace (a git import, a
		// restore): its caller never got an answer, the workspace is half.
		{ID: "c-loading", State: "running", Names: []string{"/hostgate_loading_hostgate-loading"}, Labels: labels("loading", now.Add(time.Hour), string(spec))},
		{ID: "c-loading-pooled", State: "running", Names: []string{"/hostgate_loading_hostgate-lp--1800003600.60000.1048576"},
			Labels: map[string]string{LabelPool: "1", LabelOwner: "gw", LabelSpec: string(spec)}},
	}}
	h := fakeHost(t, f, now)
	got := h.List()
	if len(got) != 1 || got[0].ExecutionID != "live" || got[0].ContainerID != "c-live" || got[0].Resources != small() {
		t.Fatalf("adopted %+v, want only live", got)
	}
	slices.Sort(f.removed)
	if want := []string{"c-badid", "c-created", "c-exited", "c-expired", "c-loading", "c-loading-pooled", "c-nospec"}; !slices.Equal(f.removed, want) {
		t.Fatalf("reaped %v, want %v", f.removed, want)
	}
}

func fmtUnix(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

// TestAdoptGoesOnPastRemovalsThatFail: a start whose engine fails to
// remove what it reaps (a half-loaded container, a previous run's pooled
// one, an ended execution's: overlay's "device or resource busy", say)
// adopts the live ones, records the ended ones as ended, and leaves those
// containers for the next start, saying so. It failed whole: the gateway
// did not start until someone removed the container by hand.
func TestAdoptGoesOnPastRemovalsThatFail(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	spec, _ := json.Marshal(redact(validReq()))
	labels := func(id string, expires time.Time) map[string]string {
		return map[string]string{LabelExecution: id, LabelExpires: fmtUnix(expires), LabelSpec: string(spec), LabelOwner: "gw"}
	}
	busy := errors.New("driver overlay2 failed to remove root filesystem: device or resource busy")
	f := &fakeDocker{
		list: []container.Summary{
			{ID: "c-live", State: "running", Labels: labels("live", now.Add(time.Hour))},
			{ID: "c-loading", State: "running", Names: []string{"/hostgate_loading_hostgate-loading"}, Labels: labels("loading", now.Add(time.Hour))},
			{ID: "c-pooled", State: "running", Names: []string{"/hostgate-pooled-old"}, Labels: map[string]string{LabelPool: "1", LabelOwner: "gw", LabelSpec: string(spec)}},
			{ID: "c-expired", State: "running", Labels: labels("expired", now.Add(-time.Second))},
		},
		removeErr: map[string]error{"c-loading": busy, "c-pooled": busy, "c-expired": busy},
	}
	var logs bytes.Buffer
	tombs := newMemTombs()
	h, err := NewDocker(testCtx(t, time.Minute), slog.New(slog.NewTextHandler(&logs, nil)), f, &Config{Owner: "gw", CheckpointDir: t.TempDir(), Tombstones: tombs, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatalf("start with removals the engine fails: %v", err)
	}
	t.Cleanup(func() { _ = h.Close() })
	if got := h.List(); len(got) != 1 || got[0].ExecutionID != "live" {
		t.Errorf("adopted %+v, want only live", got)
	}
	slices.Sort(f.removed)
	if want := []string{"c-expired", "c-loading", "c-pooled"}; !slices.Equal(f.removed, want) {
		t.Errorf("removals asked %v, want %v", f.removed, want)
	}
	_, err = h.Get(testCtx(t, time.Minute), "expired")
	wantEnded(t, err, EndRuntime, now)
	for _, cid := range []string{"c-loading", "c-pooled", "c-expired"} {
		if !strings.Contains(logs.String(), "docker rm -f "+cid) {
			t.Errorf("the log does not name %s and how to remove it:\n%s", cid, logs.String())
		}
	}
}

func TestDestroyToleratesGoneContainers(t *testing.T) {
	f := &fakeDocker{removeErr: map[string]error{
		"missing":  cerrdefs.ErrNotFound,
		"removing": cerrdefs.ErrConflict, // AutoRemove already at it
		"broken":   errors.New("engine on fire"),
	}}
	h := fakeHost(t, f, time.Now())
	for id, ok := range map[string]bool{"missing": true, "removing": true, "fine": true, "broken": false} {
		if err := h.destroy(id); (err == nil) != ok {
			t.Errorf("destroy(%s) = %v, want success %v", id, err, ok)
		}
	}
}

func TestCreatePullsMissingImageOnce(t *testing.T) {
	f := &fakeDocker{createErr: []error{cerrdefs.ErrNotFound, nil}}
	h := fakeHost(t, f, time.Now())
	cfg, hc, _ := h.policy.ContainerConfig("x", sandboxUIDBase, validReq(), time.Now(), nil)
	id, err := h.create(testCtx(t, time.Minute), cfg, hc, "hostgate-x")
	if err != nil || id != "c-new" || len(f.pulled) != 1 || f.pulled[0] != pinned {
		t.Fatalf("create: %q %v, pulled %v", id, err, f.pulled)
	}

	f = &fakeDocker{createErr: []error{cerrdefs.ErrNotFound}, pullErr: errors.New("registry says no")}
	h = fakeHost(t, f, time.Now())
	_, err = h.create(testCtx(t, time.Minute), cfg, hc, "hostgate-x")
	var e *Error
	if !asError(err, &e) || e.Code != CodeInvalidRequest || e.Field != "image" || !strings.Contains(e.Message, "registry says no") {
		t.Fatalf("unpullable image: %v, want invalid_request on image with the registry's reason in its message", err)
	}

	// A pull the engine began (answering 200) and that failed midway
	// says so in its progress stream only: a blob the registry lost, a
	// connection cut mid-layer. It was taken for a pull that succeeded,
	// and the create after it answered "create container: not found",
	// the engine's failure (502 engine_error).
	f = &fakeDocker{createErr: []error{cerrdefs.ErrNotFound, cerrdefs.ErrNotFound},
		pullStream: `{"status":"Pulling from hostgate/busybox","id":"x"}` + "\n" + `{"errorDetail":{"message":"unknown blob"},"error":"unknown blob"}` + "\n"}
	h = fakeHost(t, f, time.Now())
	_, err = h.create(testCtx(t, time.Minute), cfg, hc, "hostgate-x")
	if !asError(err, &e) || e.Code != CodeInvalidRequest || e.Field != "image" || !strings.Contains(e.Message, "unknown blob") {
		t.Fatalf("pull failed in its stream: %v, want invalid_request on image with the engine's reason in its message", err)
	}

	f = &fakeDocker{createErr: []error{cerrdefs.ErrConflict}}
	h = fakeHost(t, f, time.Now())
	if _, err := h.create(testCtx(t, time.Minute), cfg, hc, "hostgate-x"); ErrorCode(err) != CodeConflict {
		t.Fatalf("name taken: %v, want conflict", err)
	}
}

// TestMissingExecutable: the runtime's "not found" in what an exec printed
// is the image's fault; the same words in a transport error are not.
func TestMissingExecutable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("dockerhost: check image: %w", &execExit{argv0: "tar", code: 127, out: `OCI runtime exec failed: exec failed: unable to start container process: exec: "tar": executable file not found in $PATH: unknown`}), true},
		{&execExit{argv0: "tar", code: 1, out: "tar: bin/sh: No such file or directory"}, true},
		{errors.New(`Error response from daemon: OCI runtime exec failed: exec: "tar": executable file not found in $PATH`), true},
		{&execExit{argv0: "tar", code: 126, out: "container is stopping"}, false},
		{fmt.Errorf("attach exec: %w", errors.New("dial unix /var/run/docker.sock: connect: no such file or directory")), false},
		{errors.New("create exec: executable file not found"), false},
	} {
		if got := missingExecutable(tc.err); got != tc.want {
			t.Errorf("missingExecutable(%q) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// inspectDocker answers ContainerInspect with errs in turn, then with
// not found.
type inspectDocker struct {
	fakeDocker
	errs []error
}

func (f *inspectDocker) ContainerInspect(context.Context, string) (container.InspectResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		return container.InspectResponse{}, err
	}
	return container.InspectResponse{}, cerrdefs.ErrNotFound
}

// An engine that does not answer (restarting) is asked again: the
// container it took with it is gone, not running.
func TestContainerGoneAsksAgain(t *testing.T) {
	old := containerGoneRetry
	containerGoneRetry = time.Millisecond
	t.Cleanup(func() { containerGoneRetry = old })
	f := &inspectDocker{errs: []error{errors.New("Cannot connect to the Docker daemon"), errors.New("Cannot connect to the Docker daemon")}}
	h, err := NewDocker(testCtx(t, time.Minute), nil, f, &Config{Owner: "gw", CheckpointDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	if !h.containerGone("c1") {
		t.Fatal("a container the restarted engine no longer has was taken for running")
	}
}

// TestTerminateUnknown: Terminate is idempotent as DELETE
// /v1/executions/{id} is (204): an id this host never saw succeeds, again
// and again, and stays unknown to the rest of the API (not_found, not
// gone: terminating it recorded no execution).
func TestTerminateUnknown(t *testing.T) {
	h := fakeHost(t, &fakeDocker{}, time.Now())
	ctx := testCtx(t, time.Minute)
	for _, id := range []string{"never-was", "0123456789abcdef0123456789abcdef", "not an id/.."} {
		for range 2 {
			if err := h.Terminate(ctx, id); err != nil {
				t.Fatalf("terminate %q: %v, want success", id, err)
			}
		}
		if _, err := h.Exec(ctx, id, ExecRequest{Command: "true", TimeoutMs: 1000}); ErrorCode(err) != CodeNotFound {
			t.Fatalf("exec %q after its terminate: %v, want not_found", id, err)
		}
	}
}

// TestListExecutions: the live executions, newest first (then by id),
// bounded by the limit with Truncated set; a limit out of range is refused
// naming the field.
func TestListExecutions(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	spec, _ := json.Marshal(redact(validReq()))
	c := func(id string, created int64) container.Summary {
		return container.Summary{ID: "c-" + id, State: "running", Created: created,
			Labels: map[string]string{LabelExecution: id, LabelExpires: fmtUnix(now.Add(time.Hour)), LabelSpec: string(spec), LabelOwner: "gw", LabelUID: "2000000001"}}
	}
	f := &fakeDocker{list: []container.Summary{c("b", 100), c("c", 300), c("a", 100), c("d", 200)}}
	f.list[1].Labels[LabelUID] = "2000000002"
	f.list[2].Labels[LabelUID] = "2000000003"
	f.list[3].Labels[LabelUID] = "2000000004"
	h := fakeHost(t, f, now)
	ctx := testCtx(t, time.Minute)
	ids := func(l *ExecutionList) []string {
		var out []string
		for _, e := range l.Executions {
			out = append(out, e.ExecutionID)
		}
		return out
	}
	l, err := h.ListExecutions(ctx, 0)
	if err != nil || !slices.Equal(ids(l), []string{"c", "d", "a", "b"}) || l.Truncated {
		t.Fatalf("list: %v %+v %v", ids(l), l, err)
	}
	l, err = h.ListExecutions(ctx, 2)
	if err != nil || !slices.Equal(ids(l), []string{"c", "d"}) || !l.Truncated {
		t.Fatalf("list 2: %v %+v %v", ids(l), l, err)
	}
	if l, err := h.ListExecutions(ctx, 4); err != nil || len(l.Executions) != 4 || l.Truncated {
		t.Fatalf("list 4: %+v %v", l, err)
	}
	for _, n := range []int{-1, MaxExecutionListLimit + 1} {
		if _, err := h.ListExecutions(ctx, n); ErrorCode(err) != CodeInvalidRequest || !strings.Contains(err.Error(), "limit") {
			t.Errorf("limit %d: %v, want invalid_request naming limit", n, err)
		}
	}
}

// TestAdoptKeepsAMovedDeadline: a container SetTimeout renamed is adopted
// with the deadline its name records, not its label's (which may have
// passed), and as movable (LabelDeadline); a name of another execution's
// id is not taken for its own.
func TestAdoptKeepsAMovedDeadline(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	spec, _ := json.Marshal(redact(validReq()))
	labels := func(id, uid string) map[string]string {
		return map[string]string{LabelExecution: id, LabelExpires: fmtUnix(now.Add(-time.Minute)), LabelSpec: string(spec), LabelOwner: "gw", LabelUID: uid, LabelDeadline: "1"}
	}
	moved := now.Add(2 * time.Hour)
	f := &fakeDocker{list: []container.Summary{
		{ID: "c-moved", State: "running", Names: []string{"/" + claimedName(claimed{id: "moved", expires: moved, runtimeMs: 60000, maxOutputBytes: 1 << 20})}, Labels: labels("moved", "2000000001")},
		{ID: "c-other", State: "running", Names: []string{"/" + claimedName(claimed{id: "x", expires: moved, runtimeMs: 60000, maxOutputBytes: 1 << 20})}, Labels: labels("x--1", "2000000002")},
	}}
	h := fakeHost(t, f, now)
	got := h.List()
	if len(got) != 1 || got[0].ExecutionID != "moved" || !got[0].ExpiresAt.Equal(moved) {
		t.Fatalf("adopted %+v, want moved only, expiring at %v", got, moved)
	}
	h.mu.Lock()
	movable := h.execs["moved"].movable
	h.mu.Unlock()
	if !movable {
		t.Error("adopted as not movable")
	}
	if !slices.Equal(f.removed, []string{"c-other"}) {
		t.Errorf("reaped %v, want c-other (its label's deadline passed)", f.removed)
	}
}

// TestSetTimeoutRefusals: a runtime out of the policy's range is refused
// naming runtimeMs and the maximum; an unknown execution is not_found.
func TestSetTimeoutRefusals(t *testing.T) {
	h := fakeHost(t, &fakeDocker{}, time.Unix(1_800_000_000, 0))
	ctx := testCtx(t, time.Minute)
	max := h.policy.Max.RuntimeMs
	for _, ms := range []int64{0, -1, max + 1} {
		_, err := h.SetTimeout(ctx, "x", ms)
		if ErrorCode(err) != CodeInvalidRequest || !strings.Contains(err.Error(), "runtimeMs") || !strings.Contains(err.Error(), strconv.FormatInt(max, 10)) {
			t.Errorf("runtimeMs %d: %v", ms, err)
		}
	}
	if _, err := h.SetTimeout(ctx, "x", 1000); ErrorCode(err) != CodeNotFound {
		t.Errorf("unknown execution: %v", err)
	}
}

// TestDeadlineScriptQuotable: poolScript quotes deadlineScript in single
// quotes, so it must hold none.
func TestDeadlineScriptQuotable(t *testing.T) {
	if strings.Contains(deadlineScript, "'") {
		t.Fatalf("deadlineScript holds a single quote: %s", deadlineScript)
	}
}

// TestExpiryAfterSetTimeout: a deadline timer that fires as SetTimeout
// moves the deadline leaves the execution be (the timer SetTimeout made
// ends it); one that fires first marks the execution ending under the
// lock SetTimeout moves deadlines under, so a SetTimeout from then on
// answers gone instead of reporting a deadline moved for an execution
// about to be destroyed. Before, expire let the lock go between its check
// and the destroy, and either order destroyed the execution.
func TestExpiryAfterSetTimeout(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	spec, _ := json.Marshal(redact(validReq()))
	f := &fakeDocker{list: []container.Summary{{ID: "c-x", State: "running",
		Labels: map[string]string{LabelExecution: "x", LabelExpires: fmtUnix(now.Add(time.Hour)), LabelSpec: string(spec), LabelOwner: "gw", LabelUID: "2000000001", LabelDeadline: "1"}}}}
	h := fakeHost(t, f, now)
	ctx := testCtx(t, time.Minute)
	h.mu.Lock()
	e := h.execs["x"]
	old := e.ExpiresAt
	e.ExpiresAt = old.Add(time.Hour) // as SetTimeout moves it, under h.mu
	h.mu.Unlock()
	h.expire("x", e, old)
	if _, err := h.Get(ctx, "x"); err != nil {
		t.Fatalf("after the old deadline's timer fired past a moved deadline: %v, want live", err)
	}
	h.mu.Lock()
	at := e.ExpiresAt
	h.mu.Unlock()
	h.expire("x", e, at)
	if _, err := h.Get(ctx, "x"); ErrorCode(err) != CodeGone || err.(*Error).Reason != EndRuntime {
		t.Fatalf("after its deadline: %v, want gone for the runtime", err)
	}
	if !slices.Equal(f.removed, []string{"c-x"}) {
		t.Errorf("removed %v, want c-x", f.removed)
	}
}

// daemonInvalid is the error the Docker client returns for a 400 from the
// engine: its words after "Error response from daemon: ", an
// InvalidParameter.
type daemonInvalid string

func (e daemonInvalid) Error() string     { return "Error response from daemon: " + string(e) }
func (e daemonInvalid) InvalidParameter() {}

// TestEngineRefusalNamed: a container the engine refuses as invalid
// answers invalid_request with the engine's words, the field they are
// about and what to change; it said "the engine refused the container",
// naming nothing.
func TestEngineRefusalNamed(t *testing.T) {
	for _, tc := range []struct {
		engine, field, fix string
	}{
		{"Range of CPUs is from 0.01 to 2.00, as there are only 2 CPUs available", "resources.cpus", "Config.MaxResources"},
		{"Minimum memory limit allowed is 6MB", "resources.memoryBytes", "Config.MaxResources"},
		{"invalid mount config: something else", "", "tell its operator"},
	} {
		f := &fakeDocker{createErr: []error{daemonInvalid(tc.engine)}}
		h := fakeHost(t, f, time.Now())
		cfg, hc, _ := h.policy.ContainerConfig("x", sandboxUIDBase, validReq(), time.Now(), nil)
		_, err := h.create(testCtx(t, time.Minute), cfg, hc, "hostgate-x")
		var e *Error
		if !asError(err, &e) || e.Code != CodeInvalidRequest || e.Field != tc.field ||
			!strings.Contains(e.Message, "refused the container: "+tc.engine+"; ") || !strings.Contains(e.Message, tc.fix) {
			t.Errorf("engine says %q: %v; want invalid_request on %q with its words and %q", tc.engine, err, tc.field, tc.fix)
		}
	}
	f := &fakeDocker{createErr: []error{daemonInvalid(strings.Repeat("w", 10_000))}}
	h := fakeHost(t, f, time.Now())
	cfg, hc, _ := h.policy.ContainerConfig("x", sandboxUIDBase, validReq(), time.Now(), nil)
	_, err := h.create(testCtx(t, time.Minute), cfg, hc, "hostgate-x")
	var e *Error
	if !asError(err, &e) || len(e.Message) > maxEngineWords+300 {
		t.Errorf("a refusal of 10000 bytes: %d bytes of message, want the engine's words cut to %d", len(e.Message), maxEngineWords)
	}
}
