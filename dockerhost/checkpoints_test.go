package dockerhost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/testenv"
)

// writeCheckpoint writes a committed checkpoint straight into dir: a tar of
// size bytes and its manifest.
func writeCheckpoint(t testing.TB, dir string, created time.Time, size int, exec string) *Manifest {
	t.Helper()
	data := bytes.Repeat([]byte{'x'}, size)
	m := validManifest(data)
	m.CreatedAt, m.ExecutionID = created.UTC(), exec
	j, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, m.CheckpointID+".tar"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, m.CheckpointID+".json"), j, 0o600); err != nil {
		t.Fatal(err)
	}
	return m
}

// ids lists the checkpoints in dir by their manifests' names.
func ids(t testing.TB, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		out = append(out, strings.TrimSuffix(filepath.Base(n), ".json"))
	}
	slices.Sort(out)
	return out
}

// TestLocalStoreList: every committed checkpoint, over more than one
// directory batch; what is not one is skipped and logged, never followed
// (a symbolic link) or waited on (a FIFO).
func TestLocalStoreList(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	var log testenv.LogBuffer
	s, err := NewLocalStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s.Logger = slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	want := map[string]bool{}
	base := time.Now().Add(-time.Hour)
	for i := range listBatch + 10 {
		want[writeCheckpoint(t, s.Dir, base.Add(time.Duration(i)*time.Second), 10, "exec-1").CheckpointID] = true
	}
	// A checkpoint being written, a damaged manifest, a manifest that
	// is a symbolic link to a valid one, a FIFO, a stray file.
	outsideDir := t.TempDir()
	outside := writeCheckpoint(t, outsideDir, base, 10, "exec-1")
	if err := os.WriteFile(filepath.Join(s.Dir, newCheckpointID()+".tar.123.partial"), []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	damaged := newCheckpointID()
	if err := os.WriteFile(filepath.Join(s.Dir, damaged+".json"), []byte(`{"version": 1`), 0o600); err != nil {
		t.Fatal(err)
	}
	link := outside.CheckpointID
	if err := os.Symlink(filepath.Join(outsideDir, link+".json"), filepath.Join(s.Dir, link+".json")); err != nil {
		t.Fatal(err)
	}
	fifo := newCheckpointID()
	if err := syscall.Mkfifo(filepath.Join(s.Dir, fifo+".json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Dir, "notes.txt"), []byte("hi"), 0o600); err != nil {
		t.Fatal(err)
	}

	got := map[string]bool{}
	if err := s.List(ctx, func(m *Manifest) bool {
		if got[m.CheckpointID] {
			t.Errorf("%s listed twice", m.CheckpointID)
		}
		got[m.CheckpointID] = true
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("listed %d checkpoints, want %d", len(got), len(want))
	}
	for id := range got {
		if !want[id] {
			t.Errorf("listed %s, which is no committed checkpoint", id)
		}
	}
	logged := log.String()
	for _, w := range []string{damaged, link, fifo, "notes.txt", ".partial"} {
		if !strings.Contains(logged, w) {
			t.Errorf("skipped %s not logged:\n%s", w, logged)
		}
	}
	if !strings.Contains(logged, "a symbolic link") || !strings.Contains(logged, "a named pipe") {
		t.Errorf("the log does not say what the odd files are:\n%s", logged)
	}

	// fn returning false stops the read.
	n := 0
	if err := s.List(ctx, func(*Manifest) bool { n++; return n < 3 }); err != nil || n != 3 {
		t.Fatalf("a list stopped after 3: %d, %v", n, err)
	}
}

func hostWithRetention(t *testing.T, dir string, now time.Time, r Retention, log io.Writer) *Docker {
	t.Helper()
	h, err := NewDocker(testCtx(t, time.Minute), slog.New(slog.NewTextHandler(log, nil)), &fakeDocker{},
		&Config{Owner: "gw", CheckpointDir: dir, Now: func() time.Time { return now }, Retention: r})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	waitSwept(t, h)
	return h
}

// waitSwept waits until the sweeps kicked so far (the start's, each
// checkpoint's) have run.
func waitSwept(t testing.TB, h *Docker) {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	gen := h.sweep.kicks.Load()
	for {
		h.sweep.mu.Lock()
		swept, moved := h.sweep.swept, h.sweep.moved
		h.sweep.mu.Unlock()
		if swept >= gen {
			return
		}
		select {
		case <-moved:
		case <-ctx.Done():
			t.Fatalf("the sweeps kicked never ran (%d of %d)", swept, gen)
		}
	}
}

// TestRetention: the oldest go first, by age and by bytes (never the
// newest by bytes), at start and on demand, each logged; one a restore
// reads is kept.
func TestRetention(t *testing.T) {
	now := time.Now()
	dir := t.TempDir()
	var cps []*Manifest // oldest first: 5h, 4h, … 1h old, 100 bytes each
	for i := 5; i >= 1; i-- {
		cps = append(cps, writeCheckpoint(t, dir, now.Add(-time.Duration(i)*time.Hour), 100, "exec-1"))
	}
	idsOf := func(ms ...*Manifest) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.CheckpointID)
		}
		slices.Sort(out)
		return out
	}

	// At start, by age: older than 3h30m goes.
	var log testenv.LogBuffer
	h := hostWithRetention(t, dir, now, Retention{MaxAge: 3*time.Hour + 30*time.Minute}, &log)
	if got, want := ids(t, dir), idsOf(cps[2:]...); !slices.Equal(got, want) {
		t.Fatalf("after max-age at start: %v, want %v", got, want)
	}
	for _, m := range cps[:2] {
		if !strings.Contains(log.String(), `msg="checkpoint removed by retention" checkpoint=`+m.CheckpointID+" rule=max-age") {
			t.Errorf("removal of %s not logged:\n%s", m.CheckpointID, log.String())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, cps[0].CheckpointID+".tar")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a removed checkpoint's tar: %v", err)
	}
	if !strings.Contains(log.String(), "bytesFreed=100") || !strings.Contains(log.String(), "age=5h0m0s") {
		t.Errorf("the log lacks the bytes freed or the age:\n%s", log.String())
	}

	// By bytes: 3 left (300 bytes), 250 allowed: the oldest goes, but
	// not one a restore reads: the next goes in its stead.
	h.retention = Retention{MaxBytes: 250}
	h.startReading(cps[2].CheckpointID)
	h.EnforceRetention(testCtx(t, time.Minute))
	if got, want := ids(t, dir), idsOf(cps[2], cps[4]); !slices.Equal(got, want) {
		t.Fatalf("after max-bytes with the oldest being read: %v, want %v", got, want)
	}
	if !strings.Contains(log.String(), `kept while a restore reads it" checkpoint=`+cps[2].CheckpointID) {
		t.Errorf("the kept checkpoint is not logged:\n%s", log.String())
	}
	h.doneReading(cps[2].CheckpointID)
	if got, want := ids(t, dir), idsOf(cps[2], cps[4]); !slices.Equal(got, want) {
		t.Fatalf("after the restore: %v, want %v (nothing deleted it)", got, want)
	}

	// The newest stays even when it alone is over the bytes.
	h.retention = Retention{MaxBytes: 50}
	h.EnforceRetention(testCtx(t, time.Minute))
	if got, want := ids(t, dir), idsOf(cps[4]); !slices.Equal(got, want) {
		t.Fatalf("after max-bytes 50: %v, want only the newest %v", got, want)
	}
}

// TestRetentionOffKeepsEverything: zero keeps every checkpoint, as
// before the retention; a negative limit is refused.
func TestRetentionOffKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	old := writeCheckpoint(t, dir, time.Unix(0, 0), 100, "exec-1")
	h := hostWithRetention(t, dir, time.Now(), Retention{}, io.Discard)
	h.EnforceRetention(testCtx(t, time.Minute))
	if got := ids(t, dir); !slices.Equal(got, []string{old.CheckpointID}) {
		t.Fatalf("retention off: %v, want the checkpoint kept", got)
	}
	if _, err := NewDocker(testCtx(t, time.Minute), nil, &fakeDocker{}, &Config{CheckpointDir: dir, Retention: Retention{MaxBytes: -1}}); err == nil {
		t.Fatal("a negative MaxBytes accepted")
	}
}

// TestCheckpointListGetDelete: newest first, filtered and bounded; get
// and delete by id; a checkpoint deleted while a restore reads it is gone
// for every caller at once and leaves the store when the restore ends.
func TestCheckpointListGetDelete(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	h := fakeHost(t, &fakeDocker{}, time.Now())
	dir := h.store.(*LocalStore).Dir
	base := time.Now().Add(-time.Hour)
	var all []*Manifest
	for i := range 5 {
		exec := "exec-a"
		if i%2 == 1 {
			exec = "exec-b"
		}
		all = append(all, writeCheckpoint(t, dir, base.Add(time.Duration(i)*time.Minute), 10+i, exec))
	}
	list, err := h.ListCheckpoints(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range list.Checkpoints {
		got = append(got, c.CheckpointID)
	}
	want := []string{all[4].CheckpointID, all[3].CheckpointID, all[2].CheckpointID, all[1].CheckpointID, all[0].CheckpointID}
	if !slices.Equal(got, want) || list.Truncated {
		t.Fatalf("list: %v (truncated %v), want newest first %v", got, list.Truncated, want)
	}
	c := list.Checkpoints[0]
	if c.ExecutionID != "exec-a" || c.SizeBytes != 14 || c.Reason != "handoff" || c.Image == "" || c.Resources.DiskBytes == 0 || len(c.SHA256) != 64 {
		t.Fatalf("list entry: %+v", c)
	}
	list, err = h.ListCheckpoints(ctx, "exec-b", 1)
	if err != nil || len(list.Checkpoints) != 1 || list.Checkpoints[0].CheckpointID != all[3].CheckpointID || !list.Truncated {
		t.Fatalf("list of exec-b, limit 1: %+v %v, want %s and truncated", list, err, all[3].CheckpointID)
	}
	if _, err := h.ListCheckpoints(ctx, "", MaxCheckpointListLimit+1); ErrorCode(err) != CodeInvalidRequest {
		t.Fatalf("limit over the max: %v", err)
	}
	if info, err := h.GetCheckpoint(ctx, all[0].CheckpointID); err != nil || info.CheckpointID != all[0].CheckpointID || !info.CreatedAt.Equal(all[0].CreatedAt) {
		t.Fatalf("get: %+v %v", info, err)
	}
	for _, id := range []string{"nope", "../" + all[0].CheckpointID, newCheckpointID()} {
		if _, err := h.GetCheckpoint(ctx, id); ErrorCode(err) != CodeNotFound {
			t.Errorf("get %q: %v, want not_found", id, err)
		}
		if err := h.DeleteCheckpoint(ctx, id); ErrorCode(err) != CodeNotFound {
			t.Errorf("delete %q: %v, want not_found", id, err)
		}
	}

	if err := h.DeleteCheckpoint(ctx, all[0].CheckpointID); err != nil {
		t.Fatal(err)
	}
	if err := h.DeleteCheckpoint(ctx, all[0].CheckpointID); ErrorCode(err) != CodeNotFound {
		t.Fatalf("second delete: %v, want not_found", err)
	}

	// Deleted while a restore reads it: gone at once, and for good.
	id := all[1].CheckpointID
	h.startReading(id)
	_, rc, err := h.store.Open(ctx, id) // the restore's open tar
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if err := h.DeleteCheckpoint(ctx, id); err != nil {
		t.Fatalf("delete while read: %v", err)
	}
	if _, err := h.GetCheckpoint(ctx, id); ErrorCode(err) != CodeNotFound {
		t.Fatalf("get of a checkpoint deleted while read: %v, want not_found", err)
	}
	if err := h.DeleteCheckpoint(ctx, id); ErrorCode(err) != CodeNotFound {
		t.Fatalf("delete again while read: %v, want not_found", err)
	}
	if _, err := h.Restore(ctx, RestoreRequest{CheckpointID: id}); ErrorCode(err) != CodeNotFound {
		t.Fatalf("a new restore of a checkpoint deleted while read: %v, want not_found", err)
	}
	list, _ = h.ListCheckpoints(ctx, "", 0)
	for _, c := range list.Checkpoints {
		if c.CheckpointID == id || c.CheckpointID == all[0].CheckpointID {
			t.Fatalf("a deleted checkpoint listed: %s", c.CheckpointID)
		}
	}
	if len(list.Checkpoints) != 3 {
		t.Fatalf("listed %d, want 3", len(list.Checkpoints))
	}
	// The gateway killed now, before the restore ends: a new host over
	// the same directory (this one never closed) does not have it back.
	again, err := NewDocker(ctx, nil, &fakeDocker{}, &Config{Owner: "gw2", CheckpointDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if _, err := again.GetCheckpoint(ctx, id); ErrorCode(err) != CodeNotFound {
		t.Errorf("after a kill during the restore, the deleted checkpoint: %v, want not_found", err)
	}
	if l, err := again.ListCheckpoints(ctx, "", 0); err != nil || len(l.Checkpoints) != 3 {
		t.Errorf("after a kill during the restore: %+v %v, want the 3 left", l, err)
	}
	if _, err := again.Restore(ctx, RestoreRequest{CheckpointID: id}); ErrorCode(err) != CodeNotFound {
		t.Errorf("after a kill during the restore, a restore of the deleted checkpoint: %v, want not_found", err)
	}
	// The restore reads the whole tar it opened.
	data, err := io.ReadAll(rc)
	if err != nil || len(data) != int(all[1].SizeBytes) {
		t.Fatalf("the restore's read of its deleted checkpoint: %d bytes, %v, want %d", len(data), err, all[1].SizeBytes)
	}
	h.doneReading(id)
	if left, _ := filepath.Glob(filepath.Join(dir, id+"*")); len(left) != 0 {
		t.Fatalf("files of the deleted checkpoint: %v", left)
	}
}

// BenchmarkListCheckpoints lists a store of 2,000 checkpoints.
func BenchmarkListCheckpoints(b *testing.B) {
	dir := b.TempDir()
	for i := range 2000 {
		writeCheckpoint(b, dir, time.Unix(int64(1_800_000_000+i), 0), 100, fmt.Sprintf("exec-%d", i%7))
	}
	s := &LocalStore{Dir: dir}
	h := &Docker{store: s, rd: readers{n: map[string]int{}}, logger: slog.New(slog.DiscardHandler)}
	ctx := testCtx(b, time.Minute)
	for b.Loop() {
		if l, err := h.ListCheckpoints(ctx, "", 100); err != nil || len(l.Checkpoints) != 100 {
			b.Fatal(l, err)
		}
	}
}

// gatedStore hands out tars whose first read waits for release, having
// said so on reading.
type gatedStore struct {
	CheckpointStore
	reading chan struct{}
	release chan struct{}
}

func (s *gatedStore) Open(ctx context.Context, id string) (*Manifest, io.ReadCloser, error) {
	m, rc, err := s.CheckpointStore.Open(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	return m, &gatedReader{ReadCloser: rc, s: s}, nil
}

type gatedReader struct {
	io.ReadCloser
	s    *gatedStore
	once sync.Once
}

func (r *gatedReader) Read(p []byte) (int, error) {
	r.once.Do(func() {
		r.s.reading <- struct{}{}
		<-r.s.release
	})
	return r.ReadCloser.Read(p)
}

// A checkpoint deleted while a restore reads it: the delete answers at
// once and the checkpoint is gone for every caller, the restore gets the
// whole workspace from the tar it opened, and the files leave the store at
// once (a gateway killed during the restore must not bring them back).
func testCheckpointDeleteDuringRestore(t *testing.T) {
	cli, img := engine(t)
	local, err := NewLocalStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	gs := &gatedStore{CheckpointStore: local, reading: make(chan struct{}, 1), release: make(chan struct{})}
	h := newTestHost(t, cli, &Config{Store: gs})
	ex := provision(t, h, emptyReq(img, small()))
	sh(t, h, ex.ExecutionID, `head -c 300000 /dev/urandom > /workspace/blob && md5sum < /workspace/blob > /workspace/sum`)
	cp, err := h.Checkpoint(testCtx(t, time.Minute), ex.ExecutionID, CheckpointRequest{Reason: "race"})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		e   *Execution
		err error
	}
	done := make(chan result, 1)
	go func() {
		e, err := h.Restore(testCtx(t, 2*time.Minute), RestoreRequest{CheckpointID: cp.CheckpointID})
		done <- result{e, err}
	}()
	select {
	case <-gs.reading:
	case r := <-done:
		t.Fatalf("the restore ended before reading: %+v %v", r.e, r.err)
	case <-time.After(2 * time.Minute):
		t.Fatal("the restore never read the checkpoint")
	}
	ctx := testCtx(t, time.Minute)
	if err := h.DeleteCheckpoint(ctx, cp.CheckpointID); err != nil {
		close(gs.release)
		t.Fatalf("delete during the restore: %v", err)
	}
	_, gerr := h.GetCheckpoint(ctx, cp.CheckpointID)
	_, rerr := h.Restore(ctx, RestoreRequest{CheckpointID: cp.CheckpointID})
	left := ids(t, local.Dir)
	close(gs.release)
	r := <-done
	if r.err != nil {
		t.Fatalf("the restore a delete raced: %v", r.err)
	}
	if ErrorCode(gerr) != CodeNotFound || ErrorCode(rerr) != CodeNotFound {
		t.Errorf("get and a new restore of the deleted checkpoint: %v; %v, want not_found", gerr, rerr)
	}
	if len(left) != 0 {
		t.Errorf("the store while the restore read: %v, want the deleted checkpoint gone at once", left)
	}
	if got := sh(t, h, r.e.ExecutionID, `cd /workspace && md5sum < blob | cmp - sum && echo same`).Stdout; got != "same\n" {
		t.Errorf("the restored workspace: %q, want the checkpointed blob", got)
	}
	if left := ids(t, local.Dir); len(left) != 0 {
		t.Errorf("after the restore: %v, want the deleted checkpoint gone from the store", left)
	}
	if tars, _ := filepath.Glob(filepath.Join(local.Dir, "*")); len(tars) != 0 {
		t.Errorf("after the restore the store holds %v", tars)
	}
}

// Retention by bytes runs after each checkpoint (in the background): the
// older goes, the one just taken stays even when it alone is over.
func testCheckpointRetention(t *testing.T) {
	cli, img := engine(t)
	var log testenv.LogBuffer
	cfg := &Config{Owner: uniqueOwner(), CheckpointDir: t.TempDir(), Retention: Retention{MaxBytes: 1}}
	h, err := NewDocker(testCtx(t, time.Minute), slog.New(slog.NewTextHandler(&log, nil)), cli, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.Close()
		reapOwner(t, cli, cfg.Owner)
	})
	ex := provision(t, h, emptyReq(img, small()))
	sh(t, h, ex.ExecutionID, `echo one > /workspace/f`)
	first, err := h.Checkpoint(testCtx(t, time.Minute), ex.ExecutionID, CheckpointRequest{Reason: "one"})
	if err != nil {
		t.Fatal(err)
	}
	second, err := h.Checkpoint(testCtx(t, time.Minute), ex.ExecutionID, CheckpointRequest{Reason: "two"})
	if err != nil {
		t.Fatal(err)
	}
	waitSwept(t, h)
	list, err := h.ListCheckpoints(testCtx(t, time.Minute), ex.ExecutionID, 0)
	if err != nil || len(list.Checkpoints) != 1 || list.Checkpoints[0].CheckpointID != second.CheckpointID || list.Checkpoints[0].Reason != "two" {
		t.Fatalf("after two checkpoints over max-bytes: %+v %v, want only the second", list, err)
	}
	if want := fmt.Sprintf("checkpoint=%s rule=max-bytes", first.CheckpointID); !strings.Contains(log.String(), want) {
		t.Errorf("the log lacks %q:\n%s", want, log.String())
	}
}

// TestRetentionDamagedCheckpoints: damage in the store never makes
// retention remove a checkpoint it would keep otherwise, and a second run
// does the same. By bytes it counts what is on disk: a manifest without
// its tar holds nothing; a damaged manifest is skipped, its tar neither
// counted nor removed; a checkpoint it cannot remove does not make a
// younger one go in its stead. A checkpoint without its tar deletes
// cleanly.
func TestRetentionDamagedCheckpoints(t *testing.T) {
	now := time.Now()
	dir := t.TempDir()
	at := func(h int) time.Time { return now.Add(-time.Duration(h) * time.Hour) }
	damaged := writeCheckpoint(t, dir, at(10), 1000, "exec-1") // oldest, and large
	if err := os.WriteFile(filepath.Join(dir, damaged.CheckpointID+".json"), []byte(`{"version": 1`), 0o600); err != nil {
		t.Fatal(err)
	}
	stuck := writeCheckpoint(t, dir, at(9), 100, "exec-1") // its tar a directory: not removable
	tar := filepath.Join(dir, stuck.CheckpointID+".tar")
	if err := os.Remove(tar); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(tar, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	b := writeCheckpoint(t, dir, at(8), 100, "exec-1")
	c := writeCheckpoint(t, dir, at(7), 100, "exec-1")
	noTar := writeCheckpoint(t, dir, at(6), 100, "exec-1")
	if err := os.Remove(filepath.Join(dir, noTar.CheckpointID+".tar")); err != nil {
		t.Fatal(err)
	}
	d := writeCheckpoint(t, dir, at(5), 100, "exec-1")

	// On disk: b, c and d, 300 bytes (stuck's are left out once it
	// fails to go). 250 allowed: b goes, and only b.
	var log testenv.LogBuffer
	h := hostWithRetention(t, dir, now, Retention{MaxBytes: 250}, &log)
	want := []string{c.CheckpointID, noTar.CheckpointID, d.CheckpointID, damaged.CheckpointID}
	slices.Sort(want)
	for run := range 2 {
		h.EnforceRetention(testCtx(t, time.Minute))
		if got := ids(t, dir); !slices.Equal(got, want) {
			t.Fatalf("run %d: %v, want %v (b, and stuck's manifest, gone; the rest kept)", run, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, damaged.CheckpointID+".tar")); err != nil {
		t.Errorf("the tar of the damaged manifest: %v, want it kept for the operator", err)
	}
	if !strings.Contains(log.String(), "checkpoint="+b.CheckpointID+" rule=max-bytes") {
		t.Errorf("b's removal is not logged:\n%s", log.String())
	}
	if !strings.Contains(log.String(), "checkpoint="+stuck.CheckpointID) {
		t.Errorf("the checkpoint retention could not remove is not logged:\n%s", log.String())
	}
	// A checkpoint without its tar deletes without an error.
	if err := h.DeleteCheckpoint(testCtx(t, time.Minute), noTar.CheckpointID); err != nil {
		t.Errorf("delete of a checkpoint whose tar is missing: %v, want it deleted", err)
	}
	if slices.Contains(ids(t, dir), noTar.CheckpointID) {
		t.Errorf("the checkpoint without its tar is still listed after its delete")
	}
}

// BenchmarkCheckpointWithRetention times a small checkpoint's answer with
// 5,000 checkpoints stored, retention off and on (max-age, removing
// nothing): what retention adds to the request (before the background
// sweep: 0.36 s off, 1.18 s on). Compare the p50s, e.g.
// go test -run ^$ -bench CheckpointWithRetention -benchtime 30x.
func BenchmarkCheckpointWithRetention(b *testing.B) {
	cli, img := engine(b)
	for _, r := range []Retention{{}, {MaxAge: 1000 * time.Hour}} {
		name := "off"
		if r.on() {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			for i := range 5000 {
				writeCheckpoint(b, dir, time.Now().Add(-time.Duration(i)*time.Second), 100, "exec-1")
			}
			h := newTestHost(b, cli, &Config{CheckpointDir: dir, Retention: r})
			ex := provision(b, h, emptyReq(img, small()))
			sh(b, h, ex.ExecutionID, `echo hello > /workspace/f`)
			var samples []time.Duration
			for b.Loop() {
				// Untimed: the last checkpoint's sweep ends first, as
				// under checkpoints further apart than a sweep takes.
				b.StopTimer()
				waitSwept(b, h)
				b.StartTimer()
				start := time.Now()
				if _, err := h.Checkpoint(testCtx(b, time.Minute), ex.ExecutionID, CheckpointRequest{}); err != nil {
					b.Fatal(err)
				}
				samples = append(samples, time.Since(start))
			}
			reportP50(b, samples)
		})
	}
}
