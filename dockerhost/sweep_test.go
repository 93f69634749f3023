package dockerhost

import (
	"context"
	"errors"
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
	h.kickSweep() // as a checkpoint does
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

	// Without retention, the store is counted all the same.
	off := hostWithRetention(t, dir, now, Retention{}, io.Discard)
	writeCheckpoint(t, dir, now, 10, "exec-1")
	off.kickSweep() // as a checkpoint does
	waitSwept(t, off)
	if s := off.CheckpointStats(); s != (CheckpointStats{Stored: 1, StoredBytes: 10}) {
		t.Fatalf("retention off, one checkpoint: %+v", s)
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
