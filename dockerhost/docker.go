package dockerhost

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/hostgate/hostgate/internal/textcut"
)

// DockerAPI is the subset of the Docker client this package uses.
type DockerAPI interface {
	ContainerCreate(ctx context.Context, config *container.Config, hostConfig *container.HostConfig, networkingConfig *network.NetworkingConfig, platform *ocispec.Platform, containerName string) (container.CreateResponse, error)
	ContainerStart(ctx context.Context, containerID string, options container.StartOptions) error
	ContainerRemove(ctx context.Context, containerID string, options container.RemoveOptions) error
	ContainerInspect(ctx context.Context, containerID string) (container.InspectResponse, error)
	ContainerList(ctx context.Context, options container.ListOptions) ([]container.Summary, error)
	ContainerAttach(ctx context.Context, containerID string, options container.AttachOptions) (types.HijackedResponse, error)
	ContainerRename(ctx context.Context, containerID, newContainerName string) error
	ContainerStatPath(ctx context.Context, containerID, path string) (container.PathStat, error)
	CopyToContainer(ctx context.Context, containerID, dstPath string, content io.Reader, options container.CopyToContainerOptions) error
	VolumeList(ctx context.Context, options volume.ListOptions) (volume.ListResponse, error)
	VolumeRemove(ctx context.Context, volumeID string, force bool) error
	ContainerWait(ctx context.Context, containerID string, condition container.WaitCondition) (<-chan container.WaitResponse, <-chan error)
	ContainerExecCreate(ctx context.Context, containerID string, options container.ExecOptions) (container.ExecCreateResponse, error)
	ContainerExecAttach(ctx context.Context, execID string, config container.ExecAttachOptions) (types.HijackedResponse, error)
	ContainerExecInspect(ctx context.Context, execID string) (container.ExecInspect, error)
	ImagePull(ctx context.Context, refStr string, options image.PullOptions) (io.ReadCloser, error)
	Ping(ctx context.Context) (types.Ping, error)
}

var _ DockerAPI = (*client.Client)(nil)

// Config holds the knobs of a Docker host; nil means all defaults.
type Config struct {
	// Owner names this gateway instance in the hostgate.owner label; Adopt
	// takes over only containers with the same owner. Default "hostgate".
	Owner string
	// Store keeps checkpoints. Default: a LocalStore in CheckpointDir.
	Store CheckpointStore
	// CheckpointDir is the LocalStore directory when Store is nil; one of
	// them is required.
	CheckpointDir string
	// AllowUnpinnedImages admits image references without a sha256 digest.
	AllowUnpinnedImages bool
	// Labels are added to every container.
	Labels map[string]string
	// MaxResources bounds requests; nil means DefaultMaxResources, its
	// CPUs the engine's count and its memory at most the engine's where
	// the engine says them (engineMax).
	MaxResources *Resources
	// RepositoryRoots confine git-worktree repositoryPath values; empty
	// allows any local repository the gateway can read.
	RepositoryRoots []string
	// Tools are the files every container finds in ToolsDir (read-only,
	// owned by root), e.g. the in-container agent binary: a volume written
	// once per content (see toolsVolume).
	Tools []Tool
	// DeadlineTool names the tool (in Tools) that is every container's
	// main process, its PID 1, in place of docker-init and a shell
	// script: run as `NAME __hostgate_deadline SECONDS` (or `-` for the
	// seconds on stdin), it keeps the in-container runtime deadline as
	// internal/deadline does, and reaps orphans as docker-init does,
	// under a uid the sandbox's processes do not have (initUID), so that
	// they cannot signal it. The gateway's agent binary is one (mode
	// 0111: non-dumpable). It must
	// run in every image: a dynamically linked one whose loader an image
	// lacks ends that image's containers as they start. Empty: the
	// script, which sandbox code can stop or kill.
	DeadlineTool string
	// EnvDir, when set, keeps the provision env of executions served from
	// the warm pool (one 0600 file each), whose containers were created
	// without it: an execution adopted after a restart keeps its env.
	// Without it the env lives in memory only.
	EnvDir string
	// TempDir, when set, is every command's TMPDIR unless the provision
	// env sets one (see WorkspaceTempDir). Something in the container must
	// create it: the gateway's agent does (its keys preamble says so).
	TempDir string
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Pool keeps warm pre-created containers; nil or Size 0: none.
	Pool *PoolConfig
	// LoadAgent, when set, is started in a new container while its
	// workspace loads (a restore's tar, a git worktree), with stdin and
	// stdout attached, as a warm container's PoolConfig.Agent is: the
	// execution's first AttachStdio of the same argv takes that
	// attachment, instead of a docker exec and the agent's start after
	// the load. The engine's work for the load's exec and the agent's
	// bounds what that saves (e2e BenchmarkRestore: 0.97x the time of a
	// 1 MiB restore, 1.00x of a 32 MiB one). A container the pool gave
	// with its agent started keeps that one.
	LoadAgent []string
	// Retention is which checkpoints the store keeps; zero: all.
	Retention Retention
	// OutputMemory bounds the bytes of commands' output the host keeps in
	// memory, all commands together; the rest goes to spool files in
	// OutputDir until read. 0 means DefaultOutputMemory; a negative
	// value spools all output.
	OutputMemory int64
	// OutputDir holds the spool files (each unlinked as it is made);
	// default os.TempDir(), often a tmpfs, so in memory after all.
	OutputDir string
	// MaxLive bounds the executions the host runs at once, provisions and
	// restores under way and adopted ones counted; past it Provision and
	// Restore answer CodeBusy. Warm pool containers are not counted: the
	// pool has its own bound (PoolConfig.MaxTotal), and one claimed counts
	// as the execution it becomes. 0 means DefaultMaxLive; a negative
	// value, no bound.
	MaxLive int
	// Tombstones, when set, remembers ended executions, when and why they
	// ended, beyond this process, so that they answer gone rather than
	// not_found after a restart, and their ids are not provisioned
	// again; without it the last 4096 are remembered in memory.
	Tombstones Tombstones
}

// DefaultMaxLive is Config.MaxLive's default. Each execution's own limits
// are mandatory, but nothing else bounded their sum: any admin token could
// provision until the engine's host ran out of memory, pids or disk. What
// every sandbox costs besides its limits (the engine's shim, its agent,
// its cgroup and namespaces, some 20-30 MiB idle) is about 1 GiB at 32,
// which a 2 GiB machine survives, and 32 sandboxes at the web UI's
// default shape (1 CPU, 512 MiB) are as many as a small server runs well.
const DefaultMaxLive = 32

// Tombstones is a durable record of ended execution ids, with when and why
// each ended (the gateway's state store). Its errors are logged, never the
// caller's: an id it misses answers not_found instead of gone.
type Tombstones interface {
	// AddTombstone records id as ended at at, for reason (an End* reason).
	AddTombstone(ctx context.Context, id string, at time.Time, reason string) error
	RemoveTombstone(ctx context.Context, id string) error
	// LookupTombstone returns when id ended and why ("" when that was
	// not recorded); ok is false when id is not recorded as ended.
	LookupTombstone(ctx context.Context, id string) (at time.Time, reason string, ok bool, err error)
}

// tombstoneTimeout bounds one call to Config.Tombstones.
const tombstoneTimeout = 5 * time.Second

// Docker is the ExecutionHost on a Docker engine. It keeps lifecycle and
// ownership only; Policy, ProcessRunner, Workspace and the CheckpointStore
// do the rest.
type Docker struct {
	envDir string // Config.EnvDir
	logger *slog.Logger
	api    DockerAPI
	policy Policy
	runner *ProcessRunner
	ws     *Workspace
	store  CheckpointStore
	owner  string
	labels map[string]string
	// checked are the digest-pinned images that passed checkImage: the
	// same digest is the same content, so later containers skip the exec.
	checked map[string]bool // guarded by mu
	// volumes are the VOLUMEs of digest-pinned images (imageVolumes).
	volumes map[string][]string // guarded by mu
	now     func() time.Time
	pool    *pool // nil: no warm pool
	// loadAgent is Config.LoadAgent.
	loadAgent []string

	// Checkpoints' lifecycle (checkpoints.go).
	rd        readers
	retention Retention
	retainMu  sync.Mutex // one EnforceRetention at a time
	sweep     sweeper
	cpStats   checkpointStats

	// uids are those of this host's containers, one each (uids.go).
	uids uidSet

	// Exec's ways (via.go).
	execRunner, execDocker, execFallbacks atomic.Int64

	mu       sync.Mutex
	execs    map[string]*execution
	pending  map[string]*provisioning // ids being provisioned; Terminate cancels
	removing map[string]*removal      // ended ids: their container's removal under way, or failed (end)
	gone     map[string]ended         // tombstones: id → when and why it ended
	tombs    Tombstones               // Config.Tombstones; nil: memory only
	tombMu   sync.Mutex               // orders writes to tombs (syncTombstone)
	closed   bool
	via      func(executionID string) CommandRunner // SetExecVia; nil: docker exec only
	timersWG sync.WaitGroup                         // expiry callbacks in flight
	maxLive  int                                    // Config.MaxLive; 0: no bound

	// proc is where Stdio.PID reads the engine's processes; tests point
	// it elsewhere to stand for a gateway that sees none of them.
	proc string
	// killStoppedWait bounds KillStopped's script; 0: killStoppedWait.
	killStoppedWait time.Duration
}

var _ ExecutionHost = (*Docker)(nil)

// execution is one live container. Fields other than lock, timer and the
// atomics are immutable after registration.
type execution struct {
	Execution
	req ProvisionRequest // env values removed
	// env is the provision env of a pooled container, created without
	// it: Exec and AttachStdio add it to each process. Memory only.
	env map[string]string
	// agent is a pre-started agent's attachment (PoolConfig.Agent in a
	// pooled container, Config.LoadAgent in one whose workspace loaded),
	// until AttachStdio of agentArgv takes it; guarded by Docker.mu.
	agent     *Stdio
	agentArgv []string
	// uid is the host uid (and gid) of its processes, its own (uids.go).
	uid  int
	lock rwLock // exec shared, checkpoint exclusive
	// oomKills is the cgroup's OOM kill count when last read.
	oomKills atomic.Int64
	// ending is set, to when and why, as a command's timeout, output
	// flood or abort has the container destroyed: the agent's tunnel ends
	// before Exec forgets the execution, and Verify must not take that
	// for an end from outside the host, nor Get for a live execution.
	// forgotten is closed by forget.
	ending    atomic.Pointer[ended]
	forgotten chan struct{}
	timer     *time.Timer // host deadline; guarded by Docker.mu, as ExpiresAt is (SetTimeout)
	// movable is set when the container's main process is a deadline
	// SetTimeout can move (LabelDeadline).
	movable bool
	// cenv is what its container's environment takes of a command's
	// argument space (checkArgSpace), read once; nil until then.
	cenv atomic.Pointer[containerEnv]
	// deadlineMu keeps SetTimeout calls apart.
	deadlineMu sync.Mutex
}

const (
	// maxTombstones bounds the ids remembered as gone (answering 410
	// rather than 404); the oldest are forgotten first.
	maxTombstones = 4096
	// destroyTimeout bounds removing a container, which must go on even
	// when the caller's context has ended.
	destroyTimeout = 60 * time.Second
	// maxCheckedImages bounds the images remembered as checked; past it,
	// new images are checked on every create.
	maxCheckedImages = 1024
)

// NewDocker returns a Docker host after pinging the engine and adopting the
// executions this owner left behind (see Adopt).
func NewDocker(ctx context.Context, logger *slog.Logger, cli DockerAPI, cfg *Config) (*Docker, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	h := &Docker{
		envDir:   cfg.EnvDir,
		logger:   logger,
		api:      cli,
		owner:    cfg.Owner,
		labels:   maps.Clone(cfg.Labels),
		store:    cfg.Store,
		now:      cfg.Now,
		execs:    map[string]*execution{},
		pending:  map[string]*provisioning{},
		removing: map[string]*removal{},
		gone:     map[string]ended{},
		tombs:    cfg.Tombstones,
		checked:  map[string]bool{},
		volumes:  map[string][]string{},
		rd:       readers{n: map[string]int{}},
		proc:     "/proc",

		retention: cfg.Retention,
		loadAgent: slices.Clone(cfg.LoadAgent),
	}
	switch {
	case cfg.MaxLive == 0:
		h.maxLive = DefaultMaxLive
	case cfg.MaxLive > 0:
		h.maxLive = cfg.MaxLive
	}
	if h.retention.MaxAge < 0 || h.retention.MaxBytes < 0 {
		return nil, errors.New("dockerhost: Retention.MaxAge and MaxBytes must not be negative")
	}
	if h.owner == "" {
		h.owner = "hostgate"
	}
	if h.now == nil {
		h.now = time.Now
	}
	h.policy = Policy{AllowUnpinnedImages: cfg.AllowUnpinnedImages, Max: DefaultMaxResources(), RepositoryRoots: cfg.RepositoryRoots, TempDir: cfg.TempDir}
	if cfg.MaxResources != nil {
		h.policy.Max = *cfg.MaxResources
	} else {
		h.policy.Max, h.policy.overMax = engineMax(ctx, logger, cli, h.policy.Max)
	}
	if len(cfg.Tools) > 0 {
		for _, t := range cfg.Tools {
			if !validToolName(t.Name) {
				return nil, fmt.Errorf("dockerhost: tool name %q is not a plain file name", t.Name)
			}
		}
		v, err := newToolsVolume(h.owner, cfg.Tools)
		if err != nil {
			return nil, fmt.Errorf("dockerhost: %w", err)
		}
		h.policy.tools = v
	}
	if cfg.DeadlineTool != "" {
		if !slices.ContainsFunc(cfg.Tools, func(t Tool) bool { return t.Name == cfg.DeadlineTool && t.Mode&0o111 != 0 }) {
			return nil, fmt.Errorf("dockerhost: DeadlineTool %q is not an executable tool of Config.Tools; name one, or leave it empty for the shell deadline", cfg.DeadlineTool)
		}
		h.policy.deadlineTool = ToolsDir + "/" + cfg.DeadlineTool
	}
	if h.store == nil {
		if cfg.CheckpointDir == "" {
			return nil, errors.New("dockerhost: Config.Store or Config.CheckpointDir is required")
		}
		s, err := NewLocalStore(cfg.CheckpointDir)
		if err != nil {
			return nil, err
		}
		s.Logger = logger
		h.store = s
	}
	mem := &outputMemory{limit: cfg.OutputMemory, dir: cfg.OutputDir}
	if mem.limit == 0 {
		mem.limit = DefaultOutputMemory
	}
	if mem.dir != "" {
		if err := os.MkdirAll(mem.dir, 0o700); err != nil {
			return nil, fmt.Errorf("dockerhost: output dir: %w", err)
		}
		sweepSpool(mem.dir)
	}
	h.runner = &ProcessRunner{api: cli, destroy: h.destroy, mem: mem}
	h.ws = &Workspace{runner: h.runner}
	if _, err := cli.Ping(ctx); err != nil {
		return nil, fmt.Errorf("dockerhost: ping engine: %w", err)
	}
	if cfg.Pool != nil && cfg.Pool.Size != 0 {
		p, err := newPool(h, *cfg.Pool)
		if err != nil {
			return nil, err
		}
		h.pool = p
	}
	// Adopt before the pool starts: every pooled container found is then
	// a previous run's, and is reaped.
	if _, err := h.Adopt(ctx); err != nil {
		return nil, err
	}
	h.startSweeper()
	if h.pool != nil {
		h.pool.start()
	}
	return h, nil
}

// Live is the number of executions the host serves now: provisioned or
// adopted and not yet ended.
func (h *Docker) Live() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.execs)
}

// NewClient returns a Docker client from the environment (DOCKER_HOST…)
// that negotiates the API version with the engine.
func NewClient() (*client.Client, error) {
	return client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
}

// Close stops the host's deadline timers and waits for running expiries.
// It leaves executions running: each ends at its in-container deadline,
// and a new host with the same Owner adopts them. It stops the checkpoint
// sweeper (a sweep under way stops between two removals) and the warm pool's
// fills and removes its unclaimed containers (without the pool's stdin
// attachment they could never be claimed). Close is idempotent.
func (h *Docker) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	var agents []*Stdio
	for _, e := range h.execs {
		e.timer.Stop()
		if e.agent != nil {
			agents = append(agents, e.agent)
			e.agent = nil
		}
	}
	h.mu.Unlock()
	for _, s := range agents {
		_ = s.Close() // never claimed: the agent sees its stdin end and exits
	}
	if h.pool != nil {
		h.pool.close()
	}
	h.stopSweeper()
	h.timersWG.Wait()
	h.dropTools()
	return nil
}

var (
	errClosed     = errors.New("dockerhost: host closed")
	errTerminated = errors.New("dockerhost: terminated")
)

// Provision validates req and starts a new execution.
func (h *Docker) Provision(ctx context.Context, req ProvisionRequest) (*Execution, error) {
	if err := h.policy.ValidateProvision(&req); err != nil {
		return nil, err
	}
	var load func(ctx context.Context, containerID, user string) error
	if req.Workspace.Kind == WorkspaceGitWorktree {
		// Resolved before any container: a repository or revision git
		// refuses made and removed one first (about 1 s, and the engine's
		// work) before its answer.
		commit, err := resolveGit(ctx, req.Workspace.RepositoryPath, req.Workspace.Revision)
		if err != nil {
			return nil, err
		}
		load = func(ctx context.Context, cid, user string) error {
			return h.ws.ImportGit(ctx, cid, user, req.Workspace.RepositoryPath, commit, WorkspaceSize(req.Resources))
		}
	}
	return h.provision(ctx, req, "", load)
}

// provision reserves the id, creates and starts the container, checks the
// image, runs load and registers the execution. Any failure
// removes the container: a failed provision leaves nothing behind.
func (h *Docker) provision(ctx context.Context, req ProvisionRequest, restoredFrom string, load func(ctx context.Context, containerID, user string) error) (_ *Execution, err error) {
	id := req.ExecutionID
	var stored *ended
	if id == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	} else {
		// An id that ended (in this process or before it) is not used
		// again: a caller still holding it would reach another sandbox.
		// Asked first: an id that ends after this was live or pending,
		// which the check under h.mu below finds (or its tombstone).
		stored = h.storedTombstone(ctx, id)
	}
	h.mu.Lock()
	end, gone := h.gone[id]
	if e := h.execs[id]; e != nil && e.ending.Load() != nil {
		// Ended already, its container on its way out.
		end, gone = *e.ending.Load(), true
	}
	switch {
	case h.closed:
		h.mu.Unlock()
		return nil, errClosed
	case gone:
		h.mu.Unlock()
		return nil, h.reuseError(id, end)
	case h.execs[id] != nil || h.pending[id] != nil:
		h.mu.Unlock()
		return nil, &Error{Code: CodeConflict, Field: "executionId", Message: fmt.Sprintf("execution %q exists", id)}
	case stored != nil:
		h.tombstoneAt(id, *stored)
		h.mu.Unlock()
		return nil, h.reuseError(id, *stored)
	case h.maxLive > 0 && len(h.execs)+len(h.pending) >= h.maxLive:
		// Counted under the lock that adds to them: a pending entry
		// leaves with a failed provision (below) once its container is
		// removed, an execution with its end (forget).
		n := len(h.execs) + len(h.pending)
		h.mu.Unlock()
		return nil, &Error{Code: CodeBusy, Message: fmt.Sprintf("the gateway runs %d sandboxes (provisions and restores under way included), the most its --sandbox-max allows: terminate one (DELETE /v1/executions/{id}) or wait for one to end, or have the operator raise --sandbox-max", n)}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	pend := &provisioning{cancel: cancel, done: make(chan struct{})}
	h.pending[id] = pend
	h.mu.Unlock()
	defer func() {
		// Last of the defers: what the provision made is removed by now.
		defer close(pend.done)
		if err != nil {
			// Registered, the id left pending there (register); it may be
			// another provision's by now.
			h.mu.Lock()
			delete(h.pending, id)
			h.mu.Unlock()
		}
		cancel(nil)
		if err != nil && errors.Is(context.Cause(ctx), errTerminated) {
			err = &Error{Code: CodeGone, Message: fmt.Sprintf("execution %q was terminated while provisioning", id), Err: err}
		}
		if err != nil {
			// The container went with the error (the defer below, run
			// first); a gateway killed before that reaps a restore's
			// loading container at its next start (Adopt).
			if ierr := interrupted(ctx, fmt.Sprintf("execution %q was not made, and its container was removed; try again once the server is back", id)); ierr != nil {
				err = ierr
			}
		}
	}()

	log := h.logger.With("execution", id)
	t0 := time.Now()
	created := h.now()
	expires := created.Add(time.Duration(req.Resources.RuntimeMs) * time.Millisecond)
	labels := maps.Clone(h.labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelOwner] = h.owner
	var cid string
	// uid is the container's own (a warm container got one when made);
	// it is given back with the container when the provision fails.
	var uid int
	defer func() {
		if err != nil && uid != 0 {
			h.uids.release(uid)
		}
	}()
	var env map[string]string
	var agent *Stdio       // a pre-started agent, until registered
	var agentArgv []string // agent's argv
	defer func() {
		if agent != nil {
			_ = agent.Close()
		}
	}()
	fromPool := false
	// cenv is what the container's environment takes of every command's
	// argument space: read once here, from the claim's inspection of a
	// pooled container or an inspection of a fresh one.
	var cenv *containerEnv
	// A container whose workspace is still loading carries loadingPrefix
	// in its name until the load is done: a gateway killed meanwhile must
	// not adopt it as a healthy execution with half a workspace.
	var name string
	named := func(final string) string {
		if load != nil {
			return loadingPrefix + final
		}
		return final
	}
	if h.pool != nil {
		if pc := h.pool.take(keyOf(req)); pc != nil && !h.pool.stale(ctx, pc, req.Image) {
			cl := claimed{id: id, expires: expires, runtimeMs: req.Resources.RuntimeMs, maxOutputBytes: req.Resources.MaxOutputBytes, claimedAt: created}
			name = named(claimedName(cl))
			ins, cerr := h.claim(ctx, pc, cl, name)
			if cerr != nil {
				if pc.agent != nil {
					_ = pc.agent.Close()
				}
				if ctx.Err() != nil {
					// Terminated or abandoned while claiming: no fresh create.
					if derr := h.destroy(pc.cid); derr != nil {
						log.Error("remove pooled container", "container", pc.cid, "err", derr)
					}
					h.uids.release(pc.uid)
					return nil, context.Cause(ctx)
				}
				h.pool.dead.Add(1)
				h.pool.notify()
				log.Warn("pooled container unusable; creating one", "container", pc.cid, "err", cerr)
				if derr := h.destroy(pc.cid); derr != nil {
					log.Error("remove pooled container", "container", pc.cid, "err", derr)
				}
				h.uids.release(pc.uid)
			} else {
				cid, fromPool, uid = pc.cid, true, pc.uid
				cenv = readContainerEnv(ins)
				if len(req.Env) > 0 {
					// HOME and TMPDIR are in the pooled container's own
					// env already; only a request's env travels apart.
					env = h.policy.provisionEnv(req.Env)
				}
				if pc.agent != nil && agentEnvOK(req.Env) {
					agent, agentArgv = pc.agent, h.pool.cfg.Agent
				} else if pc.agent != nil {
					_ = pc.agent.Close()
				}
			}
		}
	}
	if cid == "" {
		if uid, err = h.takeUID(ctx); err != nil {
			return nil, err
		}
		cfg, hc, cerr := h.policy.ContainerConfig(id, uid, req, expires, labels)
		if cerr != nil {
			return nil, cerr
		}
		name = named("hostgate-" + id)
		if cid, err = h.createStarted(ctx, cfg, hc, name, userOf(uid)); err != nil {
			return nil, err
		}
		if h.pool != nil {
			h.pool.learn(keyOf(req))
		}
		if ins, ierr := h.api.ContainerInspect(ctx, cid); ierr == nil {
			cenv = readContainerEnv(ins)
		} else if ctx.Err() == nil {
			log.Warn("the container's environment was not read; its first command asks again", "container", cid, "err", ierr)
		}
	}
	defer func() {
		if err != nil {
			if derr := h.destroy(cid); derr != nil {
				log.Error("remove failed execution", "container", cid, "err", derr)
			}
		}
	}()
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	if load != nil {
		var early <-chan earlyAgent
		if agent == nil && len(h.loadAgent) > 0 && (!fromPool || agentEnvOK(req.Env)) {
			// A new container has the provision env in its own (a pooled
			// one's agent reads none of it: agentEnvOK).
			early = h.startAgent(ctx, cid, userOf(uid))
		}
		err := load(ctx, cid, userOf(uid))
		if early != nil {
			// Taken whatever the load's outcome: on an error the defer
			// above closes it with the provision.
			if r := <-early; r.err == nil {
				agent, agentArgv = r.s, h.loadAgent
			} else if err == nil && ctx.Err() == nil {
				log.Warn("agent not started during the workspace load; it starts when the execution first attaches it", "container", cid, "err", r.err)
			}
		}
		if err != nil {
			if ErrorCode(err) != "" {
				return nil, err
			}
			return nil, fmt.Errorf("dockerhost: load workspace: %w", err)
		}
		if err := h.api.ContainerRename(ctx, cid, strings.TrimPrefix(name, loadingPrefix)); err != nil {
			return nil, fmt.Errorf("dockerhost: rename the loaded container: %w", err)
		}
	}
	e := &execution{
		Execution: Execution{
			ExecutionID: id, Image: req.Image, ContainerID: cid,
			CreatedAt: created, ExpiresAt: expires, Resources: req.Resources,
			WorkspaceBytes: WorkspaceSize(req.Resources), RestoredFrom: restoredFrom,
		},
		forgotten: make(chan struct{}),
		req:       redact(req),
		env:       env,
		uid:       uid,
		movable:   true,
	}
	if cenv != nil {
		e.cenv.Store(cenv)
	}
	if agent != nil {
		e.agent, e.agentArgv = agent, agentArgv
	}
	if err := h.saveEnv(id, env); err != nil {
		// The execution works; only a restart would lose its env.
		log.Warn("pooled execution's provision env not kept: after a gateway restart its commands run without it", "err", err)
	}
	if err := h.register(ctx, e); err != nil {
		h.dropEnv(id)
		return nil, err
	}
	agent = nil // e owns it
	log.Info("provisioned", "container", cid, "expires", expires, "restoredFrom", restoredFrom, "pooled", fromPool, "took", time.Since(t0))
	h.mu.Lock() // live: a SetTimeout may move its deadline
	out := e.Execution
	h.mu.Unlock()
	return &out, nil
}

// createStarted creates and starts a fresh container, checks the image as
// user (the sandbox's: the container's own may be its init's) and makes
// sure of the tools volume. On error it removes the container.
func (h *Docker) createStarted(ctx context.Context, cfg *container.Config, hc *container.HostConfig, name, user string) (_ string, err error) {
	if err := h.ensureTools(ctx, cfg.Image); err != nil {
		return "", err
	}
	cid, err := h.create(ctx, cfg, hc, name)
	if err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			if derr := h.destroy(cid); derr != nil {
				h.logger.Error("remove failed execution", "container", cid, "err", derr)
			}
		}
	}()
	// Watch the main process: with an init, a missing sleep is not a
	// start error but an immediate exit 127 (and AutoRemove erases it).
	// An image checked before runs no check to fail, so nothing to watch.
	waitCtx, stopWait := context.WithCancel(ctx)
	defer stopWait()
	var exitC <-chan container.WaitResponse
	if !h.imageChecked(cfg.Image) {
		exitC, _ = h.api.ContainerWait(waitCtx, cid, container.WaitConditionNextExit)
	}
	if err := h.api.ContainerStart(ctx, cid, container.StartOptions{}); err != nil {
		if strings.Contains(err.Error(), "executable file not found") || strings.Contains(err.Error(), "no such file") {
			return "", &Error{Code: CodeInvalidRequest, Field: "image", Message: "the image must provide /bin/sh, sleep and tar", Err: err}
		}
		if ierr := h.imageEnvSpace(ctx, cfg); ierr != nil {
			return "", ierr
		}
		return "", fmt.Errorf("dockerhost: start container: %w", err)
	}
	if err := h.prepare(ctx, cid, user, cfg.Image); err != nil {
		if ErrorCode(err) == "" && ctx.Err() == nil {
			// The check may have failed because the main process died:
			// give its exit a moment to arrive and name the cause.
			t := time.NewTimer(5 * time.Second)
			defer t.Stop()
			select {
			case r := <-exitC:
				if r.StatusCode == 126 || r.StatusCode == 127 {
					return "", &Error{Code: CodeInvalidRequest, Field: "image", Message: "the image must provide /bin/sh, sleep and tar", Err: fmt.Errorf("main process sleep exited %d", r.StatusCode)}
				}
				if ierr := h.imageEnvSpace(ctx, cfg); ierr != nil {
					return "", ierr
				}
				return "", fmt.Errorf("dockerhost: the container ended during provisioning (status %d; runtimeMs or memoryBytes too small?): %w", r.StatusCode, err)
			case <-t.C:
			}
		}
		return "", err
	}
	stopWait()
	return cid, nil
}

// prepare checks the image of a started container, once per pinned
// image: one exec of tar that archives /bin/sh (an exec is about 50 ms
// here, a cold create 200). The tools need no step here: the container
// mounts their volume.
func (h *Docker) prepare(ctx context.Context, cid, user, image string) error {
	if h.imageChecked(image) {
		return nil
	}
	if err := h.checkImage(ctx, cid, user); err != nil {
		return err
	}
	if strings.Contains(image, "@sha256:") {
		h.mu.Lock()
		if len(h.checked) < maxCheckedImages {
			h.checked[image] = true
		}
		h.mu.Unlock()
	}
	return nil
}

func (h *Docker) imageChecked(image string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.checked[image]
}

// missingExecutable reports whether err is an exec whose program, or a
// file it was given, is missing: the runtime's or the command's words in
// what an exec printed, or in the engine's answer to it. Exit 126 alone is
// not enough: a dying container fails execs with 126 too. A transport
// error ("dial unix …: no such file or directory", the engine restarting)
// is not the image's fault.
func missingExecutable(err error) bool {
	var xe *execExit
	if !errors.As(err, &xe) && !strings.Contains(err.Error(), "OCI runtime") {
		return false
	}
	s := err.Error()
	return strings.Contains(s, "executable file not found") || strings.Contains(strings.ToLower(s), "no such file or directory")
}

// execExit is a command that ran, or that the runtime could not start,
// and exited non-zero; out is what it (or the runtime) printed.
type execExit struct {
	argv0 string
	code  int
	out   string
}

func (e *execExit) Error() string {
	return fmt.Sprintf("%s exited %d: %s", e.argv0, e.code, toolWords(e.out))
}

func errImageLacks(err error) error {
	return &Error{Code: CodeInvalidRequest, Field: "image", Message: "the image must provide /bin/sh, sleep and tar", Err: err}
}

// create creates the container, pulling a missing image once, with the
// image's VOLUMEs read-only (readOnlyVolumes).
func (h *Docker) create(ctx context.Context, cfg *container.Config, hc *container.HostConfig, name string) (string, error) {
	for attempt := 0; ; attempt++ {
		vols, err := h.imageVolumes(ctx, cfg.Image)
		if cerrdefs.IsNotFound(err) && attempt == 0 {
			// Pulled before the create: a create without the image's
			// VOLUMEs known would give them volumes of the engine's disk.
			if err := h.pullMissing(ctx, cfg.Image); err != nil {
				return "", err
			}
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return "", fmt.Errorf("dockerhost: create container: %w", ctx.Err())
			}
			return "", fmt.Errorf("dockerhost: inspect image: %w", err)
		}
		hc := readOnlyVolumes(hc, vols)
		// Not cancelled with ctx: a create abandoned in flight can still
		// complete in the engine after any removal by name, leaving a
		// container that never starts (so AutoRemove never fires). Wait
		// for the id instead, and remove it.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), destroyTimeout)
		resp, err := h.api.ContainerCreate(cctx, cfg, hc, nil, nil, name)
		cancel()
		switch {
		case err == nil && ctx.Err() != nil:
			if derr := h.destroy(resp.ID); derr != nil {
				h.logger.Error("remove abandoned container", "container", resp.ID, "err", derr)
			}
			return "", fmt.Errorf("dockerhost: create container: %w", ctx.Err())
		case err == nil:
			if lerr := discardedLimit(resp.Warnings); lerr != nil {
				if derr := h.destroy(resp.ID); derr != nil {
					h.logger.Error("remove a container without its limits", "container", resp.ID, "err", derr)
				}
				h.logger.Error("the engine cannot enforce a sandbox limit", "err", lerr)
				return "", lerr
			}
			return resp.ID, nil
		case cerrdefs.IsConflict(err):
			return "", &Error{Code: CodeConflict, Field: "executionId", Message: "a container for this execution exists", Err: err}
		case cerrdefs.IsNotFound(err) && attempt == 0:
			// Gone since its inspection: pulled again.
			if err := h.pullMissing(ctx, cfg.Image); err != nil {
				return "", err
			}
		case cerrdefs.IsInvalidArgument(err) && strings.Contains(err.Error(), "CPU CFS scheduler"):
			// No value of NanoCPUs would do: the engine's kernel cannot
			// bound CPU time at all, which is no fault of the request.
			lerr := fmt.Errorf("dockerhost: the engine cannot enforce resources.cpus (%q), so no sandbox is made: its kernel has no CFS bandwidth control; run the engine on a kernel built with CONFIG_CFS_BANDWIDTH (and the cpu cgroup controller) and restart it: %w",
				textcut.Cut(strings.TrimPrefix(err.Error(), "Error response from daemon: "), maxEngineWords), err)
			h.logger.Error("the engine cannot enforce a sandbox limit", "err", lerr)
			return "", lerr
		case cerrdefs.IsInvalidArgument(err):
			h.logger.Warn("the engine refused a container", "container", name, "err", err)
			return "", engineRefused(err)
		default:
			return "", fmt.Errorf("dockerhost: create container: %w", err)
		}
	}
}

// discardedLimits are the engine's create warnings of a limit it dropped
// (moby's verifyPlatformContainerResources: the kernel lacks the cgroup
// controller), matched lower-cased, with the request's field and what the
// engine's host needs.
var discardedLimits = []struct{ words, field, fix string }{
	{"swap limit capabilities", "resources.memoryBytes", "its processes could swap without bound past the memory limit; enable swap accounting on the engine's host (cgroup v2, or boot a cgroup v1 kernel with swapaccount=1) and restart the engine"},
	{"support memory limit capabilities", "resources.memoryBytes", "its memory had no bound; enable the memory cgroup controller on the engine's host (cgroup v2, or boot with cgroup_enable=memory) and restart the engine"},
	{"pids limit", "resources.pids", "its processes and threads had no bound; enable the pids cgroup controller on the engine's host (cgroup v2, or a cgroup v1 kernel with CONFIG_CGROUP_PIDS and the pids hierarchy mounted) and restart the engine"},
}

// discardedLimit is the error for a container the engine created without
// one of the mandatory limits, nil when it kept them all. The engine
// creates it anyway and says so only in a warning, so without this check
// every sandbox ran with that limit gone and nothing said so.
func discardedLimit(warnings []string) error {
	for _, w := range warnings {
		low := strings.ToLower(w)
		for _, d := range discardedLimits {
			if strings.Contains(low, d.words) {
				return fmt.Errorf("dockerhost: the engine cannot enforce %s (%q), so no sandbox is made: %s", d.field, textcut.Cut(w, maxEngineWords), d.fix)
			}
		}
	}
	return nil
}

// imageVolumes are the VOLUMEs image declares, from the engine's image
// inspection (nil without one: a DockerAPI that has none); a pinned
// image's are kept, as its content cannot change. An image the engine
// lacks is a not-found error.
func (h *Docker) imageVolumes(ctx context.Context, ref string) ([]string, error) {
	ii, ok := h.api.(imageInspector)
	if !ok {
		return nil, nil
	}
	pinned := strings.Contains(ref, "@sha256:")
	if pinned {
		h.mu.Lock()
		vols, ok := h.volumes[ref]
		h.mu.Unlock()
		if ok {
			return vols, nil
		}
	}
	ins, err := ii.ImageInspect(ctx, ref)
	if err != nil {
		return nil, err
	}
	vols := []string{}
	if ins.Config != nil {
		for v := range ins.Config.Volumes {
			vols = append(vols, v)
		}
	}
	slices.Sort(vols)
	if pinned {
		h.mu.Lock()
		if len(h.volumes) < maxCheckedImages {
			h.volumes[ref] = vols
		}
		h.mu.Unlock()
	}
	return vols, nil
}

// engineFields map words of the engine's refusals of a container to the
// request's field they are about, first match winning ("Range of CPUs is
// from 0.01 to 2.00, as there are only 2 CPUs available", "Minimum memory
// limit allowed is 6MB").
var engineFields = []struct{ word, field string }{
	{"cpu", "resources.cpus"},
	{"memory", "resources.memoryBytes"},
	{"pids", "resources.pids"},
	{"tmpfs", "resources.diskBytes"},
	{"image", "image"},
}

// maxEngineWords bounds the engine's words passed on to the caller.
const maxEngineWords = 512

// engineRefused is the answer to a container the engine refused as
// invalid (InvalidParameter). Validation lets through only what the
// gateway's maximum allows, so what the engine refuses is beyond what it
// has (more CPUs than it has, when an operator's Config.MaxResources, or
// the gateway's own count where the engine did not say its own at start,
// allows them): the engine's words say what it accepts, and the field
// they are about is named. It said only "the engine refused the
// container".
func engineRefused(err error) *Error {
	words := strings.TrimPrefix(err.Error(), "Error response from daemon: ")
	words = textcut.Cut(words, maxEngineWords)
	field := ""
	low := strings.ToLower(words)
	for _, f := range engineFields {
		if strings.Contains(low, f.word) {
			field = f.field
			break
		}
	}
	fix := "change the request; if it is not about the request, the gateway's configuration is what the engine refused: tell its operator"
	if strings.HasPrefix(field, "resources.") {
		fix = "ask for a " + field + " the engine accepts; the gateway's maximum allowed this one, so its operator should lower it (Config.MaxResources) to what the engine accepts"
	}
	return &Error{Code: CodeInvalidRequest, Field: field, Err: err,
		Message: "the engine refused the container: " + words + "; " + fix}
}

// pullFailed is the answer to an image the engine lacks and could not
// pull: the registry's reason (manifest unknown, connection refused,
// unauthorized) is what the caller can act on.
func (h *Docker) pullFailed(ref string, err error) *Error {
	h.logger.Warn("image pull failed", "image", ref, "err", err)
	return &Error{Code: CodeInvalidRequest, Field: "image", Message: "the engine does not have the image and could not pull it: " + err.Error(), Err: err}
}

// pullMissing pulls ref, which the engine lacks, for a create: ctx's
// error if it ended, else the pull's failure as the request's.
func (h *Docker) pullMissing(ctx context.Context, ref string) error {
	if err := h.pull(ctx, ref); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return h.pullFailed(ref, err)
	}
	return nil
}

func (h *Docker) pull(ctx context.Context, ref string) error {
	rc, err := h.api.ImagePull(ctx, ref, image.PullOptions{})
	if err != nil {
		return err
	}
	defer rc.Close()
	return pullStreamError(io.LimitReader(rc, 64<<20))
}

// pullStreamError reads a pull's progress stream (JSON messages, bounded
// by the caller) to its end and returns the error the first message that
// has one says. The engine answers 200 once a pull has begun, so a pull
// that fails midway (a blob the registry lost, a connection cut mid-layer)
// says so only there: read as a pull that succeeded, it made the create
// after it answer "not found", the engine's failure.
func pullStreamError(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var m struct {
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		err := dec.Decode(&m)
		switch {
		case err == io.EOF:
			return nil
		case err != nil:
			return fmt.Errorf("read the pull's progress: %w", err)
		case m.ErrorDetail.Message != "":
			return errors.New(m.ErrorDetail.Message)
		case m.Error != "":
			return errors.New(m.Error)
		}
	}
}

// checkImage fails when the image lacks what executions need: sleep is
// the main process (its absence shows as the init exiting 127), and tar is
// run here directly, not through the shell, because a standalone busybox
// shell finds applets that exec cannot.
func (h *Docker) checkImage(ctx context.Context, cid, user string) error {
	// One exec checks both: tar runs, and archives /bin/sh, so it exists.
	// sleep gets its own: the main process (deadlineScript) runs it from
	// the shell, whose failure there would end the container after the
	// provision answered, where a missing sleep as the main process
	// failed the start.
	for _, argv := range [][]string{
		{"tar", "-cf", "/dev/null", "-C", "/", "bin/sh"},
		{"sleep", "0"},
	} {
		var out strings.Builder
		code, err := h.runner.run(ctx, process{
			containerID: cid,
			user:        user,
			argv:        argv,
			dir:         "/",
			env:         ownEnv,
			stdout:      &capWriter{w: &out, left: 1024},
			stderr:      &capWriter{w: &out, left: 1024},
		})
		if err == nil && code != 0 {
			err = &execExit{argv0: argv[0], code: code, out: strings.TrimSpace(out.String())}
		}
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return ctx.Err()
		case missingExecutable(err):
			return errImageLacks(err)
		default:
			return fmt.Errorf("dockerhost: check image: %w", err)
		}
	}
	return nil
}

// register makes e live and arms its host deadline. It fails when the
// host closed or ctx ended meanwhile; under h.mu, so a Terminate of a
// pending id either cancels ctx before this or finds e live after.
func (h *Docker) register(ctx context.Context, e *execution) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return errClosed
	}
	if ctx.Err() != nil {
		h.mu.Unlock()
		return context.Cause(ctx)
	}
	delete(h.gone, e.ExecutionID)
	// Live now: a Terminate from here on ends it through lookup, rather
	// than cancelling a provision that is done.
	delete(h.pending, e.ExecutionID)
	h.execs[e.ExecutionID] = e
	id := e.ExecutionID
	e.timer = h.expiryTimer(id, e)
	h.mu.Unlock()
	if e.req.ExecutionID != "" {
		// The caller named an id, which provision refused if it had
		// ended; Adopt reaps a container whose id the store records as
		// ended, so a stale tombstone here is one the store did not
		// answer for.
		h.syncTombstone(id)
	}
	return nil
}

// tombstoneCall runs one Config.Tombstones call within ctx and
// tombstoneTimeout, and logs its failure. Writes pass a background ctx: a
// caller gone must not leave the record behind the host.
func (h *Docker) tombstoneCall(ctx context.Context, what, id string, f func(ctx context.Context) error) {
	ctx, cancel := context.WithTimeout(ctx, tombstoneTimeout)
	defer cancel()
	if err := f(ctx); err != nil {
		h.logger.Warn("execution tombstone "+what+" failed; after a restart the id may answer not_found instead of gone", "execution", id, "err", err)
	}
}

// syncTombstone makes Config.Tombstones say what the host says of id now:
// ended (a memory tombstone) or not. Not under h.mu; under tombMu, so that
// of an end and a provision that names the id again, racing, the last
// write says the latest state.
func (h *Docker) syncTombstone(id string) {
	if h.tombs == nil {
		return
	}
	h.tombMu.Lock()
	defer h.tombMu.Unlock()
	h.mu.Lock()
	end, gone := h.gone[id]
	live := h.execs[id] != nil
	h.mu.Unlock()
	switch {
	case gone && !live:
		h.tombstoneCall(context.Background(), "add", id, func(ctx context.Context) error { return h.tombs.AddTombstone(ctx, id, end.at, end.reason) })
	case live:
		h.tombstoneCall(context.Background(), "remove", id, func(ctx context.Context) error { return h.tombs.RemoveTombstone(ctx, id) })
	}
}

// expiryTimer is e's host deadline timer for its ExpiresAt now; h.mu is
// held.
func (h *Docker) expiryTimer(id string, e *execution) *time.Timer {
	at := e.ExpiresAt
	return time.AfterFunc(at.Sub(h.now()), func() { h.expire(id, e, at) })
}

// expire is the host deadline at: the execution ends even if its
// in-container sleep was somehow defeated.
func (h *Docker) expire(id string, e *execution, at time.Time) {
	h.mu.Lock()
	if h.closed || h.execs[id] != e || !e.ExpiresAt.Equal(at) {
		// Ended, or SetTimeout moved the deadline as this timer fired:
		// the timer it made ends it.
		h.mu.Unlock()
		return
	}
	// Ending from here on, under the lock SetTimeout moves the deadline
	// under: it answers gone rather than move the deadline of an execution
	// about to be destroyed (and so does Get, as for a command's end).
	e.ending.CompareAndSwap(nil, &ended{at: h.now(), reason: EndRuntime})
	h.timersWG.Add(1)
	h.mu.Unlock()
	defer h.timersWG.Done()
	h.logger.Info("runtime deadline reached", "execution", id)
	if err := h.end(context.Background(), id, e, EndRuntime); err != nil {
		h.logger.Error("remove expired execution", "execution", id, "err", err)
	}
}

// forget removes e from the live set and remembers its id as gone, for
// reason (End*). It reports whether e was still live.
func (h *Docker) forget(id string, e *execution, reason string) bool {
	return h.forgetRemoving(id, e, reason, nil)
}

// forgetRemoving is forget that, when e was live, records r as the
// removal of its container under the same lock: no one finds it gone
// without finding r.
func (h *Docker) forgetRemoving(id string, e *execution, reason string, r *removal) bool {
	h.mu.Lock()
	if h.execs[id] != e {
		h.mu.Unlock()
		return false
	}
	delete(h.execs, id)
	if r != nil && (!r.failed() || len(h.removing) < maxTombstones) {
		h.removing[id] = r
	}
	h.uids.release(e.uid)
	if e.forgotten != nil {
		close(e.forgotten)
	}
	e.timer.Stop()
	if end := e.ending.Load(); end != nil {
		// A command's end was destroying it: that is why it ended, though
		// a Terminate meanwhile forgets it first.
		h.tombstoneAt(id, *end)
	} else {
		h.tombstone(id, reason)
	}
	agent := e.agent
	e.agent = nil
	h.mu.Unlock()
	h.syncTombstone(id)
	h.dropEnv(id)
	if agent != nil {
		_ = agent.Close()
	}
	return true
}

// envFile is where EnvDir keeps id's provision env.
func (h *Docker) envFile(id string) string { return filepath.Join(h.envDir, id+".env.json") }

// saveEnv keeps a pooled execution's provision env in EnvDir.
func (h *Docker) saveEnv(id string, env map[string]string) error {
	if h.envDir == "" || len(env) == 0 {
		return nil
	}
	b, err := json.Marshal(env)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(h.envDir, 0o700); err != nil {
		return fmt.Errorf("dockerhost: env dir: %w", err)
	}
	// A new file of its own, renamed into place: a fixed temporary name
	// could be a planted link, which a write would follow.
	if err := writeFileAtomic(h.envFile(id), b); err != nil {
		return fmt.Errorf("dockerhost: keep the provision env: %w", err)
	}
	return nil
}

// loadEnv reads what saveEnv kept for id; nil when nothing was.
func (h *Docker) loadEnv(id string) map[string]string {
	if h.envDir == "" {
		return nil
	}
	b, err := readRegular(h.envFile(id))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			h.logger.Warn("read an adopted execution's provision env; its commands run without it", "execution", id, "err", err)
		}
		return nil
	}
	var env map[string]string
	if err := json.Unmarshal(b, &env); err != nil || validateEnv("env", env) != nil {
		h.logger.Warn("an adopted execution's kept provision env is unreadable; its commands run without it", "execution", id, "err", err)
		return nil
	}
	return env
}

func (h *Docker) dropEnv(id string) {
	if h.envDir != "" {
		_ = os.Remove(h.envFile(id))
	}
}

// tombstone remembers id as gone now, for reason (End*); h.mu must be
// held.
func (h *Docker) tombstone(id, reason string) {
	h.tombstoneAt(id, ended{at: h.now(), reason: reason})
}

// tombstoneAt remembers id as gone as end says; h.mu must be held.
func (h *Docker) tombstoneAt(id string, end ended) {
	if _, ok := h.gone[id]; !ok && len(h.gone) >= maxTombstones {
		var oldestID string
		var oldest time.Time
		for k, t := range h.gone {
			if oldestID == "" || t.at.Before(oldest) {
				oldestID, oldest = k, t.at
			}
		}
		delete(h.gone, oldestID)
	}
	h.gone[id] = end
}

// storedTombstone asks Config.Tombstones whether id ended before this
// process knew of it; nil when not (or when there is no such store, or id
// could not be an execution's).
func (h *Docker) storedTombstone(ctx context.Context, id string) *ended {
	if h.tombs == nil || !executionIDRE.MatchString(id) {
		return nil
	}
	var end ended
	var ok bool
	h.tombstoneCall(ctx, "lookup", id, func(ctx context.Context) (err error) {
		end.at, end.reason, ok, err = h.tombs.LookupTombstone(ctx, id)
		return err
	})
	if !ok {
		return nil
	}
	if end.reason == "" {
		end.reason = EndUnknown
	}
	return &end
}

// end forgets e, which ended for reason (End*), and removes its container.
// When another end forgot it first, it waits for that one's removal (as
// long as ctx lets it) and answers as it did.
func (h *Docker) end(ctx context.Context, id string, e *execution, reason string) error {
	r := &removal{cid: e.ContainerID, done: make(chan struct{})}
	if !h.forgetRemoving(id, e, reason, r) {
		return h.awaitRemoval(ctx, id)
	}
	return h.remove(id, r)
}

// remove runs removal r of id's container. A failed one is kept (up to
// maxTombstones of them), for the next Terminate to try again: it
// answered success, nothing of the execution left to end, while the
// container the engine had not removed ran on.
func (h *Docker) remove(id string, r *removal) error {
	r.err = h.destroy(r.cid)
	h.mu.Lock()
	if r.err == nil || len(h.removing) > maxTombstones {
		delete(h.removing, id)
	}
	h.mu.Unlock()
	close(r.done)
	return r.err
}

// provisioning is a provision under way: Terminate cancels it and waits
// for done, closed once what it made is removed (or it registered).
type provisioning struct {
	cancel context.CancelCauseFunc
	done   chan struct{}
}

// removal is an ended execution's container being removed (end): a
// Terminate that finds the execution gone meanwhile waits for it, so that
// its success means, as the first's does, that no container is left. Of
// two concurrent Terminates one answered in 0.5 to 30 ms, the container
// and its processes still there (the other after 100 to 140 ms, gone).
type removal struct {
	cid  string
	done chan struct{}
	err  error // set before done closes
}

// failed reports whether r is over, and failed.
func (r *removal) failed() bool {
	select {
	case <-r.done:
		return r.err != nil
	default:
		return false
	}
}

// awaitRemoval waits for the removal of id's container under way, if
// any, and answers its error; after one that failed, it tries again.
func (h *Docker) awaitRemoval(ctx context.Context, id string) error {
	h.mu.Lock()
	r := h.removing[id]
	if r != nil && r.failed() {
		r = &removal{cid: r.cid, done: make(chan struct{})}
		h.removing[id] = r
		h.mu.Unlock()
		return h.remove(id, r)
	}
	h.mu.Unlock()
	if r == nil {
		return nil
	}
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return fmt.Errorf("wait for its container's removal under way: %w", ctx.Err())
	}
}

// destroy force-removes a container, killing every process in it. It runs
// on its own deadline: a cancelled caller must not leave it half-alive.
func (h *Docker) destroy(cid string) error {
	ctx, cancel := context.WithTimeout(context.Background(), destroyTimeout)
	defer cancel()
	// RemoveVolumes: an image's VOLUMEs get anonymous volumes at create;
	// named ones (the tools) are never removed this way.
	err := h.api.ContainerRemove(ctx, cid, container.RemoveOptions{Force: true, RemoveVolumes: true})
	// Not found: already gone.
	if err == nil || cerrdefs.IsNotFound(err) {
		return nil
	}
	if cerrdefs.IsConflict(err) {
		// AutoRemove is removing it (the container just exited). Wait until
		// it is gone, so "destroyed" means no container is left: a pool
		// Close or a Terminate followed by a listing must not still see it.
		okC, errC := h.api.ContainerWait(ctx, cid, container.WaitConditionRemoved)
		select {
		case <-okC:
			return nil
		case werr := <-errC:
			if werr == nil || cerrdefs.IsNotFound(werr) {
				return nil
			}
			return fmt.Errorf("remove container: wait for the removal in progress: %w", werr)
		}
	}
	return fmt.Errorf("remove container: %w", err)
}

// lookup returns the live execution id, or a not_found/gone *Error; ctx
// bounds asking Config.Tombstones.
func (h *Docker) lookup(ctx context.Context, id string) (*execution, error) {
	h.mu.Lock()
	e := h.execs[id]
	end, gone := h.gone[id]
	h.mu.Unlock()
	if e != nil {
		return e, nil
	}
	if !gone {
		// Ended before this process started, perhaps.
		if stored := h.storedTombstone(ctx, id); stored != nil {
			end, gone = *stored, true
			// Remembered, so that polling it does not ask the store again.
			h.mu.Lock()
			if h.execs[id] == nil {
				h.tombstoneAt(id, end)
			}
			h.mu.Unlock()
		}
	}
	if gone {
		return nil, h.goneError(id, end)
	}
	return nil, &Error{Code: CodeNotFound, Message: fmt.Sprintf("no execution %q", textcut.Cut(id, 64))}
}

// endedDuring is lerr, the lookup of e after its command, saying so when
// e's runtime ran out: "has ended" did not tell it from a DELETE.
func (h *Docker) endedDuring(e *execution, lerr error) error {
	if ErrorCode(lerr) == CodeGone && !h.now().Before(h.expiresAt(e)) {
		return runtimeEnded(e)
	}
	return lerr
}

// runtimeEnded is the error of a command its execution's runtime cut.
func runtimeEnded(e *execution) error {
	return &Error{Code: CodeGone, Message: fmt.Sprintf("execution %q reached the end of its runtime (resources.runtimeMs %d) while the command ran", e.ExecutionID, e.Resources.RuntimeMs)}
}

// live is lookup, with an execution that a command's timeout, output
// flood or abort is destroying gone already, for that reason: audit31's
// Get answered it as live for the 0.35 s its container took to go.
func (h *Docker) live(ctx context.Context, id string) (*execution, error) {
	e, err := h.lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	if end := e.ending.Load(); end != nil {
		return nil, h.goneError(id, *end)
	}
	return e, nil
}

// Get returns a live execution; one being destroyed is gone already.
func (h *Docker) Get(ctx context.Context, executionID string) (*Execution, error) {
	e, err := h.live(ctx, executionID)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	out := e.Execution
	h.mu.Unlock()
	return &out, nil
}

// Verify is Get, and asks the engine too: an execution whose container is
// gone or stopped (killed outside the host, its main process dead) is
// ended here as well, answering code gone from then on. Get trusts the
// host's own records, which only a Terminate, a deadline or a failed
// command update.
func (h *Docker) Verify(ctx context.Context, executionID string) error {
	e, err := h.lookup(ctx, executionID)
	if err != nil {
		return err
	}
	if e.ending.Load() != nil && e.forgotten != nil {
		// A command's end is destroying it, and Exec forgets it once the
		// container is gone: gone is then true of the container too.
		t := time.NewTimer(destroyTimeout)
		defer t.Stop()
		select {
		case <-e.forgotten:
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		return h.goneError(executionID, *e.ending.Load())
	}
	if !h.containerGone(e.ContainerID) {
		return nil
	}
	if h.end(ctx, executionID, e, EndContainerGone) == nil {
		h.logger.Info("execution ended outside the host: its container is gone or stopped", "execution", executionID, "container", e.ContainerID)
	}
	_, err = h.lookup(ctx, executionID)
	return err
}

// ExecutionList is a page of ListExecutions: the newest first.
type ExecutionList struct {
	Executions []Execution `json:"executions"`
	// Truncated says that older live executions were left out by the
	// limit.
	Truncated bool `json:"truncated"`
}

// Bounds of ListExecutions' limit.
const (
	DefaultExecutionListLimit = 1000
	MaxExecutionListLimit     = 10000
)

// ListExecutions returns the live executions, the newest (by CreatedAt,
// then id) first, at most limit of them (0 means
// DefaultExecutionListLimit; it is at most MaxExecutionListLimit). One a
// command's timeout, output flood or abort is destroying is left out, as
// Get answers it gone.
func (h *Docker) ListExecutions(_ context.Context, limit int) (*ExecutionList, error) {
	switch {
	case limit == 0:
		limit = DefaultExecutionListLimit
	case limit < 0 || limit > MaxExecutionListLimit:
		return nil, invalid("limit", "want 1-%d", MaxExecutionListLimit)
	}
	h.mu.Lock()
	out := make([]Execution, 0, min(len(h.execs), limit+1))
	for _, e := range h.execs {
		if e.ending.Load() == nil {
			out = append(out, e.Execution)
		}
	}
	h.mu.Unlock()
	return pageExecutions(out, limit), nil
}

// pageExecutions sorts execs newest first and keeps the first limit.
func pageExecutions(execs []Execution, limit int) *ExecutionList {
	slices.SortFunc(execs, func(a, b Execution) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ExecutionID, b.ExecutionID)
	})
	l := &ExecutionList{Executions: execs}
	if len(execs) > limit {
		l.Executions, l.Truncated = execs[:limit:limit], true
	}
	return l
}

// List returns the live executions.
func (h *Docker) List() []Execution {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Execution, 0, len(h.execs))
	for _, e := range h.execs {
		out = append(out, e.Execution)
	}
	return out
}

// Exec runs one command; see ExecutionHost. With SetExecVia it runs
// through the execution's CommandRunner when there is one, else (or when
// that cannot start it) through the Docker exec API. Its output is read
// into memory whole: ExecOutput leaves it where the host keeps it.
func (h *Docker) Exec(ctx context.Context, executionID string, req ExecRequest) (*ExecResult, error) {
	out, err := h.ExecOutput(ctx, executionID, req)
	if err != nil {
		return nil, outputInMemory(err)
	}
	return out.Result()
}

// ExecOutput is Exec with the output as the host keeps it (in its output
// memory, the rest in spool files: Config.OutputMemory): the caller reads
// it and closes the result, and the Output of an *Error of a command cut
// midway (what the command printed before it was cut: Error.Output).
func (h *Docker) ExecOutput(ctx context.Context, executionID string, req ExecRequest) (_ *ExecOutput, err error) {
	if err := h.policy.ValidateExec(&req); err != nil {
		return nil, err
	}
	e, err := h.live(ctx, executionID)
	if err != nil {
		return nil, err
	}
	// The timeout covers the wait behind a checkpoint too: a caller that
	// gave a command a second must not wait for a checkpoint of minutes.
	waitCtx, cancel := context.WithTimeout(ctx, time.Duration(req.TimeoutMs)*time.Millisecond)
	t0 := time.Now()
	err = e.lock.RLock(waitCtx)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			if writer, readers := e.lock.taking(); !writer && readers > 0 {
				// Not being taken: a checkpoint waits for the commands
				// running (and holds new ones back, or they could starve
				// it), which may run for as long as their own timeoutMs.
				commands := "commands"
				if readers == 1 {
					commands = "command"
				}
				return nil, &Error{Code: CodeConflict, Message: fmt.Sprintf("a checkpoint of execution %q waits for the %d %s running in it to end, and holds new commands back meanwhile; the command did not run in its timeoutMs (%d): retry once they end, or cancel the checkpoint's request", executionID, readers, commands, req.TimeoutMs)}
			}
			return nil, &Error{Code: CodeConflict, Message: fmt.Sprintf("execution %q was taking a checkpoint for the command's whole timeoutMs (%d); the command did not run: try again, or give it a longer timeoutMs", executionID, req.TimeoutMs)}
		}
		if ierr := interrupted(ctx, "the command did not run (it waited for a checkpoint); the execution is kept for the next start"); ierr != nil {
			return nil, ierr
		}
		return nil, fmt.Errorf("dockerhost: wait for checkpoint: %w", err)
	}
	defer e.lock.RUnlock()
	req.TimeoutMs = max(1, req.TimeoutMs-time.Since(t0).Milliseconds())
	if len(e.env) > 0 {
		// A pooled container was created without the provision env; the
		// command's own env wins, as it would over a container's.
		env := maps.Clone(e.env)
		maps.Copy(env, req.Env)
		req.Env = env
	}
	if err := h.checkArgSpace(ctx, e, &req); err != nil {
		return nil, err
	}
	res, way, err := h.runner.exec(ctx, e.ContainerID, userOf(e.uid), req, e.Resources.MaxOutputBytes, h.runnerFor(executionID), func(err error) {
		// Often by design (a busy tunnel, an environment the runner cannot
		// reproduce) and counted in ExecStats: not a warning each time.
		h.logger.Debug("command runner did not start the command; docker exec runs it", "execution", executionID, "err", err)
	}, func(code string) { e.ending.Store(&ended{at: h.now(), reason: code}) })
	// cut is what the command printed before it was cut: every error
	// below that says how it ended carries it on, and one that does not
	// gives back its memory.
	cut := cutOutput(err)
	defer func() {
		if cut != nil && cutOutput(err) != cut {
			_ = cut.Close()
		}
	}()
	switch way {
	case wayRunner:
		h.execRunner.Add(1)
	case wayFallback:
		h.execFallbacks.Add(1)
		h.execDocker.Add(1)
	default:
		h.execDocker.Add(1)
	}
	switch ErrorCode(err) {
	case CodeTimeout, CodeOutputLimit, CodeAborted:
		// The runner destroyed the container; when the engine did not
		// remove it, the failed removal is kept for a Terminate to try
		// again (awaitRemoval).
		var de *destroyError
		if errors.As(err, &de) {
			failed := &removal{cid: e.ContainerID, done: make(chan struct{}), err: de.err}
			close(failed.done)
			h.forgetRemoving(executionID, e, ErrorCode(err), failed)
		} else {
			h.forget(executionID, e, ErrorCode(err))
		}
		h.logger.Info("execution destroyed", "execution", executionID, "reason", ErrorCode(err))
		return nil, err
	}
	if err != nil {
		gone, engineErr := h.containerState(e.ContainerID)
		if engineErr != nil && ErrorCode(err) == CodeAgentLost {
			// "Later commands run as usual" would be a guess: the engine
			// stopping takes its containers, and the agents with them.
			cause := err
			if inner := (*Error)(nil); errors.As(err, &inner) && inner.Err != nil {
				cause = inner.Err
			}
			return nil, &Error{Code: CodeAgentLost, Message: fmt.Sprintf("the execution's agent ended while the command ran, and the Docker engine has not answered since (%v): the command's exit status and the rest of its output are unknown, and so is whether execution %q lives (the engine may be stopping or restarting)", engineErr, executionID), Err: cause, Output: cut}
		}
		if gone {
			reason := EndContainerGone
			if !h.now().Before(h.expiresAt(e)) {
				reason = EndRuntime
			}
			h.forget(executionID, e, reason)
			if reason == EndRuntime {
				// The deadline removed it while docker exec attached
				// ("unable to upgrade to tcp, received 500"): say so.
				return nil, withOutput(runtimeEnded(e), cut)
			}
			return nil, &Error{Code: CodeGone, Message: fmt.Sprintf("execution %q ended during the command", executionID), Err: err, Output: cut}
		}
		if _, lerr := h.lookup(ctx, executionID); lerr != nil {
			return nil, withOutput(h.endedDuring(e, lerr), cut) // terminated or expired meanwhile
		}
		return nil, fmt.Errorf("dockerhost: exec: %w", err)
	}
	defer func() {
		if err != nil && res != nil {
			_ = res.Close()
		}
	}()
	if _, err := h.lookup(ctx, executionID); err != nil {
		// Terminated or expired while the command ran: its exit status
		// is the kill, not the command's; what it printed till then is
		// the command's.
		res.ExitCode, res.OOMKilled = -1, false
		ended := withOutput(h.endedDuring(e, err), res)
		if cutOutput(ended) == res {
			res = nil // handed on: the deferred Close is the caller's now
		}
		return nil, ended
	}
	if res.ExitCode == 137 {
		res.OOMKilled = h.newOOMKill(ctx, e)
	}
	return res, nil
}

// newOOMKill reports whether the container's memory cgroup counted an OOM
// kill since the last look. The engine's State.OOMKilled covers only the
// main process, not an exec'd command.
func (h *Docker) newOOMKill(ctx context.Context, e *execution) bool {
	var out strings.Builder
	code, err := h.runner.run(ctx, process{
		containerID: e.ContainerID,
		user:        userOf(e.uid),
		// cgroup v1, then v2.
		argv:   []string{"cat", "/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events"},
		dir:    "/",
		env:    ownEnv,
		stdout: &capWriter{w: &out, left: 4096},
		stderr: io.Discard,
	})
	if err != nil || code > 1 {
		return false
	}
	n := parseOOMKills(out.String())
	return e.oomKills.Swap(n) < n
}

// parseOOMKills returns the "oom_kill N" counter of memory.oom_control
// (cgroup v1) or memory.events (v2), 0 when absent.
func parseOOMKills(s string) int64 {
	for _, line := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && n > 0 {
				return n
			}
		}
	}
	return 0
}

// containerGone reports whether the container no longer runs.
func (h *Docker) containerGone(cid string) bool {
	gone, _ := h.containerState(cid)
	return gone
}

// containerState is containerGone that also says when it could not tell:
// engineErr is the engine's last error when it did not answer within
// containerGoneWait.
func (h *Docker) containerState(cid string) (gone bool, engineErr error) {
	ctx, cancel := context.WithTimeout(context.Background(), containerGoneWait)
	defer cancel()
	for {
		ins, err := h.api.ContainerInspect(ctx, cid)
		switch {
		case cerrdefs.IsNotFound(err):
			return true, nil
		case err == nil:
			return ins.State == nil || !ins.State.Running, nil
		}
		// The engine not answering is no news of the container: an engine
		// restarting takes its containers with it, and a command that
		// failed meanwhile was answered "later commands run as usual".
		select {
		case <-ctx.Done():
			return false, err
		case <-time.After(containerGoneRetry):
		}
	}
}

// containerGoneRetry is how often containerGone asks an engine that did
// not answer again, for up to containerGoneWait (variables for tests).
var (
	containerGoneRetry = time.Second
	containerGoneWait  = 10 * time.Second
)

// Terminate destroys the execution. It is idempotent, as the seed's
// terminate and DELETE /v1/executions/{id} are: terminating an execution
// that already ended, or an id this host never saw, succeeds (the id
// stays unknown: not_found to the rest of the API, not gone). Terminating
// one still being provisioned makes that Provision fail (code gone) and
// remove its container.
func (h *Docker) Terminate(ctx context.Context, executionID string) error {
	h.mu.Lock()
	if pend := h.pending[executionID]; pend != nil {
		pend.cancel(errTerminated)
		h.tombstone(executionID, EndTerminated)
		h.mu.Unlock()
		h.syncTombstone(executionID)
		// The provision removes its container as it unwinds: success
		// means none is left, as for a live execution. It answered at
		// once, the container still there for as long as the unwinding
		// took.
		select {
		case <-pend.done:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("dockerhost: terminate: wait for the cancelled provision to remove its container: %w", ctx.Err())
		}
	}
	h.mu.Unlock()
	e, err := h.lookup(ctx, executionID)
	if code := ErrorCode(err); code == CodeGone || code == CodeNotFound {
		// Nothing of it runs here either way, once an end under way has
		// removed its container; a caller retrying a terminate (or the
		// HTTP API's, which answers 204) must not fail over which one it
		// is.
		if err := h.awaitRemoval(ctx, executionID); err != nil {
			return fmt.Errorf("dockerhost: terminate: %w", err)
		}
		return nil
	}
	if err != nil {
		return err
	}
	if err := h.end(ctx, executionID, e, EndTerminated); err != nil {
		return fmt.Errorf("dockerhost: terminate: %w", err)
	}
	h.logger.Info("terminated", "execution", executionID)
	return nil
}

// AdoptResult says what Adopt found.
type AdoptResult struct {
	Adopted []string // execution ids now managed by this host
	Reaped  []string // expired, stopped or unreadable containers removed
	// ReapedPool are the container ids of unclaimed pooled containers
	// removed: a previous run's (useless without its stdin attachment)
	// or past their pool TTL.
	ReapedPool []string
	// Unremoved are the container ids Adopt would have removed but the
	// engine did not (each logged with its error); the next start tries
	// again. None of them is adopted.
	Unremoved []string
}

// Adopt takes over the containers this Owner left behind (a gateway that
// restarted): live ones are registered with their deadline; expired,
// stopped or unreadable ones, and those of executions Config.Tombstones
// records as ended (a removal that failed), are removed. NewDocker calls
// it.
func (h *Docker) Adopt(ctx context.Context) (AdoptResult, error) {
	var res AdoptResult
	list, err := h.api.ContainerList(ctx, container.ListOptions{
		All:     true,
		Filters: filters.NewArgs(filters.Arg("label", LabelOwner+"="+h.owner)),
	})
	if err != nil {
		return res, fmt.Errorf("dockerhost: list containers: %w", err)
	}
	now := h.now()
	for _, c := range list {
		if slices.ContainsFunc(c.Names, func(n string) bool { return strings.HasPrefix(strings.TrimPrefix(n, "/"), loadingPrefix) }) {
			// Its workspace never finished loading, and its caller never
			// got an answer.
			if err := h.destroy(c.ID); err != nil {
				res.unremoved(h.logger, c.ID, "a container whose workspace never finished loading", err)
				continue
			}
			if id := c.Labels[LabelExecution]; executionIDRE.MatchString(id) {
				h.dropEnv(id)
			}
			res.Reaped = append(res.Reaped, c.Labels[LabelExecution])
			h.logger.Info("reaped an execution whose workspace never finished loading", "execution", c.Labels[LabelExecution], "container", c.ID)
			continue
		}
		if c.Labels[LabelPool] != "" {
			cl, claimed := claimedPooled(c)
			if !claimed {
				if h.pool != nil && h.pool.owns(c.Names) {
					continue // this host's own warm container (its TTL is the pool's business)
				}
				if err := h.destroy(c.ID); err != nil {
					res.unremoved(h.logger, c.ID, "an unclaimed pooled container", err)
					continue
				}
				if h.pool != nil {
					h.pool.reaps.Add(1)
				}
				res.ReapedPool = append(res.ReapedPool, c.ID)
				h.logger.Info("reaped pooled container", "container", c.ID)
				continue
			}
			c = cl
		}
		c = setDeadline(c)
		id := c.Labels[LabelExecution]
		e, ok := adoptable(c, now)
		if ok && c.Labels[LabelPool] != "" {
			e.env = h.loadEnv(id) // created without it, as every pooled container
		}
		if ok {
			h.mu.Lock()
			known := h.execs[id] != nil || h.pending[id] != nil
			h.mu.Unlock()
			if known {
				continue
			}
			if end := h.storedTombstone(ctx, id); end != nil {
				// It ended before this process (the store says when and
				// why), but the engine did not remove its container then
				// (or the gateway stopped before it could): adopted, it
				// came back as a live execution, its end forgotten.
				h.reapEnded(id, c.ID, *end)
				res.Reaped = append(res.Reaped, id)
				continue
			}
			// What its environment takes of its commands' argument space,
			// read once; failing, its first command asks.
			if ins, err := h.api.ContainerInspect(ctx, c.ID); err == nil {
				e.cenv.Store(readContainerEnv(ins))
			} else {
				h.logger.Warn("an adopted container's environment was not read; its first command asks again", "execution", id, "container", c.ID, "err", err)
			}
			h.uids.hold(e.uid)
			if err := h.register(ctx, e); err != nil {
				h.uids.release(e.uid)
				return res, err
			}
			res.Adopted = append(res.Adopted, id)
			h.logger.Info("adopted execution", "execution", id, "container", c.ID, "expires", e.ExpiresAt)
			continue
		}
		if err := h.destroy(c.ID); err != nil {
			// Still ended (expired, stopped or unreadable): recorded as
			// such below, its container left for the next start.
			res.unremoved(h.logger, c.ID, "the container of an ended execution", err)
		} else {
			res.Reaped = append(res.Reaped, id)
			h.logger.Info("reaped execution", "execution", id, "container", c.ID)
		}
		if executionIDRE.MatchString(id) {
			h.dropEnv(id)
			// An execution that ended while no host watched it.
			reason := EndContainerGone
			if exp, err := strconv.ParseInt(c.Labels[LabelExpires], 10, 64); err == nil && !time.Unix(exp, 0).After(now) {
				reason = EndRuntime
			}
			h.mu.Lock()
			if h.execs[id] == nil {
				h.tombstone(id, reason)
			}
			h.mu.Unlock()
			h.syncTombstone(id)
		}
	}
	return res, nil
}

// unremoved records a container Adopt left because the engine failed its
// removal, and says so: a start that stopped there (a container the engine
// cannot remove, as overlay's "device or resource busy") kept the whole
// gateway down until someone removed it by hand.
func (r *AdoptResult) unremoved(log *slog.Logger, cid, what string, err error) {
	r.Unremoved = append(r.Unremoved, cid)
	log.Warn("the engine did not remove "+what+"; the gateway starts without it and the next start tries again (or: docker rm -f "+cid+")", "container", cid, "err", err)
}

// reapEnded removes the container cid of id, an execution recorded as
// ended (end), and remembers it as gone. A removal the engine fails again
// is kept, as an end's is (remove), for the next Terminate to try.
func (h *Docker) reapEnded(id, cid string, end ended) {
	r := &removal{cid: cid, done: make(chan struct{})}
	h.mu.Lock()
	h.tombstoneAt(id, end)
	if len(h.removing) < maxTombstones {
		h.removing[id] = r
	}
	h.mu.Unlock()
	h.dropEnv(id)
	if err := h.remove(id, r); err != nil {
		h.logger.Warn("the container of an execution that ended before this start is still there, and the engine did not remove it; terminate the execution to try again", "execution", id, "container", cid, "reason", end.reason, "err", err)
		return
	}
	h.logger.Info("removed the container of an execution that ended before this start", "execution", id, "container", cid, "reason", end.reason)
}

// Foreign is a live execution under another owner (Elsewhere).
type Foreign struct {
	Owner    string // its hostgate.owner label
	StateDir string // its hostgate.state-dir label; "" when it has none
}

// Elsewhere finds live executions under another owner: running,
// unexpired containers Adopt would take over if their hostgate.owner
// label were this host's. It maps each execution id to that owner. A
// gateway whose state dir moved (a restore elsewhere, a renamed
// directory) is another owner, and its executions' containers run on
// there: the caller tells them apart from executions that ended, which
// it would otherwise forget. It adopts and reaps nothing.
func (h *Docker) Elsewhere(ctx context.Context) (map[string]Foreign, error) {
	list, err := h.api.ContainerList(ctx, container.ListOptions{
		Filters: filters.NewArgs(filters.Arg("label", LabelOwner), filters.Arg("status", "running")),
	})
	if err != nil {
		return nil, fmt.Errorf("dockerhost: list containers: %w", err)
	}
	now := h.now()
	found := map[string]Foreign{}
	for _, c := range list {
		other := c.Labels[LabelOwner]
		// The filter matches the key alone: a container with an empty
		// owner (the tools holder, see ownLabels) is no one's.
		if other == "" || other == h.owner || slices.ContainsFunc(c.Names, func(n string) bool { return strings.HasPrefix(strings.TrimPrefix(n, "/"), loadingPrefix) }) {
			continue
		}
		if c.Labels[LabelPool] != "" {
			cl, claimed := claimedPooled(c)
			if !claimed {
				continue // a warm container: no execution yet
			}
			c = cl
		}
		if e, ok := adoptable(setDeadline(c), now); ok {
			found[e.ExecutionID] = Foreign{Owner: other, StateDir: c.Labels[LabelStateDir]}
		}
	}
	return found, nil
}

// loadingPrefix starts the name of a container whose workspace is loading
// (a git import, a restore). Final names start "hostgate-", so no
// execution id makes one.
const loadingPrefix = "hostgate_loading_"

// adoptable rebuilds an execution from a container's labels, or reports
// that the container should be reaped.
func adoptable(c container.Summary, now time.Time) (*execution, bool) {
	id := c.Labels[LabelExecution]
	exp, err := strconv.ParseInt(c.Labels[LabelExpires], 10, 64)
	if err != nil || !executionIDRE.MatchString(id) || c.State != "running" {
		return nil, false
	}
	expires := time.Unix(exp, 0)
	if !expires.After(now) {
		return nil, false
	}
	var req ProvisionRequest
	if err := json.Unmarshal([]byte(c.Labels[LabelSpec]), &req); err != nil || req.Resources.MaxOutputBytes <= 0 || req.Resources.DiskBytes <= 0 {
		return nil, false
	}
	// Its processes must keep running as the uid its workspace belongs to.
	uid, ok := parseUIDLabel(c.Labels)
	if !ok {
		return nil, false
	}
	return &execution{
		Execution: Execution{
			ExecutionID: id, Image: req.Image, ContainerID: c.ID,
			CreatedAt: time.Unix(c.Created, 0), ExpiresAt: expires, Resources: req.Resources,
			WorkspaceBytes: WorkspaceSize(req.Resources),
		},
		req:       req,
		uid:       uid,
		forgotten: make(chan struct{}),
		movable:   movableDeadline(c.Labels),
	}, true
}

// setDeadline rewrites c's deadline label with the one its name records
// when SetTimeout renamed it (claimedName, its own execution id), and its
// creation with the claim's time (claimedAt).
func setDeadline(c container.Summary) container.Summary {
	for _, n := range c.Names {
		cl, ok := parseClaimedName(n)
		if !ok || cl.id != c.Labels[LabelExecution] {
			continue
		}
		c.Labels = maps.Clone(c.Labels)
		c.Labels[LabelExpires] = strconv.FormatInt(cl.expires.Unix(), 10)
		c.Created = claimCreated(c.Created, cl)
		return c
	}
	return c
}

// claimCreated is the creation adoptable takes for a container named cl:
// its execution's, the claim's time when the name records it. A pooled
// container waits in the pool before its claim starts its runtime, and
// SetTimeout counts the in-container deadline from CreatedAt: from the
// container's creation, it wrote an extension too long by the time in the
// pool, and the container outlived its deadline by that much while no
// gateway watched it.
func claimCreated(created int64, cl claimed) int64 {
	if cl.claimedAt.IsZero() {
		return created // an older gateway's name: the nearest time there is
	}
	return cl.claimedAt.Unix()
}

// claimedPooled rewrites a claimed pooled container's summary as a fresh
// execution's (execution id, deadline, runtime, output limit and creation
// from its name, see claimedName), or reports that c is unclaimed. A spec
// label it cannot rewrite is left for adoptable to refuse.
func claimedPooled(c container.Summary) (container.Summary, bool) {
	for _, n := range c.Names {
		cl, ok := parseClaimedName(n)
		if !ok {
			continue
		}
		c.Labels = maps.Clone(c.Labels)
		c.Labels[LabelExecution] = cl.id
		c.Labels[LabelExpires] = strconv.FormatInt(cl.expires.Unix(), 10)
		c.Created = claimCreated(c.Created, cl)
		if cl.runtimeMs > 0 {
			var req ProvisionRequest
			if err := json.Unmarshal([]byte(c.Labels[LabelSpec]), &req); err == nil {
				req.Resources.RuntimeMs, req.Resources.MaxOutputBytes = cl.runtimeMs, cl.maxOutputBytes
				if spec, err := json.Marshal(req); err == nil {
					c.Labels[LabelSpec] = string(spec)
				}
			}
		}
		return c, true
	}
	return c, false
}
