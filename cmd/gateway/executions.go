//go:build unix

package main

import (
	"bytes"
	"cmp"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostgate/hostgate/dockerhost"
	"github.com/hostgate/hostgate/internal/execapi"
	"github.com/hostgate/hostgate/internal/store"
)

// The state store keeps ended executions across restarts.
var _ dockerhost.Tombstones = (*store.SQLite)(nil)

func init() { serveHooks = append(serveHooks, attachExecutions) }

// executionsBuilt says this build serves Docker executions.
const executionsBuilt = true

const (
	// enginePingTimeout bounds --docker auto's probe of the engine.
	enginePingTimeout = 5 * time.Second
	// maxAgentBinary bounds the agent binary read into memory (and
	// written into the engine's tools volume).
	maxAgentBinary = 256 << 20
)

// sandboxDefaults is the provision body the web UI's "New sandbox" posts:
// the configured image and limits that suit an interactive shell.
func sandboxDefaults(image string) dockerhost.ProvisionRequest {
	return dockerhost.ProvisionRequest{
		Image:     image,
		Workspace: dockerhost.WorkspaceSpec{Kind: dockerhost.WorkspaceEmpty},
		Resources: dockerhost.Resources{
			CPUs: 1, MemoryBytes: 512 << 20, DiskBytes: 256 << 20, Pids: 256,
			RuntimeMs: int64(time.Hour / time.Millisecond), MaxOutputBytes: 16 << 20,
		},
		Network: dockerhost.Network{Mode: "none"},
	}
}

// attachExecutions adds the executions API per --docker: auto turns it on
// when an engine answers a ping, on fails without one, off (or no engine)
// answers 404 docker_off. With an engine it adopts the executions a
// previous run left and, given an agent binary, makes each one a host.
func attachExecutions(ctx context.Context, s *serving) (func(), error) {
	srv, log := s.Server, s.Logger.With("component", "executions")
	authorize := executionsAuthorizer(srv)
	if img := s.Config.SandboxImage; img != "" {
		// Checked once here, not at every "New sandbox" the web UI sends
		// with it (each answered 400 while the gateway served on).
		var de *dockerhost.Error
		if err := dockerhost.ValidateImage(img); errors.As(err, &de) {
			return nil, fmt.Errorf("serve: --sandbox-image (HOSTGATE_SANDBOX_IMAGE): %s", de.Message)
		}
	}
	cli, err := engine(ctx, s.Config.Docker, log)
	if err != nil {
		return nil, err
	}
	if cli == nil {
		if c := s.Config; c.CheckpointMaxAge != 0 || c.CheckpointMaxBytes != 0 {
			// Only auto gets here with them (off refuses them): not an
			// error, since the next start may find an engine and apply them.
			log.Warn("checkpoint retention not applied: no Docker engine answered, so this run neither takes nor removes checkpoints; the next start that finds an engine applies it",
				"maxAge", c.CheckpointMaxAge, "maxBytes", int64(c.CheckpointMaxBytes),
				"fix", "start the Docker engine and restart the gateway (--docker on refuses to start without one)")
		}
		// Under auto the flag is right and the engine is the fix: its
		// callers were told to serve with --docker on|auto.
		why := "it serves with --docker off: restart it with --docker on (or auto)"
		if s.Config.Docker != "off" {
			why = "no Docker engine answered when it started (--docker auto; its log says why): start the engine, give the gateway's user its socket (the docker group), then restart the gateway"
		}
		serveExecutionsOff(srv, why)
		return nil, nil
	}

	agentBin, agentInfo, err := readAgentBinary(s.Config.AgentBinary)
	if err != nil {
		_ = cli.Close()
		return nil, err
	}
	// Everything this gateway makes in the engine carries the owner (label
	// hostgate.owner, or hostgate.tools for the tools volume and its
	// holder): what to remove when it is retired for good (README).
	log.Info("Docker executions owner", "owner", owner(s.Config.StateDir), "stateDir", s.Config.StateDir)
	cfg := &dockerhost.Config{
		Owner: owner(s.Config.StateDir),
		// What a gateway started from another path names as the one
		// that adopts these containers (elsewhere).
		Labels:        map[string]string{dockerhost.LabelStateDir: absStateDir(s.Config.StateDir)},
		CheckpointDir: filepath.Join(s.Config.StateDir, "checkpoints"),
		EnvDir:        filepath.Join(s.Config.StateDir, "execution-env"),
		// Not os.TempDir: /tmp is often a tmpfs, memory after all.
		OutputDir:       filepath.Join(s.Config.StateDir, "exec-output"),
		RepositoryRoots: s.Config.repositoryRoots(),
		Retention:       dockerhost.Retention{MaxAge: s.Config.CheckpointMaxAge, MaxBytes: int64(s.Config.CheckpointMaxBytes)},
		MaxLive:         s.Config.SandboxMax,
	}
	if cfg.MaxLive == 0 {
		cfg.MaxLive = -1 // --sandbox-max 0, chosen: no bound (Config's 0 is the default)
	}
	if cfg.Retention != (dockerhost.Retention{}) {
		log.Info("checkpoint retention", "maxAge", cfg.Retention.MaxAge, "maxBytes", cfg.Retention.MaxBytes)
	}
	if t, ok := srv.Store().(dockerhost.Tombstones); ok {
		// Ended executions answer gone, not not_found, after a restart.
		cfg.Tombstones = t
	}
	if agentBin != nil {
		// Execute-only: the kernel starts a binary its user cannot read
		// non-dumpable (fs.suid_dumpable is 0 or 2; either refuses
		// ptrace and /proc/PID/fd to a process of the same uid without
		// CAP_SYS_PTRACE). The agent runs as the sandbox's uid and makes
		// itself non-dumpable only once its own code runs: until then a
		// command of the sandbox that killed it could open the new
		// agent's stdin and read the host key the gateway writes there
		// (e2e TestSandboxCannotReadANewAgentsKeys).
		cfg.Tools = []dockerhost.Tool{{Name: "agent", Mode: 0o111, Data: agentBin}}
		// A restore's agent starts while its tar unpacks, waiting for its
		// keys as a warm container's does.
		cfg.LoadAgent = execapi.DefaultAgentArgv
		// The agent makes it (execapi.AgentsConfig.MakeDirs); without an
		// agent nothing would, and TMPDIR would name a missing directory.
		cfg.TempDir = dockerhost.WorkspaceTempDir
		if interp := agentInfo.interp; interp != "" {
			// Not an error: an image with this loader and libc runs it.
			// As PID 1 it would end every other image's containers as
			// they start, so they keep the deadline script.
			log.Warn("the agent binary is dynamically linked: it starts only in images that have its loader and libc, and provisioning any other image fails once the agent's start has been retried; sandboxes keep their runtime deadline in a shell script their own code can stop or kill",
				"interpreter", interp, "fix", "CGO_ENABLED=0 go build -ldflags='-s -w' ./cmd/agent")
		} else {
			// The agent is each container's PID 1 too, keeping its runtime
			// deadline: as the PID namespace's init it gets no SIGKILL or
			// SIGSTOP from sandbox code, and non-dumpable it cannot be
			// traced.
			cfg.DeadlineTool = "agent"
		}
		if agentInfo.symbolBytes >= 1<<20 {
			log.Info("the agent binary carries symbols and debug info it never reads; the engine's tools volume and every machine that runs the agent carry them too",
				"bytes", agentInfo.symbolBytes, "fix", "CGO_ENABLED=0 go build -ldflags='-s -w' ./cmd/agent")
		}
	} else {
		log.Warn("no agent binary (--agent-binary, or a file named agent next to the gateway): executions will not be hosts")
	}
	if s.Config.SandboxPool > 0 {
		// A warm pool makes create-to-first-command a claim instead of a
		// container create; the sandbox defaults are pre-warmed, other
		// shapes are learned on first use.
		pool := &dockerhost.PoolConfig{Size: s.Config.SandboxPool}
		if agentBin != nil {
			// Each warm container holds its agent started and waiting for
			// its keys: a claim then skips a docker exec and the agent's
			// start (~60 ms of create-to-first-command).
			pool.Agent = execapi.DefaultAgentArgv
		}
		if s.Config.SandboxImage != "" {
			pool.Keys = []dockerhost.ProvisionRequest{sandboxDefaults(s.Config.SandboxImage)}
		}
		cfg.Pool = pool
	}
	docker, err := dockerhost.NewDocker(ctx, log, cli, cfg)
	if err != nil {
		_ = cli.Close()
		return nil, err
	}
	var agents *execapi.Agents
	if agentBin != nil {
		attach := func(ctx context.Context, id string, argv []string, stderr io.Writer) (execapi.Stdio, error) {
			st, err := docker.AttachStdio(ctx, id, argv, stderr)
			if err != nil {
				return nil, err
			}
			return st, nil
		}
		// Asked when an agent ends: its container may be what ended.
		alive := docker.Verify
		// The API's commands run through the execution's agent tunnel
		// (a few ms) rather than a Docker exec create/attach/inspect
		// (tens of ms); docker exec remains the fallback.
		certify := func(pub ssh.PublicKey, principal string) (*ssh.Certificate, error) {
			// A sandbox forwards no agent (and the API has none to forward).
			return srv.CA().Sign(pub, principal, "gateway-exec", s.Config.CertTTL, false)
		}
		agents = execapi.NewAgents(attach, alive, srv.Store(), srv.Tunnels(), srv.CA().AuthorizedKey(),
			&execapi.AgentsConfig{Logger: log, KeyDir: filepath.Join(s.Config.StateDir, "execution-keys"), Certify: certify,
				MakeDirs: []string{dockerhost.WorkspaceTempDir}, Mux: srv.TunnelMux(), KillStopped: docker.KillStopped,
				Forgot: s.HostForgotten})
		docker.SetExecVia(agents.Runner)
	}
	// Sandboxes are part of what this gateway serves: an engine that
	// stops answering makes it not ready (/readyz names it).
	srv.AddReadyCheck("docker", func(ctx context.Context) error {
		if _, err := cli.Ping(ctx); err != nil {
			return fmt.Errorf("the Docker engine does not answer (executions fail until it does): %w", err)
		}
		return nil
	})
	registerExecMetrics(srv.Metrics(), docker)
	if agents != nil {
		registerAgentMetrics(srv.Metrics(), agents.Stats)
	}
	registerSandboxMetrics(srv.Metrics(), docker.Live, docker.PoolStats)
	registerCheckpointMetrics(srv.Metrics(), docker.CheckpointStats)
	api, err := execapi.New(docker, &execapi.Config{Authorize: authorize, Agents: agents, Connected: srv.Tunnels().Connected, Logger: log})
	if err != nil {
		return nil, err
	}
	api.Register(srv.Mux())
	// A session on an execution that ended (terminated, out of runtime)
	// closes saying so: its caller provisions anew rather than waiting
	// for an agent to come back.
	ended := func(ctx context.Context, id string) (string, time.Time) {
		_, err := docker.Get(ctx, id)
		var de *dockerhost.Error
		if errors.As(err, &de) && de.Code == dockerhost.CodeGone && de.Reason != "" {
			return de.Reason, de.EndedAt
		}
		return "", time.Time{}
	}
	srv.SetHostEnded(ended)
	srv.SetMeFields(func(_ *http.Request, tok store.Token) map[string]any {
		if tok.Role != store.RoleAdmin {
			return nil
		}
		m := map[string]any{"docker": true}
		if s.Config.SandboxImage != "" {
			m["sandboxDefaults"] = sandboxDefaults(s.Config.SandboxImage)
		}
		return m
	})

	moved := elsewhere(ctx, log, docker, srv.Store(), s.Config.StateDir)
	// Re-attach the agents of the executions NewDocker adopted, in the
	// background: serving must not wait for them.
	var wg sync.WaitGroup
	adoptCtx, stopAdopt := context.WithCancel(context.Background())
	if agents != nil {
		live := docker.List()
		ids := make([]string, 0, len(live))
		for _, e := range live {
			ids = append(ids, e.ExecutionID)
		}
		// Executions of this state whose containers run under another
		// owner are alive: forgetting their hosts and kept keys would
		// strand them even for the gateway that can adopt them.
		ids = append(ids, moved...)
		agents.Prune(ctx, ids)
		for _, e := range live {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := agents.Resume(adoptCtx, e.ExecutionID)
				logReattach(adoptCtx, log, e.ExecutionID, err, ended)
			}()
		}
	}
	return func() {
		stopAdopt()
		wg.Wait()
		if agents != nil {
			agents.Close()
		}
		_ = docker.Close()
		_ = cli.Close()
	}, nil
}

// logReattach logs how the re-attach of adopted execution id's agent went
// (err from Agents.Resume). A re-attach cut by the execution's end (a
// DELETE, its runtime; ended says why) or by the gateway's own stop is no
// warning: nothing is wrong with the execution. A soak's DELETE of a
// sandbox while a restarted gateway re-attached it logged a warning that
// its agent "did not answer: its tunnel ended".
func logReattach(ctx context.Context, log *slog.Logger, id string, err error, ended func(context.Context, string) (string, time.Time)) {
	if err == nil {
		log.Info("adopted execution: agent re-attached", "execution", id)
		return
	}
	if ctx.Err() != nil {
		log.Info("adopted execution: agent not re-attached: the gateway is stopping", "execution", id, "err", err)
		return
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if reason, _ := ended(lctx, id); reason != "" {
		log.Info("adopted execution ended before its agent was re-attached", "execution", id, "reason", reason)
		return
	}
	log.Warn("adopted execution: agent not re-attached", "execution", id, "err", err)
}

// elsewhere warns of the executions this state dir's store knows as hosts
// that Adopt did not find under this gateway's owner but that run on
// under another one, and returns their ids. Their owner is another state
// dir path's (owner()): this state dir was moved, or restored from a
// backup somewhere else, while they ran. This gateway neither adopts
// them (two gateways started from copies of one state dir would then
// adopt and reap each other's containers) nor forgets them.
func elsewhere(ctx context.Context, log *slog.Logger, docker *dockerhost.Docker, st store.Store, stateDir string) []string {
	if st == nil {
		return nil
	}
	hosts, err := st.Hosts(ctx)
	if err != nil {
		log.Warn("could not look for this state's executions under another owner", "err", err)
		return nil
	}
	found, err := docker.Elsewhere(ctx)
	if err != nil {
		log.Warn("could not look for this state's executions under another owner", "err", err)
		return nil
	}
	byOwner := map[dockerhost.Foreign][]string{}
	var ids []string
	for _, h := range hosts {
		if other, ok := found[h.ID]; ok && h.Kind == execapi.HostKind {
			byOwner[other] = append(byOwner[other], h.ID)
			ids = append(ids, h.ID)
		}
	}
	mine := owner(stateDir)
	others := slices.SortedFunc(maps.Keys(byOwner), func(a, b dockerhost.Foreign) int {
		return cmp.Or(cmp.Compare(a.Owner, b.Owner), cmp.Compare(a.StateDir, b.StateDir))
	})
	for _, other := range others {
		// Containers made before the label name no path: the owner is a
		// hash of it.
		from := "the path it ran from when it made them (their owner is a hash of that absolute path)"
		if other.StateDir != "" {
			from = other.StateDir
		}
		log.Warn("executions of this state dir run on under another Docker executions owner, which a gateway started from another --state-dir path is: this gateway does not adopt them, and keeps their hosts and keys for the gateway that does",
			"executions", byOwner[other], "theirOwner", other.Owner, "theirStateDir", other.StateDir, "owner", mine, "stateDir", stateDir,
			"fix", "stop this gateway and start it with --state-dir "+from+", or restore the backup there as the README's restore does (mv DIR DIR.old && cp -a BACKUP DIR)")
	}
	return ids
}

// registerExecMetrics counts the executions API's commands by the way
// they ran: "agent" through the execution's tunnel, "docker" through the
// Docker exec API (fallbacks included), "fallback" the tunnel could not
// start.
func registerExecMetrics(reg *prometheus.Registry, docker *dockerhost.Docker) {
	if reg == nil {
		return
	}
	for way, get := range map[string]func(dockerhost.ExecStats) int64{
		"agent":    func(s dockerhost.ExecStats) int64 { return s.Runner },
		"docker":   func(s dockerhost.ExecStats) int64 { return s.Docker },
		"fallback": func(s dockerhost.ExecStats) int64 { return s.Fallbacks },
	} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "hostgate_sandbox_execs_total",
			Help:        "Commands of the executions API, by the way they ran (agent tunnel, docker exec, fallbacks from the tunnel to docker).",
			ConstLabels: prometheus.Labels{"way": way},
		}, func() float64 { return float64(get(docker.ExecStats())) }))
	}
}

// registerAgentMetrics counts what became of the executions' agents:
// re-attached after theirs ended (sandbox code may kill it) or stopped
// answering (it may stop it), given up on after too many in a row, and
// tried again after a give-up.
func registerAgentMetrics(reg *prometheus.Registry, stats func() execapi.AgentStats) {
	if reg == nil {
		return
	}
	for reason, get := range map[string]func(execapi.AgentStats) int64{
		"ended":        func(s execapi.AgentStats) int64 { return s.Restarts },
		"unresponsive": func(s execapi.AgentStats) int64 { return s.Unresponsive },
		"retry":        func(s execapi.AgentStats) int64 { return s.Retries },
	} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "hostgate", Name: "sandbox_agent_restarts_total",
			Help:        "Execution agents attached anew while their execution lived, by why: the one before ended (killed, crashed) or was unresponsive (left the gateway's ping unanswered: stopped), or retry (tried after a give-up, slowly).",
			ConstLabels: prometheus.Labels{"reason": reason},
		}, func() float64 { return float64(get(stats())) }))
	}
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: "hostgate", Name: "sandbox_agent_giveups_total",
		Help: "Times an execution's agent failed too many times in a row: its commands run through docker exec, and it is no host, until an agent tried after a minute or more (restarts_total{reason=\"retry\"}) comes up.",
	}, func() float64 { return float64(stats().GaveUp) }))
}

// registerSandboxMetrics reports the live executions (hostgate_tunnels_connected
// counts their tunnels with the machines') and the warm pool: what is
// ready and filling, and how provisions were served.
func registerSandboxMetrics(reg *prometheus.Registry, live func() int, pool func() dockerhost.PoolStats) {
	if reg == nil {
		return
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "hostgate", Name: "sandboxes",
			Help: "Live executions (sandboxes) this gateway serves: provisioned, restored or adopted, not yet ended.",
		}, func() float64 { return float64(live()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "hostgate", Name: "sandbox_pool_ready",
			Help: "Warm containers ready to be claimed (--pool-size).",
		}, func() float64 { return float64(pool().Ready) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "hostgate", Name: "sandbox_pool_filling",
			Help: "Warm containers being created.",
		}, func() float64 { return float64(pool().Filling) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "hostgate", Name: "sandbox_pool_fill_errors_total",
			Help: "Warm containers whose create failed (the pool backs off for that key).",
		}, func() float64 { return float64(pool().FillErrors) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "hostgate", Name: "sandbox_pool_reaps_total",
			Help: "Warm containers removed unclaimed: after their TTL, at shutdown, or at start.",
		}, func() float64 { return float64(pool().Reaps) }),
	)
	for result, get := range map[string]func(dockerhost.PoolStats) int64{
		"hit":  func(s dockerhost.PoolStats) int64 { return s.Hits },
		"miss": func(s dockerhost.PoolStats) int64 { return s.Misses },
		"dead": func(s dockerhost.PoolStats) int64 { return s.Dead },
	} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "hostgate", Name: "sandbox_pool_claims_total",
			Help:        "Provisions by how the warm pool served them: hit (a warm container), miss (none for the image and limits: created), dead (a warm one had died: created).",
			ConstLabels: prometheus.Labels{"result": result},
		}, func() float64 { return float64(get(pool())) }))
	}
}

// registerCheckpointMetrics reports the checkpoint store: what it holds
// (counted at start and at each retention sweep, kept up by each
// checkpoint and delete) and what retention removed, by rule.
func registerCheckpointMetrics(reg *prometheus.Registry, stats func() dockerhost.CheckpointStats) {
	if reg == nil {
		return
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "hostgate", Name: "checkpoints",
			Help: "Checkpoints stored: counted at start and at each retention sweep, kept up by each checkpoint and delete.",
		}, func() float64 { return float64(stats().Stored) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "hostgate", Name: "checkpoint_bytes",
			Help: "Bytes of the stored checkpoints' archives on disk, counted as hostgate_checkpoints is.",
		}, func() float64 { return float64(stats().StoredBytes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "hostgate", Name: "checkpoint_retention_freed_bytes_total",
			Help: "Bytes freed by the checkpoint retention (--checkpoint-max-age, --checkpoint-max-bytes).",
		}, func() float64 { return float64(stats().FreedBytes) }),
	)
	for rule, get := range map[string]func(dockerhost.CheckpointStats) int64{
		"max-age":   func(s dockerhost.CheckpointStats) int64 { return s.RemovedMaxAge },
		"max-bytes": func(s dockerhost.CheckpointStats) int64 { return s.RemovedMaxBytes },
	} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "hostgate", Name: "checkpoint_retention_removals_total",
			Help:        "Checkpoints removed by the retention, by rule (max-age, max-bytes).",
			ConstLabels: prometheus.Labels{"rule": rule},
		}, func() float64 { return float64(get(stats())) }))
	}
}

// engineClient is the Docker client and its Close.
type engineClient interface {
	dockerhost.DockerAPI
	Close() error
}

// engine returns a client of an engine that answers a ping, or nil when
// mode is off, or auto and none answers; with mode on, no engine is an
// error.
func engine(ctx context.Context, mode string, log *slog.Logger) (engineClient, error) {
	if mode == "off" {
		log.Info("Docker executions off (--docker off)")
		return nil, nil
	}
	cli, err := dockerhost.NewClient()
	if err == nil {
		pctx, cancel := context.WithTimeout(ctx, enginePingTimeout)
		_, err = cli.Ping(pctx)
		cancel()
		if err != nil {
			_ = cli.Close()
		}
	}
	if err != nil {
		return nil, noEngine(mode, err, log)
	}
	log.Info("Docker executions on", "mode", mode)
	return cli, nil
}

// engineDenied is the fix for an engine whose socket refused the
// gateway's user.
const engineDenied = "the Docker engine's socket refused this user: add the gateway's user to the socket's group (docker), or serve with --docker off"

// noEngine is what serving without an engine means under mode: --docker
// on fails; auto serves without executions, which the log says. An
// engine whose socket refuses the gateway's user (one that runs as its
// own user, as the README deploys it, but not in the docker group) is
// there: auto warns with the fix, where it logged at info that no engine
// answered.
func noEngine(mode string, err error, log *slog.Logger) error {
	denied := errors.Is(err, fs.ErrPermission)
	if mode == "on" {
		if denied {
			return fmt.Errorf("serve: --docker on: %s: %w", engineDenied, err)
		}
		return fmt.Errorf("serve: --docker on but no Docker engine answers: %w", err)
	}
	if denied {
		log.Warn("Docker executions off: "+engineDenied+" (--docker auto)", "err", err)
		return nil
	}
	log.Info("Docker executions off: no engine answered (--docker auto)", "err", err)
	return nil
}

// readAgentBinary reads --agent-binary, or a file named agent next to the
// gateway executable when the flag is empty; nil (no error) when that
// default does not exist. info has the program loader the binary names
// when it is dynamically linked ("" for a static one) and the size of what
// -ldflags='-s -w' leaves out.
func readAgentBinary(path string) (data []byte, info agentELF, err error) {
	explicit := path != ""
	if !explicit {
		exe, err := os.Executable()
		if err != nil {
			return nil, agentELF{}, nil
		}
		path = filepath.Join(filepath.Dir(exe), "agent")
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) && !explicit {
		return nil, agentELF{}, nil
	}
	if err != nil {
		return nil, agentELF{}, fmt.Errorf("serve: --agent-binary: %w", err)
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, maxAgentBinary+1))
	if err != nil {
		return nil, agentELF{}, fmt.Errorf("serve: --agent-binary: %w", err)
	}
	const want = "want a static linux agent: CGO_ENABLED=0 go build -ldflags='-s -w' ./cmd/agent"
	if len(b) > maxAgentBinary {
		return nil, agentELF{}, fmt.Errorf("serve: --agent-binary %s: larger than %d bytes", path, maxAgentBinary)
	}
	if len(b) < 4 || string(b[:4]) != "\x7fELF" {
		return nil, agentELF{}, fmt.Errorf("serve: --agent-binary %s: not an ELF executable (%s)", path, want)
	}
	ef, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return nil, agentELF{}, fmt.Errorf("serve: --agent-binary %s: %w (%s)", path, err, want)
	}
	if ef.Type != elf.ET_EXEC && ef.Type != elf.ET_DYN {
		return nil, agentELF{}, fmt.Errorf("serve: --agent-binary %s: an ELF %v, not an executable (%s)", path, ef.Type, want)
	}
	return b, agentELF{interp: elfInterpreter(ef), symbolBytes: elfSymbolBytes(ef)}, nil
}

// agentELF is what the gateway reads from the agent binary's ELF headers.
type agentELF struct {
	interp      string // PT_INTERP, "" for a static build
	symbolBytes uint64 // symbol tables and DWARF: loaded into no process
}

// elfSymbolBytes is the size of the sections a running program does not
// use: the symbol and string tables and DWARF (which -ldflags='-s -w'
// leaves out). A Go agent keeps its own function table for stack traces.
func elfSymbolBytes(f *elf.File) uint64 {
	var n uint64
	for _, s := range f.Sections {
		if s.Name == ".symtab" || s.Name == ".strtab" || strings.HasPrefix(s.Name, ".debug_") || strings.HasPrefix(s.Name, ".zdebug_") {
			n += s.FileSize // as stored: Go compresses its DWARF
		}
	}
	return n
}

// elfInterpreter is the program loader a dynamically linked ELF executable
// names (PT_INTERP), or "" for a static one. A sandbox image without that
// loader cannot start it: exec fails with "no such file or directory".
func elfInterpreter(f *elf.File) string {
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		name, err := io.ReadAll(io.LimitReader(p.Open(), 4096))
		if err != nil || len(name) == 0 {
			return "(unreadable)"
		}
		return string(bytes.TrimRight(name, "\x00"))
	}
	return ""
}
