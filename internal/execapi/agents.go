package execapi

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hostgate/hostgate/internal/yamux"
	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/dockerhost"
	"github.com/hostgate/hostgate/internal/agent"
	"github.com/hostgate/hostgate/internal/deadline"
	"github.com/hostgate/hostgate/internal/durable"
	"github.com/hostgate/hostgate/internal/gateway"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/sshlayer"
)

// HostKind is the store kind of an execution's host.
const HostKind = store.KindDocker

// DefaultAgentArgv runs the agent the gateway put in every execution's
// read-only tools volume (dockerhost.ToolsDir). New settings go in the keys
// preamble, never here: an execution adopted after an upgrade runs the
// agent of its own, older tools volume, which refuses a flag it does not
// know, where it ignores a preamble field.
var DefaultAgentArgv = []string{"/opt/hostgate/agent", "serve", "--stdio", "--mux", "--keys-stdin", "--log-level", "warn"}

// ErrNotExecutionHost means an execution id names a host that is not an
// execution (a machine with an agent): the gateway will not take it over.
var ErrNotExecutionHost = errors.New("execapi: the id names a host that is not an execution")

// ExecutionInfo is what an execution publishes as a host.
var ExecutionInfo = hostgate.Info{Kind: HostKind, OS: "linux", Home: dockerhost.WorkspaceDir, TempDir: dockerhost.WorkspaceTempDir, Workspace: dockerhost.WorkspaceDir}

// AttachFunc starts argv inside the execution with stdin and stdout
// attached (dockerhost.Docker.AttachStdio); ctx bounds the attachment.
type AttachFunc func(ctx context.Context, executionID string, argv []string, stderr io.Writer) (Stdio, error)

// EnrollStore is the subset of the gateway's store Agents uses to pin
// execution host keys.
type EnrollStore interface {
	Host(ctx context.Context, id string) (store.Host, error)
	Enroll(ctx context.Context, e store.Enrollment) (store.Host, error)
	ResetHostKey(ctx context.Context, id, by string) error
	DeleteHost(ctx context.Context, id, kind string) error
	Hosts(ctx context.Context) ([]store.Host, error)
}

// Registrar is the tunnel registry (gateway.Registry).
type Registrar interface {
	Register(hostID string, t gateway.Tunnel) (unregister func(), replaced bool, err error)
	// Closed reports whether the registry was closed (the gateway stops).
	Closed() bool
}

// Alive reports whether an execution still lives; a nil error means yes.
type Alive func(ctx context.Context, executionID string) error

// AgentsConfig are Agents' knobs; nil means defaults.
type AgentsConfig struct {
	// Argv starts the agent in the container; default DefaultAgentArgv.
	Argv []string
	// MakeDirs are made by the agent as it starts, when missing (the
	// execution's TMPDIR, dockerhost.Config.TempDir, which only a process
	// in the container can make).
	MakeDirs []string
	// Dir is the agent's working directory for commands and SFTP;
	// default /workspace.
	Dir string
	// MaxRestarts bounds re-attaching an agent that died (or stopped
	// answering) while its execution lives, counted since it last stayed
	// up a minute; default 5. Then the gateway gives up re-attaching at
	// once: the execution's commands use docker exec, and it is no host,
	// until an agent tried after RetryAfter comes up.
	MaxRestarts int
	// RetryAfter is how long the gateway waits, once it gave up on an
	// execution's agent, before it tries one agent again, and then after
	// each further failed try, doubling up to maxRetryFactor times it;
	// default 1 min. Whatever failed the agents (sandbox code that killed
	// or stopped them a while) may have passed: the execution gets its
	// agent, its fast path and its host back. An agent never up is not
	// retried for a provision, which fails, but is for an adopted
	// execution (Resume).
	RetryAfter time.Duration
	// OpenTimeout bounds a command's wait for the agent to open its
	// channel (and for the gateway's connection to it): past it the
	// command runs through docker exec, which it had not reached, and the
	// agent is pinged at once; default 3 s. An agent that leaves the exec
	// request unanswered that long is pinged at once too, but the command,
	// which may have started, waits on: it answers agent_lost if the
	// agent is found stopped.
	OpenTimeout time.Duration
	// PingTimeout bounds the agent's answer to the gateway's pings, sent
	// that often while its tunnel is up and at once when a command's
	// channel did not open within OpenTimeout. An agent that leaves one
	// unanswered and is stopped (sandbox code stopped it: kill -STOP, as
	// its uid) is unresponsive: it is killed, its tunnel closed, its
	// commands answer agent_lost, and a new agent is attached; default 5 s.
	PingTimeout time.Duration
	// KillStopped, when set, kills the execution's stopped process pid
	// (the agent's, as it reported it or, where it did not, an older
	// agent or one stopped before it did, as its attachment maps it:
	// dockerhost.Stdio.PID; 0 when neither, and then the one such
	// process, refusing several with a
	// *dockerhost.StoppedCandidatesError) if it has the agent binary's
	// name and docker exec started it, and says how many it killed
	// (dockerhost.Docker.KillStopped): asked when the agent leaves a ping
	// unanswered, it tells a stopped agent from a slow one, which keeps its
	// tunnel; and a stopped agent holds its threads of the pids limit until
	// killed, where at the least limit the new one would find none left
	// for commands. Nil: an agent that leaves a ping unanswered is taken
	// for stopped.
	KillStopped func(ctx context.Context, executionID, name string, pid int) (int, error)
	// Forgot, when set, is told each ended execution whose host record
	// was deleted (Forget, and Prune of those that ended while no gateway
	// ran), so that what the gateway holds in memory for the host (its
	// public shares) goes with the record.
	Forgot func(executionID string)
	// ReadyTimeout bounds Start's wait for the first tunnel; default 60 s.
	ReadyTimeout time.Duration
	// Mux tunes the yamux session; default as the gateway's agent tunnels.
	Mux *bytestream.MuxConfig
	// Logger; nil discards.
	Logger *slog.Logger
	// KeyDir, when set, keeps each execution's host key in a 0600 file
	// there (the directory is made 0700), so that a restarted gateway
	// re-attaches adopted executions with the key callers pinned (Resume).
	// Empty keeps keys in memory only.
	KeyDir string
	// OnTunnel, when set, is called when an execution's tunnel is
	// registered (up) and unregistered (down), from the agent loop.
	OnTunnel func(executionID string, up bool)
	// Certify, when set, lets Runner run the executions API's commands
	// through the tunnel as the gateway's own SSH client, with a
	// certificate it signs for the execution id (the gateway CA's Sign).
	// Nil: Runner always answers nil and docker exec runs them.
	Certify Certify
}

// Agents runs one in-container agent per execution and keeps its tunnel
// registered while the execution lives.
type Agents struct {
	attach AttachFunc
	alive  Alive
	store  EnrollStore
	reg    Registrar
	caKey  string
	cfg    AgentsConfig
	log    *slog.Logger
	key    *sshlayer.SessionKey // the gateway's client key for Runner
	// environPaths are the files in the container that may hold the
	// environment docker exec gives commands (readEnviron), the first
	// readable one counts: PID 1's, unless PID 1 is the non-dumpable
	// deadline, whose copy then counts. Tests point them elsewhere.
	environPaths []string
	// environForged is the copy of an older layout and the directory
	// whose presence makes it sandbox code's (readEnviron).
	environForged forgedCopy
	// readEnviron is readEnviron; a test holds it to end an execution
	// while the gateway's connection to its agent reads the environment.
	readEnviron func(c *ssh.Client, paths []string, forged forgedCopy) ([]string, error)

	ctx    context.Context // ends every run at Close
	cancel context.CancelFunc

	mu     sync.Mutex
	runs   map[string]*run // guarded by mu
	closed bool
	wg     sync.WaitGroup // every run's loop

	stats struct{ restarts, unresponsive, gaveUp, retries atomic.Int64 }
}

// AgentStats count what became of execution agents since the gateway
// started.
type AgentStats struct {
	// Restarts counts agents attached anew because theirs ended (killed,
	// crashed) while the execution lived.
	Restarts int64
	// Unresponsive counts agents replaced because they left the gateway's
	// ping unanswered (stopped by sandbox code).
	Unresponsive int64
	// GaveUp counts the times an execution's agent failed MaxRestarts
	// times in a row: its commands then use docker exec until a retry's
	// agent comes up.
	GaveUp int64
	// Retries counts the agents attached after a give-up (RetryAfter).
	Retries int64
}

// Stats returns the counters of AgentStats.
func (a *Agents) Stats() AgentStats {
	return AgentStats{Restarts: a.stats.restarts.Load(), Unresponsive: a.stats.unresponsive.Load(), GaveUp: a.stats.gaveUp.Load(),
		Retries: a.stats.retries.Load()}
}

// run is one execution's agent loop; it owns the attachment and tunnel.
type run struct {
	id     string
	signer ssh.Signer
	priv   ed25519.PrivateKey // signer's key, for the preamble
	cancel context.CancelFunc
	ready  chan struct{} // closed when the first tunnel is up
	done   chan struct{} // closed when the loop returned
	// adopted is set for Resume's run: never up, it is not given up on
	// for good but retried (loop).
	adopted bool
	// retrying is closed when the loop first gives up re-attaching at
	// once, and tries an agent after RetryAfter.
	retrying chan struct{}
	// givenUp is set while the loop has given up re-attaching at once
	// and tries an agent after RetryAfter; owned by the loop (serveOnce
	// clears it as a try's tunnel comes up).
	givenUp bool

	mu      sync.Mutex
	lastErr error          // guarded by mu
	tunnel  *yamux.Session // the live tunnel, nil while down; guarded by mu
	callers bool           // tunnel's agent reads a caller preamble on each stream; guarded by mu
	conn    *agentConn     // the gateway's SSH connection over tunnel; guarded by mu
	dialing chan struct{}  // one slot: held while dialing conn
	probe   chan struct{}  // one slot: a command's channel did not open in time, ping the agent now
	// suspect is set while that ping is pending: Runner answers nil, and
	// commands go to docker exec without waiting OpenTimeout each.
	suspect  bool            // guarded by mu
	ended    <-chan struct{} // closed once tunnel ended and lostWhy is set if known; guarded by mu
	lostSess *yamux.Session  // a tunnel that ended, and how its agent did; guarded by mu
	lostWhy  string
	// kill is closed once the watch's KillStopped under way knows
	// whether it killed the agent (and marked why: markLost); nil when
	// none runs. Guarded by mu.
	kill     chan struct{}
	commands chan struct{}  // a slot per command running through the tunnel (maxTunnelCommands)
	runs     sync.WaitGroup // Runner's goroutines; added to only while tunnel is set
}

// NewAgents returns an Agents that starts agents with attach, checks
// executions with alive, pins host keys in st, registers tunnels in reg
// and gives agents caKey (the user CA's authorized_keys line) to trust.
func NewAgents(attach AttachFunc, alive Alive, st EnrollStore, reg Registrar, caKey string, cfg *AgentsConfig) *Agents {
	var c AgentsConfig
	if cfg != nil {
		c = *cfg
	}
	if len(c.Argv) == 0 {
		c.Argv = DefaultAgentArgv
	}
	if c.Dir == "" {
		c.Dir = "/workspace"
	}
	if c.MaxRestarts <= 0 {
		c.MaxRestarts = 5
	}
	if c.ReadyTimeout <= 0 {
		c.ReadyTimeout = 60 * time.Second
	}
	if c.RetryAfter <= 0 {
		c.RetryAfter = time.Minute
	}
	if c.OpenTimeout <= 0 {
		c.OpenTimeout = 3 * time.Second
	}
	if c.PingTimeout <= 0 {
		c.PingTimeout = 5 * time.Second
	}
	if c.Mux == nil {
		c.Mux = gateway.DefaultTunnelMux()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.OnTunnel == nil {
		c.OnTunnel = func(string, bool) {}
	}
	var key *sshlayer.SessionKey
	if c.Certify != nil {
		var err error
		if key, err = sshlayer.GenerateSessionKey(); err != nil {
			c.Logger.Error("no client key: commands use docker exec", "err", err)
			c.Certify = nil
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Agents{attach: attach, alive: alive, store: st, reg: reg, caKey: strings.TrimSpace(caKey),
		cfg: c, log: c.Logger, key: key, environPaths: []string{"/proc/1/environ", deadline.InitEnvironFile, deadline.EnvironFile}, environForged: forgedCopy{deadline.EnvironFile, deadline.InitDir}, readEnviron: readEnviron, ctx: ctx, cancel: cancel, runs: map[string]*run{}}
}

// Start pins a fresh host key for executionID, starts its agent and waits
// until its tunnel is registered (or ctx ends, or ReadyTimeout). It
// returns the pinned public key. An agent already running for the id is
// replaced. The agent keeps being re-attached while the execution lives,
// until Stop, Forget or Close.
func (a *Agents) Start(ctx context.Context, executionID string) (ssh.PublicKey, error) {
	return a.start(ctx, executionID, false)
}

// Resume is Start for an execution that had an agent before (a gateway
// that restarted and adopted it): the key kept in KeyDir is used again
// when it is still the pinned one, so callers' pins stay valid; otherwise
// a fresh key is pinned. An agent that fails 1 + MaxRestarts times, or is
// not up within ReadyTimeout, fails Resume, but its loop goes on, as one
// that was up goes on after a give-up: it tries one agent after
// RetryAfter, and so on, while the execution lives. Whatever failed the
// agents (sandbox code that killed or stopped them as the gateway came
// back) may pass; the execution ran before the restart and runs on, with
// its commands through docker exec meanwhile. A fresh provision (Start)
// is failed instead.
func (a *Agents) Resume(ctx context.Context, executionID string) (ssh.PublicKey, error) {
	return a.start(ctx, executionID, true)
}

func (a *Agents) start(ctx context.Context, executionID string, resume bool) (ssh.PublicKey, error) {
	if !store.ValidHostID(executionID) {
		return nil, fmt.Errorf("execapi: execution id %q is not a valid host id", executionID)
	}
	a.Stop(executionID)
	t0 := time.Now()
	var signer ssh.Signer
	var priv ed25519.PrivateKey
	if resume {
		signer, priv = a.keptKey(ctx, executionID)
	}
	if signer == nil {
		var err error
		if signer, priv, err = newHostKey(); err != nil {
			return nil, err
		}
		if err := a.pin(ctx, executionID, signer.PublicKey()); err != nil {
			return nil, err
		}
		if err := a.keepKey(executionID, priv); err != nil {
			return nil, err
		}
	}
	keyed := time.Since(t0)
	rctx, cancel := context.WithCancel(a.ctx)
	r := &run{id: executionID, signer: signer, priv: priv, cancel: cancel, ready: make(chan struct{}), done: make(chan struct{}), dialing: make(chan struct{}, 1),
		probe: make(chan struct{}, 1), commands: make(chan struct{}, maxTunnelCommands), adopted: resume, retrying: make(chan struct{})}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		cancel()
		return nil, gateway.ErrClosed
	}
	// A concurrent start for the same id may have won the race since
	// Stop above: the later one replaces it.
	old := a.runs[executionID]
	a.runs[executionID] = r
	a.wg.Add(1)
	a.mu.Unlock()
	if old != nil {
		old.cancel()
	}
	go func() {
		defer a.wg.Done()
		defer close(r.done)
		defer cancel()
		a.loop(rctx, r)
		a.mu.Lock()
		if a.runs[executionID] == r {
			delete(a.runs, executionID)
		}
		a.mu.Unlock()
	}()

	t := time.NewTimer(a.cfg.ReadyTimeout)
	defer t.Stop()
	select {
	case <-r.ready:
		a.log.Info("execution agent started", "execution", executionID, "pinKey", keyed, "total", time.Since(t0))
		return signer.PublicKey(), nil
	case <-r.done:
		return nil, fmt.Errorf("execapi: agent did not start: %w", r.err())
	case <-r.retrying:
		return nil, fmt.Errorf("execapi: agent failed %d times; the gateway tries one again after %v, then less and less often, while the execution lives (its commands use docker exec meanwhile): %w",
			1+a.cfg.MaxRestarts, a.cfg.RetryAfter, r.err())
	case <-t.C:
		if resume {
			return nil, fmt.Errorf("execapi: agent not up within %v; the gateway goes on trying while the execution lives (its commands use docker exec meanwhile): %w", a.cfg.ReadyTimeout, r.err())
		}
		a.Stop(executionID)
		return nil, fmt.Errorf("execapi: agent not up within %v: %w", a.cfg.ReadyTimeout, r.err())
	case <-ctx.Done():
		a.Stop(executionID)
		return nil, ctx.Err()
	}
}

// pin records pub as executionID's host key. An execution id that was an
// execution before (a restore reusing an id, a gateway that restarted)
// gets its key reset first; one naming another kind of host is refused.
func (a *Agents) pin(ctx context.Context, id string, pub ssh.PublicKey) error {
	h, err := a.store.Host(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return fmt.Errorf("execapi: store: %w", err)
	case h.Kind != HostKind:
		return fmt.Errorf("%w: %q is a %q host", ErrNotExecutionHost, id, h.Kind)
	case h.HostKey != "":
		if err := a.store.ResetHostKey(ctx, id, "gateway (new execution agent)"); err != nil {
			return fmt.Errorf("execapi: reset host key: %w", err)
		}
	}
	info, _ := json.Marshal(ExecutionInfo) // strings and a bool cannot fail
	_, err = a.store.Enroll(ctx, store.Enrollment{HostID: id, Kind: HostKind, Info: info,
		HostKey: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))})
	if err != nil {
		return fmt.Errorf("execapi: pin host key: %w", err)
	}
	return nil
}

// Stop ends executionID's agent loop and tunnel and waits for them. It is
// a no-op when none runs.
func (a *Agents) Stop(executionID string) {
	a.mu.Lock()
	r := a.runs[executionID]
	delete(a.runs, executionID)
	a.mu.Unlock()
	if r != nil {
		r.cancel()
		<-r.done
	}
}

// Forget is Stop for an execution that ended: its kept key is deleted and
// its host record with it, so /v1/hosts does not fill with ended sandboxes.
func (a *Agents) Forget(executionID string) {
	a.Stop(executionID)
	a.forgetHost(executionID)
}

// forgetHost deletes an ended execution's kept key and host record.
func (a *Agents) forgetHost(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if h, err := a.store.Host(ctx, id); err == nil && h.Kind != HostKind {
		// Another kind's host (DELETE /v1/executions/{id} answers 204
		// for any id): DeleteHost of an execution's kind deletes none of
		// it and says nil, and Forgot took that for its record gone,
		// dropping the machine's public shares.
		return
	}
	a.dropKey(id)
	if err := a.store.DeleteHost(ctx, id, HostKind); err != nil {
		a.log.Warn("forget execution host", "execution", id, "err", err)
		return
	}
	a.forgot(id)
}

// forgot tells Config.Forgot that id's host record is gone.
func (a *Agents) forgot(id string) {
	if a.cfg.Forgot != nil {
		a.cfg.Forgot(id)
	}
}

// Running reports whether an agent loop runs for executionID.
func (a *Agents) Running(executionID string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.runs[executionID] != nil
}

// Close ends every agent loop and waits. The agents inside containers see
// their stdin close; the executions themselves live on.
func (a *Agents) Close() {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.cancel()
	a.wg.Wait()
}

func (r *run) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lastErr == nil {
		return errors.New("no attempt finished")
	}
	return r.lastErr
}

func (r *run) setErr(err error) {
	r.mu.Lock()
	r.lastErr = err
	r.mu.Unlock()
}

// stableAfter is how long an agent must stay up for its restart budget to
// be renewed.
const stableAfter = time.Minute

// maxRetryFactor bounds the wait between tries after a give-up at that
// many times RetryAfter (16 min by default).
const maxRetryFactor = 16

// loop attaches the agent and serves its tunnel; when the agent dies while
// the execution lives, it attaches again, with backoff, at most
// MaxRestarts times in a row. Then it gives up re-attaching at once and
// tries one agent after RetryAfter, then after twice as long, and so on
// up to maxRetryFactor times RetryAfter, while the execution lives; an
// agent that stays up a minute ends the backoff. An agent never up ends
// the loop there, failing the provision, unless the execution was
// adopted (Resume).
func (a *Agents) loop(ctx context.Context, r *run) {
	log := a.log.With("execution", r.id)
	fails := 0
	var retry time.Duration // the wait before the next try once given up; 0 before
	for {
		var up time.Time // when the tunnel was registered; zero if never
		err := a.serveOnce(ctx, r, log, &up)
		if ctx.Err() != nil {
			return
		}
		r.setErr(err)
		if errors.Is(err, gateway.ErrClosed) || a.reg.Closed() {
			// The gateway is shutting down: it closed the tunnel, and
			// its next start re-attaches. Not a warning per sandbox.
			return
		}
		if aerr := a.alive(ctx, r.id); aerr != nil {
			log.Info("execution ended; agent tunnel closed", "reason", aerr)
			a.forgetHost(r.id)
			return
		}
		// Stable means up a while, not a while trying: an agent stopped
		// before it answered its first ping was not up at all.
		if !up.IsZero() && time.Since(up) > stableAfter {
			fails, retry = 0, 0
		}
		fails++
		var wait time.Duration
		switch {
		case fails <= a.cfg.MaxRestarts:
			wait = min(200*time.Millisecond<<fails, 10*time.Second)
			if errors.Is(err, errUnresponsive) {
				a.stats.unresponsive.Add(1)
			} else {
				a.stats.restarts.Add(1)
			}
			log.Warn("agent ended while its execution lives; re-attaching", "err", err, "attempt", fails, "backoff", wait)
		case !isClosed(r.ready) && !r.adopted:
			// Never up: Start answers the provision with err. An
			// adopted execution's agent was up before the gateway
			// restarted: it is retried as below.
			a.stats.gaveUp.Add(1)
			log.Error("agent keeps failing; giving up", "attempts", fails, "err", err)
			return
		default:
			if retry == 0 {
				retry = a.cfg.RetryAfter
			} else {
				retry = min(2*retry, maxRetryFactor*a.cfg.RetryAfter)
			}
			wait = retry
			if !r.givenUp {
				// Logged once as the agent goes, once as one comes
				// back (serveOnce), not at every failed try.
				r.givenUp = true
				a.stats.gaveUp.Add(1)
				if !isClosed(r.retrying) {
					close(r.retrying)
				}
				log.Error("agent keeps failing; giving up re-attaching it at once: its commands use docker exec, and it is no host, until an agent tried later comes up", "attempts", fails, "retryIn", wait, "err", err)
			} else {
				log.Debug("agent tried after a give-up failed", "err", err, "retryIn", wait)
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if r.givenUp {
			a.stats.retries.Add(1)
		}
	}
}

// muxFor is the tunnel's yamux configuration for one attachment, which
// tells of the agent's misuse: sandbox code that took over its agent can
// open streams toward the gateway (a real agent opens none) or flood
// window updates that grant nothing. Both were bounded (refused streams,
// a closed tunnel) but unheard of; each kind is logged once per
// attachment, naming the execution, as the machine agents' tunnels do.
func (a *Agents) muxFor(log *slog.Logger) *bytestream.MuxConfig {
	mc := *a.cfg.Mux
	next := mc.OnMisuse
	var refusedOnce, emptyOnce sync.Once
	mc.OnMisuse = func(m bytestream.MuxMisuse) {
		if next != nil {
			next(m)
		}
		switch m {
		case bytestream.MisuseStreamRefused:
			refusedOnce.Do(func() {
				log.Warn("execution agent opened more streams than its tunnel allows (agents open none: sandbox code that took over its agent, or a broken agent); they are refused (logged once per attachment)", "limit", mc.MaxStreams)
			})
		case bytestream.MisuseEmptyWindowUpdate:
			emptyOnce.Do(func() {
				log.Warn("execution agent sends window updates that grant nothing (sandbox code that took over its agent, or a broken agent); its tunnel is closed if they go on (logged once per attachment)")
			})
		}
	}
	return &mc
}

// isClosed reports whether c is closed.
func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// serveOnce runs one attachment: the keys preamble, then yamux; the
// session is registered as the host's tunnel once the agent answers a
// ping, and unregistered when it ends.
func (a *Agents) serveOnce(ctx context.Context, r *run, log *slog.Logger, up *time.Time) error {
	stderr := &logWriter{log: log}
	t0 := time.Now()
	stdio, err := a.attach(ctx, r.id, a.cfg.Argv, stderr)
	if err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	attached := time.Since(t0)
	conn := stdioConn{stdio}
	defer func() { _ = conn.Close() }()
	block, err := ssh.MarshalPrivateKey(r.priv, "")
	if err != nil {
		return fmt.Errorf("marshal host key: %w", err)
	}
	keys := agent.StdioKeys{
		HostKey: string(pem.EncodeToMemory(block)), TrustedCAs: []string{a.caKey}, HostID: r.id, Dir: a.cfg.Dir,
		// Background processes outlive their command, as under docker
		// exec (the API's commands run here); the container's end ends
		// them.
		LeaveBackground: true,
		// Commands over SSH (client.Dial, ssh) get the environment docker
		// exec gives the API's, the container's; they got the agent's
		// clean one, without the image's PATH or the provision env.
		InheritEnv: true,
		// Out of memory, the kernel takes a command rather than the agent
		// (half the limit added to a command's score), whose end loses
		// every command's channel and leaves the hog running.
		ChildOOMScoreAdj: dockerhost.CommandOOMScoreAdj,
		// Commands at the pids limit must not take the threads the agent
		// needs, whose end loses every command's channel.
		KeepTasks: true,
		MakeDirs:  a.cfg.MakeDirs,
		// Each stream names its caller, if the agent answers that it
		// reads them (an adopted execution's older agent does not).
		CallerPreamble: wire.CallerPreambleProxyV1,
		// If sandbox code stops the agent, KillStopped kills this
		// process and no other of its name.
		ReportPID: true,
	}
	if e, ok := stdio.(interface{ Env() []string }); ok {
		keys.Env = e.Env()
	}
	err = agent.WriteStdioKeys(conn, keys)
	if err != nil {
		return err
	}
	muxConn, acks := agent.ReadStdioAcks(conn)
	proc := &agentProc{acks: acks, stdio: stdio}
	sess, err := bytestream.MuxClient(muxConn, a.muxFor(log))
	if err != nil {
		return fmt.Errorf("mux: %w", err)
	}
	defer func() { _ = sess.Close() }()
	stop := context.AfterFunc(ctx, func() { _ = sess.Close() })
	defer stop()
	// A ping answered means the agent read its keys and serves yamux.
	if !answered(ctx, sess, a.cfg.PingTimeout) && !sess.IsClosed() && ctx.Err() == nil {
		// Sandbox code may stop an agent before it answers (a loop that
		// stops each as it comes): the ping waited the session's 60 s
		// keepalive, and that attempt counted as a stable run.
		if a.cfg.KillStopped != nil {
			if n, err := a.killStopped(ctx, r, proc, log); err == nil && n > 0 {
				return fmt.Errorf("%w: stopped before it answered its first ping", errUnresponsive)
			}
		}
		// Slow, not stopped (or not known): wait on.
		if _, err := sess.Ping(); err != nil {
			return fmt.Errorf("agent did not answer: %w (stderr: %s)", err, stderr.last())
		}
	}
	if sess.IsClosed() {
		return fmt.Errorf("agent did not answer: its tunnel ended (stderr: %s)", stderr.last())
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	answered := time.Since(t0)
	// The ping's answer came after the agent's ack, if it sent one.
	tunnel := gateway.MuxTunnel(sess)
	if acks.Callers() {
		tunnel = gateway.CallerTunnel(sess)
	}
	unregister, _, err := a.reg.Register(r.id, tunnel)
	if err != nil {
		return fmt.Errorf("register tunnel: %w", err) // wraps gateway.ErrClosed at shutdown
	}
	*up = time.Now()
	if r.givenUp {
		r.givenUp = false
		log.Info("agent back after the gateway gave up on it: its commands go through it again, and it is a host again")
	}
	defer func() {
		unregister()
		a.cfg.OnTunnel(r.id, false)
	}()
	ended := make(chan struct{})
	r.setTunnel(sess, acks.Callers(), ended)
	defer r.clearTunnel()
	// Before clearTunnel, which waits for the commands' goroutines: their
	// Runs wait for this, briefly, to say how the agent ended.
	defer close(ended)
	if a.cfg.Certify != nil && r.hold(1) {
		// Connect now, while the provision answers: the first API
		// command then finds the connection (and the environment) ready.
		go func() {
			defer r.runs.Done()
			// An execution that ended under the connection (a terminate
			// right after a provision or restore) is logged by the loop;
			// warning that its commands use docker exec would be wrong.
			if _, err := a.connect(ctx, r); err != nil && ctx.Err() == nil && !a.reg.Closed() && a.alive(ctx, r.id) == nil {
				log.Warn("gateway connection to the agent failed; commands use docker exec until one succeeds", "err", err)
			}
		}()
	}
	a.cfg.OnTunnel(r.id, true)
	select {
	case <-r.ready:
	default:
		close(r.ready)
	}
	// The timings show where a sandbox's create-to-first-command goes.
	log.Info("execution agent tunnel up", "hostKey", ssh.FingerprintSHA256(r.signer.PublicKey()),
		"attach", attached, "ping", answered-attached, "total", time.Since(t0))
	if err := a.watch(ctx, r, sess, proc, log); err != nil {
		return err
	}
	why := ""
	if !a.reg.Closed() {
		// Not at the gateway's shutdown, which closed the tunnel itself:
		// the agent lives on, and no exit code would come.
		why = endedWhy(ctx, stdio)
	}
	if why != "" {
		r.markLost(sess, why)
		why = "; the agent " + why
	}
	return fmt.Errorf("tunnel ended (agent stderr: %s%s)", stderr.last(), why)
}

// endedWait bounds how long a command the agent's end cut waits for the
// tunnel's loop to learn how it ended (endedWhy), and endedWhy's wait.
const endedWait = 2 * time.Second

// endedWhy is how the agent behind stdio ended, when stdio tells its exit
// code (dockerhost.Stdio does), in words that complete "the agent …";
// "" when unknown.
func endedWhy(ctx context.Context, stdio Stdio) string {
	w, ok := stdio.(interface {
		Wait(context.Context) (int, error)
	})
	if !ok || ctx.Err() != nil {
		return ""
	}
	wctx, cancel := context.WithTimeout(ctx, endedWait)
	defer cancel()
	code, err := w.Wait(wctx)
	switch {
	case err != nil:
		return ""
	case code == 128+9:
		return "was killed (SIGKILL: by sandbox code, the command itself maybe, or by the kernel out of memory)"
	case code > 128 && code < 128+65:
		return fmt.Sprintf("was killed by signal %d", code-128)
	}
	return fmt.Sprintf("exited with code %d", code)
}

// newHostKey makes an execution's host key; it lives in the gateway's
// memory and the agent's, nowhere else.
func newHostKey() (ssh.Signer, ed25519.PrivateKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("execapi: host key: %w", err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, nil, fmt.Errorf("execapi: host key: %w", err)
	}
	return s, priv, nil
}

// logWriter logs an agent's stderr, a bounded line at a time, and keeps
// the last line for error messages. The lines are bounded too: sandbox
// code that takes over its agent can write to its stderr without end, and
// each write was a line in the gateway's log.
type logWriter struct {
	log  *slog.Logger
	mu   sync.Mutex
	tail string

	spell   time.Time // start of the current stderrSpell
	lines   int       // logged in this spell
	dropped int       // not logged in this spell
}

const maxLogLine = 512

// maxStderrLines is how many lines of one agent's stderr are logged per
// stderrSpell; an agent logs a few when something goes wrong.
const (
	maxStderrLines = 20
	stderrSpell    = time.Minute
)

func (w *logWriter) Write(p []byte) (int, error) {
	s := strings.TrimSpace(string(p))
	if len(s) > maxLogLine {
		s = s[:maxLogLine] + "…"
	}
	if s == "" {
		return len(p), nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tail = s
	if now := time.Now(); now.Sub(w.spell) >= stderrSpell {
		if w.dropped > 0 {
			w.log.Warn("agent stderr: lines were dropped", "dropped", w.dropped, "last", s)
		}
		w.spell, w.lines, w.dropped = now, 0, 0
	}
	if w.lines < maxStderrLines {
		w.lines++
		w.log.Info("agent stderr", "line", s)
		return len(p), nil
	}
	if w.dropped == 0 {
		w.log.Warn("agent stderr: more lines than an agent writes (a broken agent, or sandbox code that took it over); the rest of this minute's are dropped and counted", "limit", maxStderrLines, "per", stderrSpell)
	}
	w.dropped++
	return len(p), nil
}

func (w *logWriter) last() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.tail == "" {
		return "none"
	}
	return w.tail
}

// CheckID fails with ErrNotExecutionHost when id names a host that is not
// an execution: a caller must not take over a machine's host id (its
// pinned key and tunnel) by naming an execution after it.
func (a *Agents) CheckID(ctx context.Context, id string) error {
	h, err := a.store.Host(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("execapi: store: %w", err)
	case h.Kind != HostKind:
		return fmt.Errorf("%w: %q is a %q host", ErrNotExecutionHost, id, h.Kind)
	}
	return nil
}

// PinnedKey returns id's pinned host key, nil when none.
func (a *Agents) PinnedKey(ctx context.Context, id string) ssh.PublicKey {
	h, err := a.store.Host(ctx, id)
	if err != nil || h.HostKey == "" {
		return nil
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(h.HostKey))
	if err != nil {
		return nil
	}
	return pub
}

func (a *Agents) keyPath(id string) string {
	return filepath.Join(a.cfg.KeyDir, id+".key") // id is a valid host id: no separators
}

// keepKey writes id's host key to KeyDir (when set), atomically, 0600.
func (a *Agents) keepKey(id string, priv ed25519.PrivateKey) error {
	if a.cfg.KeyDir == "" {
		return nil
	}
	block, err := ssh.MarshalPrivateKey(priv, "hostgate execution "+id)
	if err != nil {
		return fmt.Errorf("execapi: keep host key: %w", err)
	}
	if err := os.MkdirAll(a.cfg.KeyDir, 0o700); err != nil {
		return fmt.Errorf("execapi: keep host key: %w", err)
	}
	tmp, err := os.CreateTemp(a.cfg.KeyDir, ".key-*")
	if err != nil {
		return fmt.Errorf("execapi: keep host key: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	// Synced, and its directory after the rename: a key lost to a power
	// loss, or left empty, has Resume pin a fresh one, which callers'
	// pins refuse.
	_, err = tmp.Write(pem.EncodeToMemory(block))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = durable.Rename(tmp.Name(), a.keyPath(id))
	}
	if err != nil {
		return fmt.Errorf("execapi: keep host key: %w", err)
	}
	return nil
}

// keptKey returns id's kept key when it is still the pinned one.
func (a *Agents) keptKey(ctx context.Context, id string) (ssh.Signer, ed25519.PrivateKey) {
	if a.cfg.KeyDir == "" {
		return nil, nil
	}
	b, err := os.ReadFile(a.keyPath(id))
	if err != nil {
		return nil, nil
	}
	raw, err := ssh.ParseRawPrivateKey(b)
	if err != nil {
		return nil, nil
	}
	priv, ok := raw.(*ed25519.PrivateKey)
	if !ok {
		return nil, nil
	}
	signer, err := ssh.NewSignerFromKey(*priv)
	if err != nil {
		return nil, nil
	}
	pinned := a.PinnedKey(ctx, id)
	if pinned == nil || !bytes.Equal(pinned.Marshal(), signer.PublicKey().Marshal()) {
		return nil, nil
	}
	return signer, *priv
}

// Prune forgets the executions not in live: those that ended while no
// gateway ran (Adopt reaped them, or their containers went with a reboot)
// and those whose Forget could not reach the store (a full disk). Their
// kept keys are deleted and so are their host records, which stayed in
// /v1/hosts as disconnected hosts for good. Call it at start, before
// serving: an execution provisioned meanwhile is not in live.
func (a *Agents) Prune(ctx context.Context, live []string) {
	keep := map[string]bool{}
	for _, id := range live {
		keep[id] = true
	}
	if a.cfg.KeyDir != "" {
		if entries, err := os.ReadDir(a.cfg.KeyDir); err == nil {
			for _, e := range entries {
				if id, ok := strings.CutSuffix(e.Name(), ".key"); !ok || !keep[id] {
					_ = os.Remove(filepath.Join(a.cfg.KeyDir, e.Name()))
				}
			}
		}
	}
	if a.store == nil {
		return
	}
	hosts, err := a.store.Hosts(ctx)
	if err != nil {
		a.log.Warn("prune ended executions' hosts", "err", err)
		return
	}
	for _, h := range hosts {
		if h.Kind == HostKind && !keep[h.ID] {
			if err := a.store.DeleteHost(ctx, h.ID, HostKind); err != nil {
				a.log.Warn("forget execution host", "execution", h.ID, "err", err)
				continue
			}
			a.log.Info("forgot the host of an execution that ended while no gateway ran", "execution", h.ID)
			a.forgot(h.ID)
		}
	}
}

// dropKey deletes id's kept key.
func (a *Agents) dropKey(id string) {
	// keyPath's id must be a file name: a caller's mistake must not
	// remove a file outside KeyDir.
	if a.cfg.KeyDir != "" && store.ValidHostID(id) {
		_ = os.Remove(a.keyPath(id))
	}
}
