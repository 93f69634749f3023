package dockerhost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// listGate is a LocalStore whose List says so on listing, then waits for
// release (or its context).
type listGate struct {
	*LocalStore
	lists   atomic.Int32
	listing chan struct{}
	release chan struct{}
}

func newListGate(t testing.TB) *listGate {
	ls, err := NewLocalStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &listGate{LocalStore: ls, listing: make(chan struct{}, 100), release: make(chan struct{})}
}

func (g *listGate) List(ctx context.Context, fn func(*Manifest) bool) error {
	g.lists.Add(1)
	g.listing <- struct{}{}
	select {
	case <-g.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.LocalStore.List(ctx, fn)
}

func waitListing(t *testing.T, g *listGate) {
	t.Helper()
	select {
	case <-g.listing:
	case <-testCtx(t, time.Minute).Done():
		t.Fatal("the sweep never listed the checkpoints")
	}
}

// Kicks while a sweep runs make one more sweep, however many they are.
func TestSweepCoalescesKicks(t *testing.T) {
	g := newListGate(t)
	h, err := NewDocker(testCtx(t, time.Minute), nil, &fakeDocker{}, &Config{Owner: "gw", Store: g, Retention: Retention{MaxAge: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	waitListing(t, g) // the start's sweep, held in List
	for range 50 {
		h.kickSweep() // as 50 checkpoints would
	}
	close(g.release)
	waitSwept(t, h)
	if n := g.lists.Load(); n != 2 {
		t.Fatalf("the store was listed %d times, want 2: the start's sweep and one for the 50 kicks", n)
	}
}

// Close stops a sweep under way (goleak, in TestMain, checks that the
// sweeper is gone) and returns without waiting for it to end.
func TestCloseStopsSweep(t *testing.T) {
	g := newListGate(t)
	h, err := NewDocker(testCtx(t, time.Minute), nil, &fakeDocker{}, &Config{Owner: "gw", Store: g, Retention: Retention{MaxBytes: 1}})
	if err != nil {
		t.Fatal(err)
	}
	waitListing(t, g) // never released
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	h.kickSweep() // a checkpoint ending after Close: nothing runs, nothing blocks
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
}

// A checkpoint tar without its manifest (a gateway killed between a
// commit's renames) too young to go at the start goes at a later sweep
// once old enough, and the sweeper says when that is; a checkpoint being
// written stays however idle.
func TestSweepRemovesLeftovers(t *testing.T) {
	dir := t.TempDir()
	orphan := writeCheckpoint(t, dir, time.Now(), 10, "exec-1").CheckpointID
	if err := os.Remove(filepath.Join(dir, orphan+".json")); err != nil {
		t.Fatal(err)
	}
	tar := filepath.Join(dir, orphan+".tar")
	young := time.Now().Add(-partialMaxIdle / 2)
	if err := os.Chtimes(tar, young, young); err != nil {
		t.Fatal(err)
	}
	h, err := NewDocker(testCtx(t, time.Minute), slog.New(slog.DiscardHandler), &fakeDocker{}, &Config{Owner: "gw", CheckpointDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	waitSwept(t, h)
	fi, err := os.Stat(tar)
	if err != nil {
		t.Fatalf("a manifest-less tar younger than %v at start: %v, want it kept for now", partialMaxIdle, err)
	}
	// The mtime as the filesystem keeps it: not every one keeps
	// nanoseconds.
	ls := h.store.(*LocalStore)
	if next, want := ls.sweepLeftovers(time.Now()), fi.ModTime().Add(partialMaxIdle); !next.Equal(want) {
		t.Fatalf("next sweep due %v, want %v, when the tar is old enough", next, want)
	}

	// A checkpoint being written, idle as long.
	ctx := testCtx(t, time.Minute)
	writing := newCheckpointID()
	w, err := h.store.Create(ctx, writing)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	partials, _ := filepath.Glob(filepath.Join(dir, writing+".tar.*.partial"))
	if len(partials) != 1 {
		t.Fatalf("the checkpoint being written: %v", partials)
	}
	old := time.Now().Add(-2 * partialMaxIdle)
	for _, n := range append(partials, tar) {
		if err := os.Chtimes(n, old, old); err != nil {
			t.Fatal(err)
		}
	}
	h.kickSweep() // as a checkpoint under retention does
	waitSwept(t, h)
	if _, err := os.Stat(tar); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the manifest-less tar once old enough: %v, want it removed by the sweep", err)
	}
	if _, err := os.Stat(partials[0]); err != nil {
		t.Errorf("the partial tar of a checkpoint being written: %v, want it kept", err)
	}
	if _, err := io.WriteString(w, "more"); err != nil {
		t.Fatal(err)
	}
}

// A checkpoint's answer does not wait for the retention's read of the
// checkpoints: here that read never ends until the answer has come.
func testCheckpointAnswersBeforeRetention(t *testing.T) {
	cli, img := engine(t)
	g := newListGate(t)
	h := newTestHost(t, cli, &Config{Store: g, Retention: Retention{MaxAge: time.Hour}})
	defer close(g.release)
	waitListing(t, g) // the start's sweep, held
	ex := provision(t, h, emptyReq(img, small()))
	sh(t, h, ex.ExecutionID, `echo hello > /workspace/f`)
	done := make(chan error, 1)
	go func() {
		_, err := h.Checkpoint(testCtx(t, 2*time.Minute), ex.ExecutionID, CheckpointRequest{})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the checkpoint's answer waits for the retention's list of the checkpoints")
	}
}

// CheckpointStats: what the store holds after each sweep (a damaged
// manifest in neither figure), and retention's removals by rule.
func TestCheckpointStats(t *testing.T) {
	now := time.Now()
	dir := t.TempDir()
	for _, age := range []time.Duration{5 * time.Hour, 4 * time.Hour, time.Hour} {
		writeCheckpoint(t, dir, now.Add(-age), 100, "exec-1")
	}
	newest := writeCheckpoint(t, dir, now, 150, "exec-1")
	if err := os.WriteFile(filepath.Join(dir, newCheckpointID()+".json"), []byte(`{"version": 1`), 0o600); err != nil {
		t.Fatal(err)
	}
	h := hostWithRetention(t, dir, now, Retention{MaxAge: 3 * time.Hour, MaxBytes: 200}, io.Discard)
	want := CheckpointStats{Stored: 1, StoredBytes: 150, RemovedMaxAge: 2, RemovedMaxBytes: 1, FreedBytes: 300}
	if s := h.CheckpointStats(); s != want {
		t.Fatalf("after the start's sweep: %+v, want %+v", s, want)
	}
	if err := h.DeleteCheckpoint(testCtx(t, time.Minute), newest.CheckpointID); err != nil {
		t.Fatal(err)
	}
	waitSwept(t, h)
	want.Stored, want.StoredBytes = 0, 0
	if s := h.CheckpointStats(); s != want {
		t.Fatalf("after a delete: %+v, want %+v", s, want)
	}

	// Without retention, the store is counted all the same at start.
	writeCheckpoint(t, dir, now, 10, "exec-1")
	off := hostWithRetention(t, dir, now, Retention{}, io.Discard)
	if s := off.CheckpointStats(); s != (CheckpointStats{Stored: 1, StoredBytes: 10}) {
		t.Fatalf("retention off, one checkpoint: %+v", s)
	}
}

// listCounter is a LocalStore that counts its full reads (List: every
// manifest).
type listCounter struct {
	*LocalStore
	lists atomic.Int32
}

func newListCounter(t testing.TB) *listCounter {
	ls, err := NewLocalStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &listCounter{LocalStore: ls}
}

func (c *listCounter) List(ctx context.Context, fn func(*Manifest) bool) error {
	c.lists.Add(1)
	return c.LocalStore.List(ctx, fn)
}

// TestCheckpointCountsFollowDeletes: with no retention the store is read
// in full once, at start; then each delete takes its checkpoint off
// hostgate_checkpoints and hostgate_checkpoint_bytes at once, exactly (a
// damaged checkpoint, never counted, takes nothing off; an unknown id
// neither), without another read of every manifest. A recount then
// finds the same.
func TestCheckpointCountsFollowDeletes(t *testing.T) {
	store := newListCounter(t)
	var cps []*Manifest
	var total int64
	for i := range 6 {
		cps = append(cps, writeCheckpoint(t, store.Dir, time.Now(), 100*(i+1), "exec-1"))
		total += int64(100 * (i + 1))
	}
	damaged := newCheckpointID()
	if err := os.WriteFile(filepath.Join(store.Dir, damaged+".json"), []byte(`{"version": 1`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(store.Dir, damaged+".tar"), make([]byte, 7), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, time.Minute)
	h, err := NewDocker(ctx, nil, &fakeDocker{}, &Config{Owner: "gw", Store: store})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	waitSwept(t, h)
	want := CheckpointStats{Stored: 6, StoredBytes: total}
	if s := h.CheckpointStats(); s != want {
		t.Fatalf("at start: %+v, want %+v", s, want)
	}
	for _, m := range cps[:4] {
		if err := h.DeleteCheckpoint(ctx, m.CheckpointID); err != nil {
			t.Fatal(err)
		}
		want.Stored, want.StoredBytes = want.Stored-1, want.StoredBytes-m.SizeBytes
		if s := h.CheckpointStats(); s != want {
			t.Fatalf("after deleting %s (%d bytes): %+v, want %+v", m.CheckpointID, m.SizeBytes, s, want)
		}
	}
	if err := h.DeleteCheckpoint(ctx, damaged); err != nil {
		t.Fatalf("delete of the damaged checkpoint: %v", err)
	}
	if err := h.DeleteCheckpoint(ctx, cps[0].CheckpointID); ErrorCode(err) != CodeNotFound {
		t.Fatalf("second delete: %v, want not_found", err)
	}
	if s := h.CheckpointStats(); s != want {
		t.Fatalf("after deleting a damaged and an unknown checkpoint: %+v, want %+v", s, want)
	}
	waitSwept(t, h)
	if n := store.lists.Load(); n != 1 {
		t.Fatalf("every manifest was read %d times, want once (at start): a delete made a full read", n)
	}
	h.EnforceRetention(ctx) // a recount, as a retention sweep makes
	if s := h.CheckpointStats(); s != want {
		t.Fatalf("after a recount: %+v, want %+v", s, want)
	}
}

// listedGate is a LocalStore whose List, once it has read every manifest,
// says so and waits for release before it returns.
type listedGate struct {
	*LocalStore
	listed, release chan struct{}
}

func (g *listedGate) List(ctx context.Context, fn func(*Manifest) bool) error {
	err := g.LocalStore.List(ctx, fn)
	g.listed <- struct{}{}
	<-g.release
	return err
}

// TestCheckpointCountsDuringRecount: changes counted while a recount
// lists the store are neither lost nor counted twice: a delete of one
// the list saw comes off, a commit it did not see goes on, and one it saw
// whose count arrives during the recount is counted once.
func TestCheckpointCountsDuringRecount(t *testing.T) {
	ls, err := NewLocalStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	g := &listedGate{LocalStore: ls, listed: make(chan struct{}, 10), release: make(chan struct{})}
	a := writeCheckpoint(t, ls.Dir, time.Now(), 100, "exec-1")
	b := writeCheckpoint(t, ls.Dir, time.Now(), 200, "exec-1")
	// d is committed before the list, its count comes after it (a
	// commit's count races a recount that saw it).
	dSince := uint64(0)
	d := writeCheckpoint(t, ls.Dir, time.Now(), 400, "exec-1")
	ctx := testCtx(t, time.Minute)
	h, err := NewDocker(ctx, nil, &fakeDocker{}, &Config{Owner: "gw", Store: g})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	select {
	case <-g.listed: // the start's recount has read a, b and d, and waits
	case <-ctx.Done():
		t.Fatal("the start's sweep never listed the store")
	}
	if err := h.DeleteCheckpoint(ctx, a.CheckpointID); err != nil {
		t.Fatal(err)
	}
	// c: committed after the list, as Checkpoint commits and counts.
	c := validManifest(bytes.Repeat([]byte{'y'}, 800))
	since := h.cpStats.countSince()
	w, err := ls.Create(ctx, c.CheckpointID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(bytes.Repeat([]byte{'y'}, 800)); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(c); err != nil {
		t.Fatal(err)
	}
	h.countChange(c.CheckpointID, h.storedBytes(c), true, since)
	h.countChange(d.CheckpointID, h.storedBytes(d), true, dSince)
	close(g.release)
	waitSwept(t, h)
	want := CheckpointStats{Stored: 3, StoredBytes: b.SizeBytes + c.SizeBytes + d.SizeBytes}
	if s := h.CheckpointStats(); s != want {
		t.Fatalf("after the recount: %+v, want %+v (b, c, d)", s, want)
	}
}

// A checkpoint that passes --checkpoint-max-age goes then, without a new
// checkpoint or a restart to kick a sweep: the sweeper wakes for it.
func TestRetentionMaxAgeNeedsNoKick(t *testing.T) {
	dir := t.TempDir()
	const maxAge = time.Hour
	// Passes the age about a second after the start's sweep.
	m := writeCheckpoint(t, dir, time.Now().Add(-maxAge+time.Second), 100, "exec-1")
	young := writeCheckpoint(t, dir, time.Now(), 100, "exec-2")
	h, err := NewDocker(testCtx(t, time.Minute), nil, &fakeDocker{}, &Config{Owner: "gw", CheckpointDir: dir, Retention: Retention{MaxAge: maxAge}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	waitSwept(t, h)
	ctx := testCtx(t, 30*time.Second)
	for slices.Contains(ids(t, dir), m.CheckpointID) {
		select {
		case <-ctx.Done():
			t.Fatalf("a checkpoint past its max age is still stored: %v", ids(t, dir))
		case <-time.After(50 * time.Millisecond):
		}
	}
	if got := ids(t, dir); !slices.Equal(got, []string{young.CheckpointID}) {
		t.Fatalf("stored %v, want only the young checkpoint %s", got, young.CheckpointID)
	}
}

// With no retention, each checkpoint taken adds itself to
// hostgate_checkpoints and hostgate_checkpoint_bytes when it answers, and
// each delete takes itself off, exactly, with no read of every manifest
// after the start's.
func testCheckpointCountsFollow(t *testing.T) {
	cli, img := engine(t)
	store := newListCounter(t)
	old := writeCheckpoint(t, store.Dir, time.Now(), 300, "before")
	h := newTestHost(t, cli, &Config{Store: store})
	waitSwept(t, h)
	ex := provision(t, h, emptyReq(img, small()))
	want := CheckpointStats{Stored: 1, StoredBytes: old.SizeBytes}
	var cps []*Checkpoint
	for i := range 3 {
		sh(t, h, ex.ExecutionID, fmt.Sprintf("head -c %d /dev/zero > /workspace/f%d", 10000*(i+1), i))
		cp, err := h.Checkpoint(testCtx(t, time.Minute), ex.ExecutionID, CheckpointRequest{})
		if err != nil {
			t.Fatal(err)
		}
		cps = append(cps, cp)
		want.Stored, want.StoredBytes = want.Stored+1, want.StoredBytes+cp.SizeBytes
		if s := h.CheckpointStats(); s != want {
			t.Fatalf("after checkpoint %d (%d bytes): %+v, want %+v", i+1, cp.SizeBytes, s, want)
		}
	}
	for _, cp := range cps {
		if err := h.DeleteCheckpoint(testCtx(t, time.Minute), cp.CheckpointID); err != nil {
			t.Fatal(err)
		}
		want.Stored, want.StoredBytes = want.Stored-1, want.StoredBytes-cp.SizeBytes
		if s := h.CheckpointStats(); s != want {
			t.Fatalf("after deleting %s: %+v, want %+v", cp.CheckpointID, s, want)
		}
	}
	waitSwept(t, h)
	if n := store.lists.Load(); n != 1 {
		t.Fatalf("every manifest was read %d times, want once (at start)", n)
	}
}
