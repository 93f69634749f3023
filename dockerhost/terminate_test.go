package dockerhost

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
)

// testTerminateTwiceConcurrently: of two Terminates at once, each answers
// success only once the container is gone: the one that found the
// execution forgotten answered at once (in 0.5 to 30 ms here), its
// container and processes still there for 100 ms more.
func testTerminateTwiceConcurrently(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	for range 3 {
		ex := provision(t, h, emptyReq(img, small()))
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := testCtx(t, time.Minute)
				t0 := time.Now()
				if err := h.Terminate(ctx, ex.ExecutionID); err != nil {
					t.Errorf("terminate: %v", err)
					return
				}
				took := time.Since(t0)
				if _, err := cli.ContainerInspect(ctx, ex.ContainerID); !cerrdefs.IsNotFound(err) {
					t.Errorf("a terminate answered success after %v with the container still there (inspect: %v)", took, err)
				}
			}()
		}
		wg.Wait()
	}
}

// slowRemove is an engine whose container removal waits for release.
type slowRemove struct {
	fakeDocker
	started chan string
	release chan error
}

func (f *slowRemove) ContainerRemove(_ context.Context, id string, _ container.RemoveOptions) error {
	f.started <- id
	return <-f.release
}

// TestTerminateWaitsForTheRemovalUnderWay: a Terminate that finds the
// execution already ended by another, whose removal of the container is
// under way, answers when that removal does, with its error: it answered
// success at once, even when that removal then failed and the container
// stayed. One whose context ends first says so.
func TestTerminateWaitsForTheRemovalUnderWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		spec, _ := json.Marshal(redact(validReq()))
		live := func(id string) container.Summary {
			return container.Summary{ID: "c-" + id, State: "running", Labels: map[string]string{
				LabelExecution: id, LabelExpires: fmtUnix(now.Add(time.Hour)), LabelSpec: string(spec), LabelOwner: "gw", LabelUID: strconv.Itoa(sandboxUIDBase)}}
		}
		f := &slowRemove{fakeDocker: fakeDocker{list: []container.Summary{live("a"), live("b")}}, started: make(chan string, 1), release: make(chan error, 1)}
		h, err := NewDocker(context.Background(), nil, f, &Config{Owner: "gw", CheckpointDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		ctx := context.Background()
		first, second := make(chan error, 1), make(chan error, 1)
		go func() { first <- h.Terminate(ctx, "a") }()
		<-f.started
		go func() { second <- h.Terminate(ctx, "a") }()
		synctest.Wait()
		select {
		case err := <-second:
			t.Errorf("the second terminate answered %v while the first was removing the container", err)
			second <- err
		default:
		}
		f.release <- errors.New("engine on fire")
		for name, c := range map[string]chan error{"first": first, "second": second} {
			if err := <-c; err == nil || !strings.Contains(err.Error(), "engine on fire") {
				t.Errorf("%s terminate: %v, want the removal's error", name, err)
			}
		}
		// Its context ending, a waiting terminate says what it waited for.
		go func() { first <- h.Terminate(ctx, "b") }()
		<-f.started
		short, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if err := h.Terminate(short, "b"); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "removal under way") {
			t.Errorf("a terminate whose context ended while waiting: %v", err)
		}
		f.release <- nil
		if err := <-first; err != nil {
			t.Errorf("terminate b: %v", err)
		}
	})
}

// testTerminateDuringRestoreLeavesNothing: a Terminate of an execution
// whose provision (a restore, loading its workspace) has made its
// container answers once that container is removed: it answered at once,
// the container still there while the provision unwound.
func testTerminateDuringRestoreLeavesNothing(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, &Config{CheckpointDir: t.TempDir()})
	cp := putCheckpoint(t, h.store, img, 6<<20)
	const id = "terminate-during-restore"
	got := make(chan error, 1)
	go func() {
		_, err := h.Restore(testCtx(t, 2*time.Minute), RestoreRequest{CheckpointID: cp, ExecutionID: id})
		got <- err
	}()
	// Wait (on the engine: a list is a few ms) for the container, the
	// provision still pending.
	ctx := testCtx(t, time.Minute)
	for {
		h.mu.Lock()
		pending := h.pending[id] != nil
		h.mu.Unlock()
		if !pending && len(h.List()) > 0 {
			t.Fatal("the restore was done before its container was seen: nothing to terminate mid-provision")
		}
		if pending && len(ownerContainers(t, cli, h)) > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("no container while the restore was pending")
		}
	}
	t0 := time.Now()
	if err := h.Terminate(ctx, id); err != nil {
		t.Fatalf("terminate: %v", err)
	}
	if left := ownerContainers(t, cli, h); len(left) != 0 {
		t.Errorf("terminate answered after %v, %d containers left: %+v", time.Since(t0), len(left), left[0].Names)
	}
	if err := <-got; ErrorCode(err) != CodeGone {
		t.Errorf("the restore: %v, want gone", err)
	}
}

// TestTerminateTriesAFailedRemovalAgain: after a Terminate whose removal
// of the container failed (an error from the engine), the next Terminate
// asks the engine again and answers what it says: it answered success
// without asking, the execution already forgotten, while the container
// the engine had not removed ran on.
func TestTerminateTriesAFailedRemovalAgain(t *testing.T) {
	now := time.Now()
	spec, _ := json.Marshal(redact(validReq()))
	f := &fakeDocker{list: []container.Summary{{ID: "c-a", State: "running", Labels: map[string]string{
		LabelExecution: "a", LabelExpires: fmtUnix(now.Add(time.Hour)), LabelSpec: string(spec), LabelOwner: "gw", LabelUID: strconv.Itoa(sandboxUIDBase)}}},
		removeErr: map[string]error{"c-a": errors.New("engine on fire")}}
	h := fakeHost(t, f, now)
	ctx := testCtx(t, time.Minute)
	for i, want := range []string{"engine on fire", "engine on fire", ""} {
		if i == 2 {
			f.mu.Lock()
			delete(f.removeErr, "c-a")
			f.mu.Unlock()
		}
		err := h.Terminate(ctx, "a")
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("terminate %d: %v, want %q", i+1, err, want)
		}
		f.mu.Lock()
		asked := len(f.removed)
		f.mu.Unlock()
		if asked != i+1 {
			t.Errorf("terminate %d: the engine was asked to remove the container %d times, want %d", i+1, asked, i+1)
		}
	}
	// Removed: nothing is kept of it, and a terminate asks nothing more.
	if err := h.Terminate(ctx, "a"); err != nil || len(f.removed) != 3 {
		t.Errorf("terminate after the removal: %v, %d removals asked", err, len(f.removed))
	}
	h.mu.Lock()
	kept := len(h.removing)
	h.mu.Unlock()
	if kept != 0 {
		t.Errorf("%d removals kept after the container's", kept)
	}
}

// TestRestartRemovesWhatAFailedRemovalLeft: an execution whose container
// the engine failed to remove at its end is, after a gateway restart, still
// ended (gone, with its reason), and the new host asks the engine to remove
// the container again rather than adopting it; a removal that fails again
// is left for a Terminate. The failed removal was kept in memory only, so
// the restarted host adopted the container as a live execution and
// dropped its tombstone.
func TestRestartRemovesWhatAFailedRemovalLeft(t *testing.T) {
	now := time.Now()
	spec, _ := json.Marshal(redact(validReq()))
	f := &fakeDocker{list: []container.Summary{{ID: "c-a", State: "running", Labels: map[string]string{
		LabelExecution: "a", LabelExpires: fmtUnix(now.Add(time.Hour)), LabelSpec: string(spec), LabelOwner: "gw", LabelUID: strconv.Itoa(sandboxUIDBase)}}},
		removeErr: map[string]error{"c-a": errors.New("engine on fire")}}
	tombs := newMemTombs()
	ctx := testCtx(t, time.Minute)
	start := func() *Docker {
		t.Helper()
		h, err := NewDocker(ctx, nil, f, &Config{Owner: "gw", CheckpointDir: t.TempDir(), Tombstones: tombs, Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Close() })
		return h
	}
	removals := func() int {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.removed)
	}
	h := start()
	if err := h.Terminate(ctx, "a"); err == nil || !strings.Contains(err.Error(), "engine on fire") {
		t.Fatalf("terminate: %v, want the engine's error", err)
	}
	_ = h.Close()

	// Restarted, the engine still failing: the execution stays ended,
	// its container not adopted, and a Terminate asks again.
	h = start()
	if n := removals(); n != 2 {
		t.Errorf("after a restart the engine was asked to remove the container %d times in all, want 2 (the restart asks again)", n)
	}
	if live := h.Live(); live != 0 {
		t.Errorf("after a restart %d live executions, want 0: the terminated one was adopted", live)
	}
	_, err := h.Get(ctx, "a")
	wantEnded(t, err, EndTerminated, now)
	if _, _, ok, _ := tombs.LookupTombstone(ctx, "a"); !ok {
		t.Error("the store no longer records the terminated execution as ended")
	}
	if err := h.Terminate(ctx, "a"); err == nil || !strings.Contains(err.Error(), "engine on fire") || removals() != 3 {
		t.Errorf("terminate after the restart: %v with %d removals asked, want the engine's error with 3", err, removals())
	}
	_ = h.Close()

	// Restarted, the engine removing again: the start removes it, and
	// a Terminate has nothing left to ask.
	f.mu.Lock()
	delete(f.removeErr, "c-a")
	f.mu.Unlock()
	h = start()
	if n := removals(); n != 4 {
		t.Errorf("after the second restart %d removals asked in all, want 4", n)
	}
	_, err = h.Get(ctx, "a")
	wantEnded(t, err, EndTerminated, now)
	if err := h.Terminate(ctx, "a"); err != nil || removals() != 4 {
		t.Errorf("terminate once the start removed the container: %v with %d removals asked, want nil with 4", err, removals())
	}
}

// failRemoveOnce is an engine whose first container removal fails.
type failRemoveOnce struct {
	DockerAPI
	failed atomic.Bool
}

func (f *failRemoveOnce) ContainerRemove(ctx context.Context, id string, opts container.RemoveOptions) error {
	if f.failed.CompareAndSwap(false, true) {
		return errors.New("engine on fire")
	}
	return f.DockerAPI.ContainerRemove(ctx, id, opts)
}

// testTimeoutRemovalFails: a command past its timeout whose container the
// engine then fails to remove is answered timeout saying so and what to
// do, not "the execution was destroyed"; a Terminate then removes the
// container. It was told destroyed, and the Terminate answered success
// without asking the engine, the container running on until its runtime.
func testTimeoutRemovalFails(t *testing.T) {
	cli, img := engine(t)
	api := &failRemoveOnce{DockerAPI: cli}
	owner := uniqueOwner()
	h, err := NewDocker(testCtx(t, time.Minute), slog.New(slog.DiscardHandler), api, &Config{Owner: owner, CheckpointDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close(); reapOwner(t, cli, owner) })
	ex := provision(t, h, emptyReq(img, small()))
	ctx := testCtx(t, time.Minute)
	_, err = h.Exec(ctx, ex.ExecutionID, ExecRequest{Command: "sleep", Args: []string{"600"}, TimeoutMs: 500})
	var e *Error
	if !asError(err, &e) || e.Code != CodeTimeout || strings.Contains(e.Message, "was destroyed") || !strings.Contains(e.Message, "engine on fire") || !strings.Contains(e.Message, "terminate it to try again") {
		t.Fatalf("timeout, its removal failed: %v; want timeout saying the container was not removed", err)
	}
	if _, err := cli.ContainerInspect(ctx, ex.ContainerID); err != nil {
		t.Fatalf("the container the engine did not remove: %v", err)
	}
	if _, err := h.Get(ctx, ex.ExecutionID); ErrorCode(err) != CodeGone {
		t.Fatalf("get: %v, want gone", err)
	}
	if err := h.Terminate(ctx, ex.ExecutionID); err != nil {
		t.Fatalf("terminate: %v", err)
	}
	if _, err := cli.ContainerInspect(ctx, ex.ContainerID); !cerrdefs.IsNotFound(err) {
		t.Errorf("terminate answered success, the container still there (inspect: %v)", err)
	}
}
