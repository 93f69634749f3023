package dockerhost

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
)

// Labels of pooled containers. A pooled container carries no
// LabelExecution: it belongs to no execution until a claim, and a claim
// cannot change labels, so the claim renames it instead (see claimedName).
const (
	LabelPool        = "hostgate.pool"         // set on warm containers (value "1")
	LabelPoolExpires = "hostgate.pool.expires" // unix seconds: the pool's TTL for it, for operators (the pool keeps its own copy)
)

// PoolConfig is the warm pool of pre-created containers. A pooled
// container is created, started and image-checked ahead of time; its
// main process blocks reading its stdin, which the pool holds
// attached, until a claim writes the runtime: the in-container deadline
// and the host deadline both start at the claim. A container is handed out
// once and then belongs to that execution; the pool never sees it again.
type PoolConfig struct {
	// Size is the number of warm containers per key; 0 disables the pool.
	Size int
	// MaxTotal bounds warm and filling containers over all keys. Default
	// 4*Size.
	MaxTotal int
	// Keys are pre-warmed at start (e.g. the gateway's sandbox defaults):
	// Image, Resources and Network of a provision request; the rest is
	// ignored. Other keys are learned on the first provision that makes
	// a container of them.
	Keys []ProvisionRequest
	// MaxKeys bounds the keys kept (pre-warmed and learned). Default 16.
	MaxKeys int
	// TTL is how long an unclaimed container is kept before it is replaced.
	// Default 10 minutes.
	TTL time.Duration
	// FillConcurrency bounds concurrent container creates. Default 2.
	FillConcurrency int
	// Agent, when set, is started in each warm container once it is
	// ready, with stdin and stdout attached (it waits for its keys on
	// stdin): the execution that claims the container gets that
	// attachment from its first AttachStdio of the same argv, instead of
	// waiting for a docker exec and the agent's start. Unclaimed, it ends
	// with its container. A provision env naming LANG, LC_ALL, TZ or
	// HOSTGATE_* (which the agent reads from its own environment) starts a
	// fresh agent instead.
	Agent []string
	// RefillDelay holds back the refill after a claim: creating a
	// container is CPU-heavy for the engine, and the new execution's
	// first commands (workspace import, agent start) should not compete
	// with it. Default 1s; negative refills at once.
	RefillDelay time.Duration
}

// PoolStats are the pool's counters since the host started, and its
// current size.
type PoolStats struct {
	Hits       int64 // provisions served by a warm container
	Misses     int64 // provisions that created a container (no warm one for the key)
	Dead       int64 // claims of a container that died in the pool (then created fresh)
	Fills      int64 // containers made ready
	FillErrors int64
	Reaps      int64 // unclaimed containers removed after their TTL, at Close, or by Adopt
	Ready      int   // warm containers now
	Filling    int   // creates in flight now
}

// poolKey is everything that shapes a pooled container. The user and the
// tools are the host's and the same for every key. The runtime and the
// output limit are not in it: the claim starts the runtime and the host
// enforces both, so a warm container serves any of them, and the claim's
// name records them for Adopt (see claimedName).
type poolKey struct {
	image   string
	res     Resources // RuntimeMs and MaxOutputBytes zero
	network string
}

func keyOf(req ProvisionRequest) poolKey {
	res := req.Resources
	res.RuntimeMs, res.MaxOutputBytes = 0, 0
	return poolKey{image: req.Image, res: res, network: req.Network.Mode}
}

// template is the request a pooled container is made for: no id, no env,
// an empty workspace, and no runtime or output limit (its spec label
// carries zeros; the claim supplies both).
func (k poolKey) template() ProvisionRequest {
	return ProvisionRequest{Image: k.image, Resources: k.res, Network: Network{Mode: k.network}, Workspace: WorkspaceSpec{Kind: WorkspaceEmpty}}
}

// pooled is one warm container. The attachment is its stdin; closing it
// ends the main process (StdinOnce), so an unclaimed container does not
// outlive the pool's process.
type pooled struct {
	cid     string
	name    string
	hj      types.HijackedResponse
	expires time.Time
	agent   *Stdio // PoolConfig.Agent started ahead; nil without one
	uid     int    // its own, from its creation (LabelUID)
	// imageID is the image an unpinned reference named when the container
	// was made ("" for a pinned one, which cannot move): a tag moved
	// since (docker pull, docker tag) names another image, which a cold
	// create would run.
	imageID string
}

// agentEnvOK reports whether a pre-started agent (started without the
// provision env) serves a provision with env as a fresh one would: the
// agent reads only these names from its environment.
func agentEnvOK(env map[string]string) bool {
	for k := range env {
		if k == "LANG" || k == "LC_ALL" || k == "TZ" || strings.HasPrefix(k, "HOSTGATE_") {
			return false
		}
	}
	return true
}

// keyState is the pool's view of one key.
type keyState struct {
	ready    []*pooled
	filling  int
	pinned   bool      // pre-warmed: never forgotten
	lastWant time.Time // last provision for this key
	notUntil time.Time // no fill before this (backoff after an error, or RefillDelay after a claim)
	// failures counts the fills that failed since the last that did not:
	// the backoff doubles with each. failedWith is the first of them's
	// error as logged (fillErrorKey), and unlogged the later ones that
	// said the same: one image the registry refuses is one error line,
	// not one per retry for as long as the key is kept.
	failures   int
	failedWith string
	unlogged   int
}

// pool owns the warm containers. Its run loop starts fills (each a
// goroutine in fillWG) and replaces expired containers; Close stops both
// and removes what is left.
type pool struct {
	h   *Docker
	cfg PoolConfig
	log *slog.Logger

	ctx    context.Context // ends at close
	cancel context.CancelFunc
	kick   chan struct{} // buffered 1: wake the run loop
	runWG  sync.WaitGroup
	fillWG sync.WaitGroup
	sem    chan struct{} // bounds concurrent fills

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change (waitFor)
	keys    map[poolKey]*keyState
	owned   map[string]bool // names of containers being created or warm; not yet handed out or removed
	total   int             // ready + filling over all keys
	closed  bool

	hits, misses, dead, fills, fillErrors, reaps atomic.Int64
}

// A key's fill that failed is tried again after fillBackoff, doubled
// with each failure in a row up to maxFillBackoff: a pinned key (the
// sandbox defaults) is never forgotten, and a flat 30 s had a registry
// that refuses its image pulled from, and the error logged, 120 times an
// hour for as long as the gateway ran. A fill that succeeds starts over.
const (
	fillBackoff    = 30 * time.Second
	maxFillBackoff = 10 * time.Minute
)

// fillBackoffAfter is the wait after the nth failed fill in a row (n ≥ 1).
func fillBackoffAfter(n int) time.Duration {
	d := fillBackoff
	for i := 1; i < n && d < maxFillBackoff; i++ {
		d *= 2
	}
	return min(d, maxFillBackoff)
}

// hexRun is a container id or a pool container's random name in an
// engine's error, which differ from one fill to the next.
var hexRun = regexp.MustCompile(`[0-9a-f]{12,}`)

// fillErrorKey is err as two fills' failures compare: the same error,
// save ids and names.
func fillErrorKey(err error) string {
	return hexRun.ReplaceAllString(err.Error(), "…")
}

func newPool(h *Docker, cfg PoolConfig) (*pool, error) {
	if cfg.Size < 0 || cfg.MaxTotal < 0 || cfg.MaxKeys < 0 || cfg.TTL < 0 || cfg.FillConcurrency < 0 {
		return nil, fmt.Errorf("dockerhost: pool settings must not be negative")
	}
	if cfg.MaxTotal == 0 {
		cfg.MaxTotal = 4 * cfg.Size
	}
	if cfg.MaxKeys == 0 {
		cfg.MaxKeys = 16
	}
	if cfg.TTL == 0 {
		cfg.TTL = 10 * time.Minute
	}
	if cfg.FillConcurrency == 0 {
		cfg.FillConcurrency = 2
	}
	if cfg.RefillDelay == 0 {
		cfg.RefillDelay = time.Second
	}
	p := &pool{h: h, cfg: cfg, log: h.logger.With("part", "pool"), kick: make(chan struct{}, 1),
		sem: make(chan struct{}, cfg.FillConcurrency), changed: make(chan struct{}), keys: map[poolKey]*keyState{}, owned: map[string]bool{}}
	for i, req := range cfg.Keys {
		req.ExecutionID, req.Env = "", nil
		req.Workspace = WorkspaceSpec{Kind: WorkspaceEmpty}
		if err := h.policy.ValidateProvision(&req); err != nil {
			return nil, fmt.Errorf("dockerhost: pool key %d: %w", i, err)
		}
		if len(p.keys) < cfg.MaxKeys {
			p.keys[keyOf(req)] = &keyState{pinned: true}
		}
	}
	return p, nil
}

func (p *pool) start() {
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.runWG.Add(1)
	go p.run()
	p.wake()
}

func (p *pool) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// run is the pool's one loop: it tops every key up and replaces expired
// containers, waking on a kick or at the next expiry.
func (p *pool) run() {
	defer p.runWG.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := p.tick()
		timer.Reset(max(time.Until(next), 10*time.Millisecond))
		select {
		case <-p.ctx.Done():
			return
		case <-p.kick:
		case <-timer.C:
		}
	}
}

// tick removes expired containers, forgets idle learned keys, starts the
// fills that fit, and returns when it wants to run again.
func (p *pool) tick() time.Time {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return p.h.now().Add(p.cfg.TTL)
	}
	expired, starts, next := p.planLocked(p.h.now())
	p.mu.Unlock()
	for _, pc := range expired {
		p.remove(pc)
	}
	if len(expired) > 0 {
		p.notify()
	}
	for _, k := range starts {
		p.fillWG.Add(1)
		go p.fill(k)
	}
	return next
}

// planLocked is tick's bookkeeping, without side effects on the engine:
// it takes the expired containers out of the pool, forgets idle learned
// keys and counts the fills to start as filling. p.mu must be held.
func (p *pool) planLocked(now time.Time) (expired []*pooled, starts []poolKey, next time.Time) {
	next = now.Add(p.cfg.TTL)
	for k, ks := range p.keys {
		kept := ks.ready[:0]
		for _, pc := range ks.ready {
			if !pc.expires.After(now) {
				expired = append(expired, pc)
				delete(p.owned, pc.name)
				p.total--
				continue
			}
			kept = append(kept, pc)
			if pc.expires.Before(next) {
				next = pc.expires
			}
		}
		ks.ready = kept
		if !ks.pinned && len(ks.ready) == 0 && ks.filling == 0 && now.Sub(ks.lastWant) > p.cfg.TTL {
			delete(p.keys, k)
		}
	}
	for k, ks := range p.keys {
		if now.Before(ks.notUntil) {
			if ks.notUntil.Before(next) {
				next = ks.notUntil
			}
			continue
		}
		for len(ks.ready)+ks.filling < p.cfg.Size && p.total < p.cfg.MaxTotal {
			ks.filling++
			p.total++
			starts = append(starts, k)
		}
	}
	return expired, starts, next
}

// fill makes one warm container for k.
func (p *pool) fill(k poolKey) {
	defer p.fillWG.Done()
	var pc *pooled
	var err error
	defer func() { p.fillEnded(k, pc, err) }()
	select {
	case p.sem <- struct{}{}:
	case <-p.ctx.Done():
		return
	}
	defer func() { <-p.sem }()
	pc, err = p.create(p.ctx, k)
	if err != nil {
		pc = nil
	}
}

// fillEnded keeps the books of a fill of k that made pc, or failed with
// err (pc nil; err nil when the pool closed before it began): the
// container joins k's ready ones, or the key waits out its backoff, and
// the failure is logged unless it is the one logged for the failures
// before it.
func (p *pool) fillEnded(k poolKey, pc *pooled, err error) {
	p.mu.Lock()
	ks := p.keys[k]
	if ks == nil { // forgotten meanwhile: keep the books straight
		ks = &keyState{}
	}
	ks.filling--
	failed := pc == nil && err != nil && p.ctx.Err() == nil && !errors.Is(err, errClosed)
	var recovered, unlogged, failures int
	var logIt bool
	var retry time.Duration
	switch {
	case pc != nil:
		// A success starts the backoff over, and says what it ends.
		if ks.failures > 0 {
			recovered, unlogged = ks.failures, ks.unlogged
		}
		ks.failures, ks.failedWith, ks.unlogged = 0, "", 0
	case failed:
		ks.failures++
		failures = ks.failures
		retry = fillBackoffAfter(ks.failures)
		if key := fillErrorKey(err); key != ks.failedWith {
			logIt, unlogged = true, ks.unlogged
			ks.failedWith, ks.unlogged = key, 0
		} else {
			ks.unlogged++
		}
	}
	switch {
	case pc != nil && !p.closed && p.keys[k] != nil:
		p.fills.Add(1)
		ks.ready = append(ks.ready, pc)
		p.notifyLocked()
		p.mu.Unlock()
		if recovered > 0 {
			p.log.Info("pool fills succeed again", "image", k.image, "failedFills", recovered, "unloggedRepeats", unlogged)
		}
		p.log.Info("warm container ready", "container", pc.cid, "image", k.image, "agent", pc.agent != nil)
		return
	case pc == nil:
		p.total--
		// The backoff of a fill that never began (the pool closing) does
		// not matter: nothing fills after.
		ks.notUntil = p.h.now().Add(max(retry, fillBackoff))
	default:
		p.total--
		delete(p.owned, pc.name)
	}
	p.notifyLocked()
	p.mu.Unlock()
	if failed {
		p.fillErrors.Add(1)
		if logIt {
			// Repeats of this error are not logged until another error or
			// a success: PoolStats.FillErrors counts each.
			p.log.Error("fill pool", "image", k.image, "err", err, "failedFills", failures, "retryIn", retry, "earlierRepeatsUnlogged", unlogged)
		} else {
			p.log.Debug("fill pool failed again, as logged before", "image", k.image, "failedFills", failures, "retryIn", retry)
		}
	}
	if pc != nil {
		p.remove(pc)
		p.notify()
	}
	p.wake() // the capacity may serve another key
}

// poolScript is the pooled container's main process without a deadline
// tool: it waits for the runtime in seconds on stdin, then becomes the
// in-container deadline (deadlineScript, which SetTimeout can move). An
// EOF (the pool's attachment closed) ends it, and AutoRemove deletes the
// container. A deadline tool reads stdin alike.
const poolScript = `read -r secs && exec /bin/sh -c '` + deadlineScript + `' hostgate-deadline "$secs"`

// create creates, attaches, starts and prepares one pooled container.
func (p *pool) create(ctx context.Context, k poolKey) (_ *pooled, err error) {
	h := p.h
	req := k.template()
	expires := h.now().Add(p.cfg.TTL)
	labels := maps.Clone(h.labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelOwner] = h.owner
	// Its own uid from the start: it serves one execution only.
	uid, err := h.takeUID(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			h.uids.release(uid)
		}
	}()
	cfg, hc, err := h.policy.ContainerConfig("", uid, req, expires, labels)
	if err != nil {
		return nil, err
	}
	// Emptied, not deleted: a deleted key would let the image's value
	// show through (ownLabels).
	cfg.Labels[LabelExecution] = ""
	cfg.Labels[LabelExpires] = ""
	// A marker: Adopt reaps every unclaimed warm container of a previous
	// run, whatever it was made for, so no key hash (which hashed the
	// agent binary on every fill) is needed.
	cfg.Labels[LabelPool] = "1"
	cfg.Labels[LabelPoolExpires] = strconv.FormatInt(expires.Unix(), 10)
	// cfg.Env has what every execution gets (HOME, TMPDIR); a claim's
	// provision env travels with each process instead (execution.env).
	cfg.Entrypoint = deadlineArgv(h.policy.deadlineTool, "-")
	cfg.OpenStdin, cfg.StdinOnce, cfg.AttachStdin = true, true, true
	var b [8]byte
	_, _ = rand.Read(b[:])
	name := "hostgate-pool-" + hex.EncodeToString(b[:])
	// Owned by name before it exists: an Adopt listing meanwhile must not
	// take it for a previous run's.
	p.mu.Lock()
	p.owned[name] = true
	p.mu.Unlock()
	defer func() {
		if err != nil {
			p.mu.Lock()
			delete(p.owned, name)
			p.mu.Unlock()
		}
	}()
	if err := h.ensureTools(ctx, cfg.Image); err != nil {
		return nil, err
	}
	cid, err := h.create(ctx, cfg, hc, name)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			if derr := h.destroy(cid); derr != nil {
				p.log.Error("remove failed pool container", "container", cid, "err", derr)
			}
		}
	}()
	var imageID string
	if !strings.Contains(cfg.Image, "@sha256:") {
		ins, err := h.api.ContainerInspect(ctx, cid)
		if err != nil {
			return nil, fmt.Errorf("inspect container: %w", err)
		}
		imageID = ins.Image
	}
	// Attach before start: the main process must find its stdin held.
	hj, err := h.api.ContainerAttach(ctx, cid, container.AttachOptions{Stream: true, Stdin: true})
	if err != nil {
		return nil, fmt.Errorf("attach stdin: %w", err)
	}
	defer func() {
		if err != nil {
			hj.Close()
		}
	}()
	if err := h.api.ContainerStart(ctx, cid, container.StartOptions{}); err != nil {
		return nil, fmt.Errorf("start container: %w", err)
	}
	// Every exec names the sandbox's user: the container's own is its
	// init's when PID 1 is the deadline tool.
	user := userOf(uid)
	if err := h.prepare(ctx, cid, user, cfg.Image); err != nil {
		return nil, err
	}
	// The claim execs sleep: check it now, not when a caller waits.
	code, err := h.runner.run(ctx, process{containerID: cid, user: user, argv: []string{"sleep", "0"}, dir: "/", env: ownEnv,
		stdout: io.Discard, stderr: io.Discard})
	if err != nil {
		return nil, fmt.Errorf("check sleep: %w", err)
	}
	if code != 0 {
		return nil, &Error{Code: CodeInvalidRequest, Field: "image", Message: "the image must provide /bin/sh, sleep and tar", Err: fmt.Errorf("sleep exited %d", code)}
	}
	pc := &pooled{cid: cid, name: name, hj: hj, expires: expires, uid: uid, imageID: imageID}
	if len(p.cfg.Agent) > 0 {
		// Its life is the container's (remove closes it), not the fill's.
		pc.agent, err = h.attachStdio(ctx, context.Background(), cid, user, nil, p.cfg.Agent, io.Discard)
		if err != nil {
			return nil, fmt.Errorf("start agent: %w", err)
		}
	}
	return pc, nil
}

// take hands out a warm container for k, or nil (a miss). The container
// leaves the pool for good. A key the pool does not know is learned only
// once a container of it was made (learn).
func (p *pool) take(k poolKey) *pooled {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	now := p.h.now()
	ks := p.keys[k]
	if ks == nil {
		p.misses.Add(1)
		return nil
	}
	ks.lastWant = now
	if p.cfg.RefillDelay > 0 && !now.Before(ks.notUntil) {
		// Not extended by later claims: a steady stream of provisions
		// must not starve the refill.
		ks.notUntil = now.Add(p.cfg.RefillDelay)
	}
	defer p.wake() // refill
	defer p.notifyLocked()
	for len(ks.ready) > 0 {
		pc := ks.ready[0]
		ks.ready = ks.ready[1:]
		p.total--
		delete(p.owned, pc.name)
		if pc.expires.After(now) {
			if pc.imageID == "" {
				p.hits.Add(1)
			} // else a hit or a miss once stale has looked at its image
			return pc
		}
		p.reaps.Add(1)
		p.fillWG.Add(1)
		go func() { defer p.fillWG.Done(); p.removeUncounted(pc) }()
	}
	p.misses.Add(1)
	return nil
}

// learn makes k a key the pool fills, after a provision that missed made
// a container of it: a request whose image the engine cannot pull, or
// which lacks sleep, or whose limits the engine refuses, teaches nothing,
// where learning it at the miss had the pool try to fill it (a pull and
// an error logged each time) every fillBackoff for a TTL after.
func (p *pool) learn(k poolKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.keys[k] != nil || len(p.keys) >= p.cfg.MaxKeys {
		return
	}
	now := p.h.now()
	ks := &keyState{lastWant: now}
	if p.cfg.RefillDelay > 0 {
		// As after a claim: the new execution's first commands go first.
		ks.notUntil = now.Add(p.cfg.RefillDelay)
	}
	p.keys[k] = ks
	p.notifyLocked()
	p.wake()
}

// stale reports whether pc, just taken for ref, was made from an image
// ref no longer names (an unpinned tag moved since), and if so removes it
// and counts the claim a miss: the caller creates a container of the
// image ref names now, and the refill makes the next one of it.
func (p *pool) stale(ctx context.Context, pc *pooled, ref string) bool {
	if pc.imageID == "" {
		return false
	}
	ii, ok := p.h.api.(imageInspector)
	if !ok {
		p.hits.Add(1)
		return false
	}
	ins, err := ii.ImageInspect(ctx, ref)
	if err == nil && ins.ID == pc.imageID {
		p.hits.Add(1)
		return false
	}
	// Unreadable counts as moved: the cold create finds out what ref is.
	p.log.Info("warm container's image is no longer the one its tag names; creating one", "container", pc.cid, "image", ref, "was", pc.imageID, "now", ins.ID, "err", err)
	p.misses.Add(1)
	p.reaps.Add(1)
	p.mu.Lock()
	if !p.closed {
		// In the background as take's expired ones: close waits for it.
		p.fillWG.Add(1)
		go func() { defer p.fillWG.Done(); p.removeUncounted(pc) }()
		p.notifyLocked()
		p.mu.Unlock()
		return true
	}
	p.mu.Unlock()
	p.removeUncounted(pc)
	return true
}

// owns reports whether the pool holds or is filling a container with one
// of these names (as the engine lists them, with a leading "/").
func (p *pool) owns(names []string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range names {
		if p.owned[strings.TrimPrefix(n, "/")] {
			return true
		}
	}
	return false
}

func (p *pool) remove(pc *pooled) {
	p.reaps.Add(1)
	p.removeUncounted(pc)
}

func (p *pool) removeUncounted(pc *pooled) {
	pc.hj.Close()
	if err := p.h.destroy(pc.cid); err != nil {
		p.log.Error("remove pool container", "container", pc.cid, "err", err)
	}
	if pc.agent != nil {
		_ = pc.agent.Close()
	}
	p.h.uids.release(pc.uid)
}

// close stops the loop and the fills, then removes every unclaimed
// container: without the pool's attachment it could never be claimed.
func (p *pool) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.runWG.Wait()
	p.fillWG.Wait()
	p.mu.Lock()
	var left []*pooled
	for _, ks := range p.keys {
		left = append(left, ks.ready...)
		ks.ready = nil
	}
	p.owned = map[string]bool{}
	p.total = 0
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, pc := range left {
		wg.Add(1)
		go func() { defer wg.Done(); p.remove(pc) }()
	}
	wg.Wait()
}

func (p *pool) stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.statsLocked()
}

func (p *pool) statsLocked() PoolStats {
	s := PoolStats{Hits: p.hits.Load(), Misses: p.misses.Load(), Dead: p.dead.Load(), Fills: p.fills.Load(),
		FillErrors: p.fillErrors.Load(), Reaps: p.reaps.Load()}
	for _, ks := range p.keys {
		s.Ready += len(ks.ready)
		s.Filling += ks.filling
	}
	return s
}

// notifyLocked wakes waitFor callers; p.mu must be held.
func (p *pool) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *pool) notify() {
	p.mu.Lock()
	p.notifyLocked()
	p.mu.Unlock()
}

// waitFor waits until cond holds for the pool's stats, or ctx ends.
func (p *pool) waitFor(ctx context.Context, cond func(PoolStats) bool) (PoolStats, error) {
	for {
		p.mu.Lock()
		s, ch := p.statsLocked(), p.changed
		p.mu.Unlock()
		if cond(s) {
			return s, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return s, ctx.Err()
		}
	}
}

// PoolStats returns the warm pool's counters; all zero without a pool.
func (h *Docker) PoolStats() PoolStats {
	if h.pool == nil {
		return PoolStats{}
	}
	return h.pool.stats()
}

// claimed is what a claimed pooled container's name records. Labels
// cannot change after create, so the execution id, its deadline (unix
// seconds), the limits the pool key leaves out and the claim's time
// travel in the name, for Adopt after a restart.
type claimed struct {
	id             string
	expires        time.Time
	runtimeMs      int64 // 0 in a name from before the limits were recorded
	maxOutputBytes int64
	// claimedAt is when the execution was made (its CreatedAt, unix
	// seconds): a pooled container's main process starts its runtime at
	// the claim, which may come long after the container's creation, the
	// only time the engine keeps. Zero in a name from before it was
	// recorded.
	claimedAt time.Time
}

// claimedName is a claimed pooled container's new name:
// hostgate-ID--SECONDS.RUNTIMEMS.MAXOUTPUTBYTES.CLAIMSECONDS, without
// CLAIMSECONDS when c.claimedAt is unknown (zero). The tail after the last
// "--" holds no "--", so an id containing one still parses.
func claimedName(c claimed) string {
	name := "hostgate-" + c.id + "--" + strconv.FormatInt(c.expires.Unix(), 10) +
		"." + strconv.FormatInt(c.runtimeMs, 10) + "." + strconv.FormatInt(c.maxOutputBytes, 10)
	if c.claimedAt.Unix() > 0 {
		name += "." + strconv.FormatInt(c.claimedAt.Unix(), 10)
	}
	return name
}

// parseClaimedName undoes claimedName ("/" prefix allowed, as the engine
// lists names). A name of an older gateway parses too: of the form
// hostgate-ID--SECONDS with zero limits (its spec label has them), or
// without CLAIMSECONDS with a zero claimedAt (its container's creation is
// the nearest time there is).
func parseClaimedName(name string) (claimed, bool) {
	rest, ok := strings.CutPrefix(strings.TrimPrefix(name, "/"), "hostgate-")
	if !ok {
		return claimed{}, false
	}
	i := strings.LastIndex(rest, "--")
	if i < 0 || !executionIDRE.MatchString(rest[:i]) {
		return claimed{}, false
	}
	c := claimed{id: rest[:i]}
	fields := strings.Split(rest[i+2:], ".")
	if len(fields) != 1 && len(fields) != 3 && len(fields) != 4 {
		return claimed{}, false
	}
	var n [4]int64
	for j, f := range fields {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil || v <= 0 || f[0] == '+' {
			return claimed{}, false
		}
		n[j] = v
	}
	c.expires, c.runtimeMs, c.maxOutputBytes = time.Unix(n[0], 0), n[1], n[2]
	if n[3] > 0 {
		c.claimedAt = time.Unix(n[3], 0)
	}
	return c, true
}

// claim makes pc the container of execution id: the runtime goes to its
// main process (its deadline starts now), name (claimedName, or it
// loading) records the execution. It returns the container's inspection,
// from which provision reads its environment (readContainerEnv).
// On error the caller removes the container and creates a fresh one.
func (h *Docker) claim(ctx context.Context, pc *pooled, c claimed, name string) (container.InspectResponse, error) {
	_, err := fmt.Fprintf(pc.hj.Conn, "%d\n", sleepSeconds(c.runtimeMs))
	if err == nil {
		err = pc.hj.CloseWrite()
	}
	pc.hj.Close()
	if err != nil {
		return container.InspectResponse{}, fmt.Errorf("write runtime: %w", err)
	}
	if err := h.api.ContainerRename(ctx, pc.cid, name); err != nil {
		return container.InspectResponse{}, fmt.Errorf("rename: %w", err)
	}
	ins, err := h.api.ContainerInspect(ctx, pc.cid)
	if err != nil {
		return ins, fmt.Errorf("inspect: %w", err)
	}
	if ins.State == nil || !ins.State.Running {
		return ins, fmt.Errorf("container not running")
	}
	return ins, nil
}
