package dockerhost

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// CheckpointInfo is a stored checkpoint as listed: what its checkpoint
// answered, and what its manifest records of where it came from and what
// a restore of it gets.
type CheckpointInfo struct {
	Checkpoint
	Reason    string    `json:"reason,omitempty"`
	Image     string    `json:"image"`
	Resources Resources `json:"resources"`
}

func infoOf(m *Manifest) CheckpointInfo {
	return CheckpointInfo{
		Checkpoint: Checkpoint{CheckpointID: m.CheckpointID, ExecutionID: m.ExecutionID, CreatedAt: m.CreatedAt, SizeBytes: m.SizeBytes, SHA256: m.SHA256},
		Reason:     m.Reason,
		Image:      m.Request.Image,
		Resources:  m.Request.Resources,
	}
}

// CheckpointList is a page of ListCheckpoints: the newest first.
type CheckpointList struct {
	Checkpoints []CheckpointInfo `json:"checkpoints"`
	// Truncated says that older checkpoints matched but were left out
	// by the limit.
	Truncated bool `json:"truncated"`
}

// Bounds of ListCheckpoints' limit.
const (
	DefaultCheckpointListLimit = 1000
	MaxCheckpointListLimit     = 10000
)

// Retention is which checkpoints the store keeps: those younger than
// MaxAge, and the newest whose sizes sum to at most MaxBytes (the newest
// checkpoint is kept even when it alone is larger). Zero keeps everything
// by that measure.
type Retention struct {
	MaxAge   time.Duration
	MaxBytes int64
}

func (r Retention) on() bool { return r.MaxAge > 0 || r.MaxBytes > 0 }

// readers counts the restores reading each checkpoint, which retention
// leaves alone: one may have registered and not yet opened its
// checkpoint. A delete does not wait for them (CheckpointStore.Delete
// leaves what a restore opened readable), so it is durable at once: a
// gateway killed during the restore does not bring the checkpoint back.
type readers struct {
	mu sync.Mutex // held across retention's Delete, so no restore starts between the check and it
	n  map[string]int
}

// startReading registers a restore of id.
func (h *Docker) startReading(id string) {
	h.rd.mu.Lock()
	defer h.rd.mu.Unlock()
	h.rd.n[id]++
}

// doneReading ends a restore's read of id.
func (h *Docker) doneReading(id string) {
	h.rd.mu.Lock()
	defer h.rd.mu.Unlock()
	if h.rd.n[id]--; h.rd.n[id] <= 0 {
		delete(h.rd.n, id)
	}
}

func checkpointNotFound(id string) error {
	return &Error{Code: CodeNotFound, Message: fmt.Sprintf("no checkpoint %q", id)}
}

// openCheckpoint opens id in the store, answering what it cannot as an
// *Error: not_found, a file not regular (storage_unavailable, the path in
// the log only) or damage (invalid_request naming the checkpoint).
func (h *Docker) openCheckpoint(ctx context.Context, id string) (*Manifest, io.ReadCloser, error) {
	m, rc, err := h.store.Open(ctx, id)
	var nr *notRegularError
	switch {
	case errors.Is(err, ErrCheckpointNotFound):
		return nil, nil, &Error{Code: CodeNotFound, Field: "checkpointId", Message: fmt.Sprintf("no checkpoint %q", id)}
	case errors.As(err, &nr):
		// Planted by someone who can write the store's directory, or
		// an operator's mistake: the operator's to see and remove. The
		// path is for the log, not the caller.
		h.logger.Warn("checkpoint file is not a regular file; not followed or read", "checkpoint", id, "path", nr.Path, "is", nr.What)
		return nil, nil, &Error{Code: CodeStorageUnavailable, Field: "checkpointId", Err: err, Message: fmt.Sprintf(
			"a file of checkpoint %q in the gateway's checkpoint storage is %s, not a regular file, and is not followed; "+
				"the gateway's log names it for an operator to remove", id, nr.What)}
	case err != nil:
		// Damage in the store (a manifest of another version, a missing
		// archive) is the operator's to see: it was in no log.
		h.logger.Warn("checkpoint unreadable", "checkpoint", id, "err", err)
		return nil, nil, &Error{Code: CodeInvalidRequest, Field: "checkpointId", Message: fmt.Sprintf("the checkpoint is unreadable (%v); the gateway's log has it too", err), Err: err}
	}
	return m, rc, nil
}

// GetCheckpoint returns one stored checkpoint; an unknown or malformed id
// is not_found.
func (h *Docker) GetCheckpoint(ctx context.Context, id string) (*CheckpointInfo, error) {
	if !checkpointIDRE.MatchString(id) {
		return nil, checkpointNotFound(id)
	}
	m, rc, err := h.openCheckpoint(ctx, id)
	if err != nil {
		var de *Error
		if errors.As(err, &de) && de.Code == CodeNotFound {
			return nil, checkpointNotFound(id)
		}
		return nil, err
	}
	_ = rc.Close()
	info := infoOf(m)
	return &info, nil
}

// ListCheckpoints returns the newest limit stored checkpoints (of
// executionID only, when it is not empty), newest first. limit 0 is
// DefaultCheckpointListLimit; it is at most MaxCheckpointListLimit. The
// store is read once, keeping only the newest limit in memory.
func (h *Docker) ListCheckpoints(ctx context.Context, executionID string, limit int) (*CheckpointList, error) {
	switch {
	case limit == 0:
		limit = DefaultCheckpointListLimit
	case limit < 0 || limit > MaxCheckpointListLimit:
		return nil, invalid("limit", "want 1-%d", MaxCheckpointListLimit)
	}
	var keep newestHeap // the oldest kept on top
	truncated := false
	err := h.store.List(ctx, func(m *Manifest) bool {
		if executionID != "" && m.ExecutionID != executionID {
			return true
		}
		info := infoOf(m)
		if keep.Len() < limit {
			heap.Push(&keep, info)
			return true
		}
		truncated = true
		if newer(info, keep[0]) {
			keep[0] = info
			heap.Fix(&keep, 0)
		}
		return true
	})
	if err != nil {
		return nil, storageError(fmt.Errorf("dockerhost: list checkpoints: %w", err))
	}
	out := []CheckpointInfo(keep)
	slices.SortFunc(out, func(a, b CheckpointInfo) int {
		if newer(a, b) {
			return -1
		}
		return 1
	})
	if out == nil {
		out = []CheckpointInfo{}
	}
	return &CheckpointList{Checkpoints: out, Truncated: truncated}, nil
}

// newer orders checkpoints by creation, then id (so that the order is
// total).
func newer(a, b CheckpointInfo) bool {
	if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
		return c > 0
	}
	return a.CheckpointID > b.CheckpointID
}

// newestHeap is a min-heap by newer: its top is the oldest it holds.
type newestHeap []CheckpointInfo

func (q newestHeap) Len() int           { return len(q) }
func (q newestHeap) Less(i, j int) bool { return newer(q[j], q[i]) }
func (q newestHeap) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *newestHeap) Push(x any)        { *q = append(*q, x.(CheckpointInfo)) }
func (q *newestHeap) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// DeleteCheckpoint removes a stored checkpoint. An unknown or malformed
// id is not_found. It is gone for every caller, and for good, when this
// returns; a restore that already opened it still gets all of it, and the
// disk space comes back when that restore ends.
func (h *Docker) DeleteCheckpoint(ctx context.Context, id string) error {
	if !checkpointIDRE.MatchString(id) {
		return checkpointNotFound(id)
	}
	// What the counts hold of it, read before it goes: one manifest and
	// one stat, where a recount reads every manifest. A damaged
	// manifest was never counted (List skips it).
	since := h.cpStats.countSince()
	mr, canTell := h.store.(interface {
		readManifest(string) (*Manifest, error)
	})
	var counted *Manifest
	var size int64
	if canTell {
		if m, err := mr.readManifest(id); err == nil {
			counted, size = m, h.storedBytes(m)
		}
	}
	err := h.store.Delete(ctx, id)
	if errors.Is(err, ErrCheckpointNotFound) {
		return checkpointNotFound(id)
	}
	if err != nil {
		return storageError(fmt.Errorf("dockerhost: delete checkpoint: %w", err))
	}
	h.logger.Info("checkpoint deleted", "checkpoint", id)
	switch {
	case counted != nil:
		h.countChange(id, size, false, since)
	case !canTell:
		h.recountSoon() // a store that cannot say what it held
	}
	return nil
}

// retentionTimeout bounds one enforcement of the retention.
const retentionTimeout = 5 * time.Minute

// sweeper keeps the checkpoint store in the background, one sweep at a
// time: the leftovers of a killed run once they are old enough, then the
// retention. A checkpoint's answer used to wait for the retention's read
// of every manifest (1.2 s rather than 0.36 s with 5,000 checkpoints
// stored, BenchmarkCheckpointWithRetention); now it only kicks a sweep.
type sweeper struct {
	// kick has room for one: kicks while a sweep runs make at most one
	// more sweep, whatever their number.
	kick   chan struct{}
	cancel context.CancelFunc // stops the sweeps (Close)
	done   chan struct{}      // closed when the sweeper has stopped

	kicks atomic.Uint64 // kicks so far
	// recount asks the next sweep to count the store again with no
	// retention set (at start); with retention every sweep counts it.
	recount atomic.Bool
	mu      sync.Mutex
	swept   uint64        // kicks the finished sweeps took in
	moved   chan struct{} // closed, and replaced, when swept moves
}

// startSweeper starts the sweeps with one at once (the host's start).
func (h *Docker) startSweeper() {
	ctx, cancel := context.WithCancel(context.Background())
	h.sweep.kick = make(chan struct{}, 1)
	h.sweep.cancel = cancel
	h.sweep.done = make(chan struct{})
	h.sweep.moved = make(chan struct{})
	h.sweep.recount.Store(true)
	go h.sweepLoop(ctx)
	h.kickSweep()
}

// recountSoon has the store counted again by a sweep in the background.
func (h *Docker) recountSoon() {
	h.sweep.recount.Store(true)
	h.kickSweep()
}

// stopSweeper stops the sweeps and waits for the sweeper's end.
func (h *Docker) stopSweeper() {
	if h.sweep.cancel == nil {
		return
	}
	h.sweep.cancel()
	<-h.sweep.done
}

// kickSweep asks for a sweep; it never waits.
func (h *Docker) kickSweep() {
	if h.sweep.kick == nil {
		return
	}
	h.sweep.kicks.Add(1)
	select {
	case h.sweep.kick <- struct{}{}:
	default: // one is already due: it takes this kick in
	}
}

func (h *Docker) sweepLoop(ctx context.Context) {
	defer close(h.sweep.done)
	leftovers, _ := h.store.(interface{ sweepLeftovers(time.Time) time.Time })
	// later wakes the sweeper when a leftover it kept is old enough, or
	// a checkpoint retention kept passes its max age.
	later := time.NewTimer(time.Hour)
	later.Stop()
	defer later.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.sweep.kick:
		case <-later.C:
		}
		// Kicks from here on wait for the next sweep, so this one
		// covers every kick counted so far.
		gen := h.sweep.kicks.Load()
		var next time.Time
		if leftovers != nil {
			next = leftovers.sweepLeftovers(time.Now())
		}
		// Without retention the store is read only when a count is due:
		// the counts follow each checkpoint and delete otherwise.
		if h.retention.on() || h.sweep.recount.Swap(false) {
			if n := h.enforceRetention(ctx); !n.IsZero() {
				// The retention's clock is h.now, which tests set; the
				// timer runs on the real one, so it waits the same span.
				if n = time.Now().Add(n.Sub(h.now())); next.IsZero() || n.Before(next) {
					next = n
				}
			}
		}
		if next.IsZero() {
			later.Stop()
		} else {
			later.Reset(time.Until(next))
		}
		h.sweep.mu.Lock()
		h.sweep.swept = gen
		close(h.sweep.moved)
		h.sweep.moved = make(chan struct{})
		h.sweep.mu.Unlock()
	}
}

// CheckpointStats are the checkpoint store's figures for metrics: what it
// holds, and what retention removed since the host started.
type CheckpointStats struct {
	// Stored is the checkpoints listed, StoredBytes their tars' bytes on
	// disk. A damaged manifest is in neither (List skips it). They are
	// counted from the store at start and at each sweep that reads it
	// anyway (retention's), and follow each checkpoint and delete of this
	// host in between; what others write to the store shows at the next
	// count.
	Stored, StoredBytes int64
	// RemovedMaxAge and RemovedMaxBytes count retention's removals by
	// rule; FreedBytes is the bytes they freed.
	RemovedMaxAge, RemovedMaxBytes, FreedBytes int64
}

// checkpointStats are CheckpointStats' counters.
type checkpointStats struct {
	stored, storedBytes, removedAge, removedBytes, freed atomic.Int64

	// mu orders changes to stored and storedBytes against a recount:
	// the changes made while one lists the store wait in journal, and
	// its end applies those its list did not already see.
	mu         sync.Mutex
	recounting bool
	journal    []countChange
	gen        uint64 // recounts begun
}

// countChange is a checkpoint committed (added) or deleted, and its
// bytes as the counts take them.
type countChange struct {
	id    string
	size  int64
	added bool
}

// countSince is taken before a store change that countChange then
// counts: it tells a change a whole recount ran beside.
func (c *checkpointStats) countSince() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// countChange counts a checkpoint this host committed or deleted; since
// is countSince from before the store changed. A recount that began and
// ended within the change may or may not have seen it: then the store is
// counted again (rare: a recount shorter than a commit's renames).
func (h *Docker) countChange(id string, size int64, added bool, since uint64) {
	c := &h.cpStats
	c.mu.Lock()
	if c.recounting {
		c.journal = append(c.journal, countChange{id, size, added})
		c.mu.Unlock()
		return
	}
	if c.gen != since {
		c.mu.Unlock()
		h.recountSoon()
		return
	}
	n := int64(1)
	if !added {
		n, size = -1, -size
	}
	c.stored.Add(n)
	c.storedBytes.Add(size)
	c.mu.Unlock()
}

// beginRecount starts a recount: changes from here on are journaled.
func (c *checkpointStats) beginRecount() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recounting, c.journal = true, nil
	c.gen++
}

// endRecount sets the counts to what a list saw (id → bytes), then
// replays the journal against it: a checkpoint committed that the list
// saw is not counted twice, and one deleted that it never saw is not
// taken off. With ok false (the list failed), the journal is applied to
// the counts as they were.
func (c *checkpointStats) endRecount(seen map[string]int64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j := c.journal
	c.recounting, c.journal = false, nil
	if !ok {
		for _, ch := range j {
			if ch.added {
				c.stored.Add(1)
				c.storedBytes.Add(ch.size)
			} else {
				c.stored.Add(-1)
				c.storedBytes.Add(-ch.size)
			}
		}
		return
	}
	var total int64
	for _, n := range seen {
		total += n
	}
	stored := int64(len(seen))
	for _, ch := range j {
		n, in := seen[ch.id]
		switch {
		case ch.added && !in:
			seen[ch.id] = ch.size
			stored, total = stored+1, total+ch.size
		case !ch.added && in:
			delete(seen, ch.id)
			stored, total = stored-1, total-n
		}
	}
	c.stored.Store(stored)
	c.storedBytes.Store(total)
}

// storedBytes is what the counts take m's checkpoint to hold: its tar's
// size on disk where the store can tell, else its manifest's.
func (h *Docker) storedBytes(m *Manifest) int64 {
	if sizer, ok := h.store.(interface{ storedSize(string) (int64, bool) }); ok {
		if n, ok := sizer.storedSize(m.CheckpointID); ok {
			return n
		}
	}
	return m.SizeBytes
}

// CheckpointStats returns the checkpoint store's figures.
func (h *Docker) CheckpointStats() CheckpointStats {
	c := &h.cpStats
	return CheckpointStats{Stored: c.stored.Load(), StoredBytes: c.storedBytes.Load(),
		RemovedMaxAge: c.removedAge.Load(), RemovedMaxBytes: c.removedBytes.Load(), FreedBytes: c.freed.Load()}
}

// EnforceRetention removes the checkpoints Config.Retention does not keep,
// oldest first, and logs each (id, age, bytes freed). A checkpoint a
// restore is reading is kept, whatever its age. It counts what the store
// keeps for CheckpointStats, with no retention set too. The host's
// sweeper runs it in the background at start, after each checkpoint when
// retention is set, and when a kept checkpoint passes MaxAge; runs never
// overlap. It stops early when ctx ends.
func (h *Docker) EnforceRetention(ctx context.Context) { h.enforceRetention(ctx) }

// retentionRetry is how soon retention tries again a checkpoint it had to
// keep past its rule (a restore read it, its removal failed), or a list
// that failed, when nothing else kicks a sweep.
const retentionRetry = time.Minute

// enforceRetention is EnforceRetention, returning when the clock alone
// gives the next run work: the oldest checkpoint it kept passes MaxAge,
// or retentionRetry from now after one it had to keep; zero for never.
// Without it, a gateway that takes no new checkpoint would keep old ones
// past --checkpoint-max-age until its next start.
func (h *Docker) enforceRetention(ctx context.Context) (next time.Time) {
	h.retainMu.Lock()
	defer h.retainMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, retentionTimeout)
	defer cancel()
	type entry struct {
		id      string
		created time.Time
		size    int64
	}
	// What is on disk counts, not what manifests claim: a manifest
	// whose tar is missing would otherwise make older checkpoints go for
	// bytes nobody holds. A damaged manifest is skipped by List: its tar
	// is neither counted nor removed (it is the operator's to look at),
	// so it never makes others go.
	var all []entry
	var total int64
	h.cpStats.beginRecount()
	if err := h.store.List(ctx, func(m *Manifest) bool {
		size := h.storedBytes(m)
		all = append(all, entry{m.CheckpointID, m.CreatedAt, size})
		total += size
		return true
	}); err != nil {
		h.cpStats.endRecount(nil, false)
		if ctx.Err() == nil || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			h.logger.Warn("checkpoint retention: cannot list the checkpoints", "err", err)
		}
		if h.retention.on() {
			return h.now().Add(retentionRetry)
		}
		h.sweep.recount.Store(true) // the next sweep counts again
		return time.Time{}
	}
	// What the list saw, for CheckpointStats: its removals below are
	// journaled (countChange) like any delete, and applied at the end.
	seen := make(map[string]int64, len(all))
	for _, e := range all {
		seen[e.id] = e.size
	}
	defer func() { h.cpStats.endRecount(seen, true) }()
	slices.SortFunc(all, func(a, b entry) int {
		return cmp.Or(a.created.Compare(b.created), cmp.Compare(a.id, b.id))
	})
	now := h.now()
	var removed int
	var freed int64
	keptFrom := len(all) // the first checkpoint no rule reached
	retry := false
	for i, e := range all {
		if ctx.Err() != nil {
			keptFrom = len(all)
			break // Close: the next start goes on
		}
		age := now.Sub(e.created)
		var rule string
		switch {
		case h.retention.MaxAge > 0 && age > h.retention.MaxAge:
			rule = "max-age"
		case h.retention.MaxBytes > 0 && total > h.retention.MaxBytes && i < len(all)-1:
			rule = "max-bytes"
		}
		if rule == "" {
			keptFrom = i
			break // the rest are younger, and within the bytes
		}
		since := h.cpStats.countSince()
		ok, err := h.deleteUnlessRead(ctx, e.id)
		switch {
		case errors.Is(err, ErrCheckpointNotFound):
			total -= e.size // deleted meanwhile, and counted by that delete
			continue
		case err != nil:
			// Not counted against the others either: a checkpoint that
			// cannot be removed (a tar that is a directory, a permission)
			// must not make every older-than-newest one go in its stead.
			// The next run tries it again.
			total -= e.size
			retry = true
			h.logger.Warn("checkpoint retention: could not remove it; its bytes are left out of the total", "checkpoint", e.id, "err", err)
			continue
		case !ok:
			retry = true
			h.logger.Info("checkpoint retention: kept while a restore reads it", "checkpoint", e.id, "age", age.Round(time.Second), "rule", rule)
			continue
		}
		total -= e.size
		h.countChange(e.id, e.size, false, since)
		removed++
		freed += e.size
		if rule == "max-age" {
			h.cpStats.removedAge.Add(1)
		} else {
			h.cpStats.removedBytes.Add(1)
		}
		h.cpStats.freed.Add(e.size)
		h.logger.Info("checkpoint removed by retention", "checkpoint", e.id, "rule", rule, "age", age.Round(time.Second), "bytesFreed", e.size)
	}
	if removed > 0 {
		h.logger.Info("checkpoint retention", "removed", removed, "bytesFreed", freed, "kept", len(all)-removed, "keptBytes", total,
			"maxAge", h.retention.MaxAge, "maxBytes", h.retention.MaxBytes)
	}
	if h.retention.MaxAge > 0 && keptFrom < len(all) {
		// A moment past the age, so that the run finds it over.
		next = all[keptFrom].created.Add(h.retention.MaxAge + time.Second)
	}
	if retry && (next.IsZero() || now.Add(retentionRetry).Before(next)) {
		next = now.Add(retentionRetry)
	}
	return next
}

// deleteUnlessRead deletes id from the store unless a restore reads it
// (false).
func (h *Docker) deleteUnlessRead(ctx context.Context, id string) (bool, error) {
	h.rd.mu.Lock()
	defer h.rd.mu.Unlock()
	if h.rd.n[id] > 0 {
		return false, nil
	}
	return true, h.store.Delete(ctx, id)
}
