package dockerhost

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
)

// heldTarDocker is an engine whose exec'd tar writes the workspace's first
// header and then nothing more, as busybox tar does once it opens a FIFO
// swapped in for a file it found regular (the open waits for a writer),
// or once sandbox code stops it.
type heldTarDocker struct {
	*fakeDocker
	ended chan struct{} // closed once the engine's end of the exec's stream is closed
}

func (f *heldTarDocker) ContainerInspect(context.Context, string) (container.InspectResponse, error) {
	return container.InspectResponse{ContainerJSONBase: &container.ContainerJSONBase{State: &container.State{Running: true}}}, nil
}

func (f *heldTarDocker) ContainerExecCreate(_ context.Context, _ string, opts container.ExecOptions) (container.ExecCreateResponse, error) {
	return container.ExecCreateResponse{ID: "exec-" + opts.Cmd[0]}, nil
}

func (f *heldTarDocker) ContainerExecAttach(context.Context, string, container.ExecAttachOptions) (types.HijackedResponse, error) {
	ours, engine := net.Pipe()
	go func() {
		defer close(f.ended)
		defer engine.Close()
		header := make([]byte, tarBlock) // "./", as far as anyone reads
		copy(header, "./")
		if _, err := stdcopy.NewStdWriter(engine, stdcopy.Stdout).Write(header); err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, engine) // held: until the gateway closes its end
	}()
	return types.HijackedResponse{Conn: ours, Reader: bufio.NewReader(ours)}, nil
}

// TestCheckpointOfHeldTarEnds: a checkpoint whose tar writes nothing
// more (a FIFO swapped in for a file, a tar stopped by sandbox code) ends
// with a conflict that says so and what to do, and keeps nothing; the
// execution's commands are not held behind it. It waited for as long as
// its caller did (for ever, for a caller without a timeout), holding the
// execution's lock: every command of the execution waited with it.
func TestCheckpointOfHeldTarEnds(t *testing.T) {
	now := time.Now()
	spec, _ := json.Marshal(redact(validReq()))
	f := &heldTarDocker{fakeDocker: &fakeDocker{list: []container.Summary{{ID: "c-live", State: "running", Labels: map[string]string{
		LabelExecution: "live", LabelExpires: fmtUnix(now.Add(time.Hour)), LabelSpec: string(spec), LabelOwner: "gw"}}}}, ended: make(chan struct{})}
	dir := t.TempDir()
	h, err := NewDocker(testCtx(t, time.Minute), nil, f, &Config{Owner: "gw", CheckpointDir: dir, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	h.ws.exportIdle = 100 * time.Millisecond

	ctx := testCtx(t, 30*time.Second)
	_, err = h.Checkpoint(ctx, "live", CheckpointRequest{Reason: "held"})
	if ctx.Err() != nil {
		t.Fatalf("the checkpoint of a held tar waited until its caller gave up: %v", err)
	}
	var e *Error
	if !asError(err, &e) || e.Code != CodeConflict || !strings.Contains(e.Message, "wrote nothing of it for 100ms") ||
		!strings.Contains(e.Message, "named pipe (FIFO)") || !strings.Contains(e.Message, "kill -STOP") {
		t.Fatalf("checkpoint of a held tar: %v, want a conflict naming the FIFO and the stop", err)
	}
	select {
	case <-f.ended:
	case <-ctx.Done():
		t.Fatal("the held exec's stream was left open")
	}
	if list, err := h.ListCheckpoints(ctx, "live", 0); err != nil || len(list.Checkpoints) != 0 {
		t.Fatalf("checkpoints after the held one: %+v %v, want none", list, err)
	}
	// The execution is not held behind it: a checkpoint takes its lock.
	h.mu.Lock()
	ex := h.execs["live"]
	h.mu.Unlock()
	if err := ex.lock.Lock(ctx); err != nil {
		t.Fatalf("the execution's lock after the held checkpoint: %v", err)
	}
	ex.lock.Unlock()
}

// heldWriteStore holds the first Write of a checkpoint until release closes,
// saying on started that it came: tar, writing into a pipe no one reads,
// waits meanwhile.
type heldWriteStore struct {
	CheckpointStore
	started chan struct{}
	release chan struct{}
}

type heldWriter struct {
	CheckpointWriter
	s    *heldWriteStore
	once bool
}

func (s *heldWriteStore) Create(ctx context.Context, id string) (CheckpointWriter, error) {
	w, err := s.CheckpointStore.Create(ctx, id)
	if err != nil {
		return nil, err
	}
	return &heldWriter{CheckpointWriter: w, s: s}, nil
}

func (w *heldWriter) Write(p []byte) (int, error) {
	if !w.once {
		w.once = true
		close(w.s.started)
		<-w.s.release
	}
	return w.CheckpointWriter.Write(p)
}

// testCheckpointOfStoppedTar: sandbox code that stops the checkpoint's tar
// (kill -STOP, as tar's own user) does not hold the checkpoint, nor the
// execution's commands behind it: the checkpoint ends with a conflict
// that says so. It waited for as long as its caller did. The tar is
// stopped while it waits on the gateway's read, the one moment a test can
// catch it at; a FIFO swapped in between its lstat and its open holds it
// alike (TestCheckpointOfHeldTarEnds).
func testCheckpointOfStoppedTar(t *testing.T) {
	cli, img := engine(t)
	local, err := NewLocalStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	store := &heldWriteStore{CheckpointStore: local, started: make(chan struct{}), release: make(chan struct{})}
	h := newTestHost(t, cli, &Config{Store: store})
	h.ws.exportIdle = 3 * time.Second
	ex := provision(t, h, emptyReq(img, small()))
	// More than the pipes between tar and the gateway hold.
	sh(t, h, ex.ExecutionID, `head -c 4194304 /dev/zero > /workspace/big`)

	ctx := testCtx(t, time.Minute)
	done := make(chan error, 1)
	go func() {
		_, err := h.Checkpoint(ctx, ex.ExecutionID, CheckpointRequest{})
		done <- err
	}()
	select {
	case <-store.started:
	case err := <-done:
		t.Fatalf("checkpoint ended before its first write: %v", err)
	}
	// As sandbox code would, from a process started before the
	// checkpoint; the execution's commands wait for the checkpoint.
	code, out, stderr := rawExec(t, cli, ex.ContainerID, userOfExec(t, h, ex.ExecutionID), []string{"/bin/sh", "-c",
		`n=0; for d in /proc/[0-9]*; do read -r c < $d/comm 2>/dev/null || continue; [ "$c" = tar ] || continue; kill -STOP ${d#/proc/} && n=$((n+1)); done; echo $n`}, nil)
	if code != 0 || out != "1\n" {
		t.Fatalf("stopping tar: exit %d, %q %q; want one tar stopped", code, out, stderr)
	}
	close(store.release)
	select {
	case err = <-done:
	case <-ctx.Done():
		t.Fatal("the checkpoint of a stopped tar waited until its caller gave up")
	}
	var e *Error
	if !asError(err, &e) || e.Code != CodeConflict || !strings.Contains(e.Message, "kill -STOP") {
		t.Fatalf("checkpoint of a stopped tar: %v, want a conflict saying tar was held", err)
	}
	if got := sh(t, h, ex.ExecutionID, "echo alive").Stdout; got != "alive\n" {
		t.Fatalf("the execution after: %q", got)
	}
}
