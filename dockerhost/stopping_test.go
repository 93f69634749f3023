package dockerhost

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
)

// cuttingStore is a LocalStore that calls cut (once) when a checkpoint's
// tar first moves: the first write of a checkpoint, the first read of a
// restore.
type cuttingStore struct {
	*LocalStore
	mu  sync.Mutex
	cut func()
}

func (s *cuttingStore) arm(f func()) {
	s.mu.Lock()
	s.cut = f
	s.mu.Unlock()
}

func (s *cuttingStore) fire() {
	s.mu.Lock()
	f := s.cut
	s.cut = nil
	s.mu.Unlock()
	if f != nil {
		f()
	}
}

func (s *cuttingStore) Create(ctx context.Context, id string) (CheckpointWriter, error) {
	w, err := s.LocalStore.Create(ctx, id)
	if err != nil {
		return nil, err
	}
	return &cuttingWriter{CheckpointWriter: w, s: s}, nil
}

func (s *cuttingStore) Open(ctx context.Context, id string) (*Manifest, io.ReadCloser, error) {
	m, rc, err := s.LocalStore.Open(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	return m, &cuttingReader{ReadCloser: rc, s: s}, nil
}

type cuttingWriter struct {
	CheckpointWriter
	s *cuttingStore
}

func (w *cuttingWriter) Write(p []byte) (int, error) {
	w.s.fire()
	return w.CheckpointWriter.Write(p)
}

type cuttingReader struct {
	io.ReadCloser
	s *cuttingStore
}

func (r *cuttingReader) Read(p []byte) (int, error) {
	r.s.fire()
	return r.ReadCloser.Read(p)
}

// stopping returns a context that stop ends as a server stopping does
// (ErrStopping in its cause).
func stopping(t *testing.T) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(testCtx(t, 2*time.Minute))
	return ctx, func() { cancel(fmt.Errorf("the gateway is shutting down: %w", ErrStopping)) }
}

// A checkpoint or a restore cut by the server stopping answers
// interrupted, as a command does, and leaves nothing half-made: no
// partial checkpoint file, no checkpoint, no loading container, and the
// checkpoint's execution unchanged. Both answered an engine failure (the
// gateway's 502).
func testStoppingCutsCheckpointRestore(t *testing.T) {
	cli, img := engine(t)
	dir := t.TempDir()
	ls, err := NewLocalStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	cs := &cuttingStore{LocalStore: ls}
	h := newTestHost(t, cli, &Config{Store: cs})
	ex := provision(t, h, emptyReq(img, small()))
	sh(t, h, ex.ExecutionID, "head -c 3000000 /dev/urandom > blob")
	good, err := h.Checkpoint(testCtx(t, time.Minute), ex.ExecutionID, CheckpointRequest{Reason: "kept"})
	if err != nil {
		t.Fatal(err)
	}
	files := func() []string {
		t.Helper()
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return names
	}
	want := []string{good.CheckpointID + ".json", good.CheckpointID + ".tar"}
	wantInterrupted := func(what string, err error) {
		t.Helper()
		if ErrorCode(err) != CodeInterrupted || !strings.Contains(err.Error(), "shutting down") {
			t.Fatalf("%s cut by the server stopping: %v (code %q), want %s", what, err, ErrorCode(err), CodeInterrupted)
		}
		if got := files(); !slices.Equal(got, want) {
			t.Fatalf("after the %s cut: checkpoint files %q, want only %q", what, got, want)
		}
		if out := sh(t, h, ex.ExecutionID, "wc -c < blob").Stdout; strings.TrimSpace(out) != "3000000" {
			t.Fatalf("after the %s cut: the execution's workspace holds %q bytes, want it unchanged", what, out)
		}
	}

	// Cut while it writes the tar.
	ctx, stop := stopping(t)
	cs.arm(stop)
	_, err = h.Checkpoint(ctx, ex.ExecutionID, CheckpointRequest{Reason: "cut"})
	wantInterrupted("checkpoint", err)

	// Cut while it waits for a running command.
	e, err := h.lookup(testCtx(t, time.Minute), ex.ExecutionID)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.lock.RLock(testCtx(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	ctx, stop = stopping(t)
	go func() {
		if e.lock.waitWriter(ctx) == nil {
			stop()
		}
	}()
	_, err = h.Checkpoint(ctx, ex.ExecutionID, CheckpointRequest{Reason: "waiting"})
	e.lock.RUnlock()
	wantInterrupted("waiting checkpoint", err)

	// Cut while the restore loads the workspace: its container, named as
	// loading, is removed.
	ctx, stop = stopping(t)
	var loading []string
	cs.arm(func() {
		// On the restore's stdin copier: t.Error only.
		list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", LabelOwner+"="+h.owner))})
		if err != nil {
			t.Error(err)
		}
		for _, c := range list {
			if slices.ContainsFunc(c.Names, func(n string) bool { return strings.HasPrefix(n, "/"+loadingPrefix) }) {
				loading = append(loading, c.ID)
			}
		}
		stop()
	})
	// An id of its own: container names are the engine's, shared with
	// every other run on it.
	cutID := "restore-cut-" + uniqueOwner()
	_, err = h.Restore(ctx, RestoreRequest{CheckpointID: good.CheckpointID, ExecutionID: cutID})
	wantInterrupted("restore", err)
	if len(loading) != 1 {
		t.Fatalf("loading containers while the restore loaded: %q, want one", loading)
	}
	waitRemoved(t, cli, loading[0], time.Minute)
	if got := h.List(); len(got) != 1 || got[0].ExecutionID != ex.ExecutionID {
		t.Fatalf("executions after the cut restore: %+v, want only the checkpoint's", got)
	}
	if _, err := h.Get(testCtx(t, time.Minute), cutID); ErrorCode(err) != CodeNotFound {
		t.Fatalf("the cut restore's execution: %v, want not_found", err)
	}

	// What was kept restores.
	r, err := h.Restore(testCtx(t, 2*time.Minute), RestoreRequest{CheckpointID: good.CheckpointID})
	if err != nil {
		t.Fatal(err)
	}
	if out := sh(t, h, r.ExecutionID, "wc -c < blob").Stdout; strings.TrimSpace(out) != "3000000" {
		t.Fatalf("restored blob: %q bytes", out)
	}
}

// TestStoppingCutsExecWaitingForCheckpoint: a command that waits behind a
// checkpoint when the server stops answers interrupted, as the checkpoint
// waiting for commands does: it never ran, and the execution is kept. It
// answered an untyped error, which the gateway answered 502 "the
// container engine failed".
func TestStoppingCutsExecWaitingForCheckpoint(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	spec, _ := json.Marshal(redact(validReq()))
	f := &fakeDocker{list: []container.Summary{{ID: "c-x", State: "running",
		Labels: map[string]string{LabelExecution: "x", LabelExpires: fmtUnix(now.Add(time.Hour)), LabelSpec: string(spec), LabelOwner: "gw", LabelUID: "2000000001", LabelDeadline: "1"}}}}
	h := fakeHost(t, f, now)
	h.mu.Lock()
	e := h.execs["x"]
	h.mu.Unlock()
	if err := e.lock.Lock(testCtx(t, time.Minute)); err != nil { // a checkpoint under way
		t.Fatal(err)
	}
	defer e.lock.Unlock()
	ctx, stop := stopping(t)
	time.AfterFunc(100*time.Millisecond, stop)
	_, err := h.ExecOutput(ctx, "x", ExecRequest{Command: "true", TimeoutMs: 60_000})
	if ErrorCode(err) != CodeInterrupted || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("exec waiting for a checkpoint, cut by the server stopping: %v (code %q), want %s", err, ErrorCode(err), CodeInterrupted)
	}
	if _, err := h.Get(testCtx(t, time.Minute), "x"); err != nil {
		t.Fatalf("after the cut: %v, want the execution kept", err)
	}
}
