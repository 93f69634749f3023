package dockerhost

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
)

// fakeRunner is a CommandRunner whose Run a test scripts.
type fakeRunner func(ctx context.Context, c Command) (int, error)

func (f fakeRunner) Run(ctx context.Context, c Command) (int, error) { return f(ctx, c) }

// testExecVia: Exec runs commands through the CommandRunner SetExecVia
// gives, with Exec's own semantics around it: a runner that cannot start
// falls back to docker exec; its exit code and output are the result;
// 137 gets the OOM check; a checkpoint waits for it; its output overflow,
// a timeout and the caller leaving destroy the container with the usual
// codes; a terminate meanwhile answers gone.
func testExecVia(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	var (
		mu  sync.Mutex
		run fakeRunner
	)
	h.SetExecVia(func(string) CommandRunner {
		mu.Lock()
		defer mu.Unlock()
		if run == nil {
			return nil
		}
		return run
	})
	use := func(f fakeRunner) {
		mu.Lock()
		run = f
		mu.Unlock()
	}
	ex := provision(t, h, emptyReq(img, small()))
	ctx := testCtx(t, 2*time.Minute)
	exec := func(ctx context.Context, id string, req ExecRequest) (*ExecResult, error) {
		if req.TimeoutMs == 0 {
			req.TimeoutMs = 60_000
		}
		return h.Exec(ctx, id, req)
	}

	// Not started: docker exec runs it.
	use(func(context.Context, Command) (int, error) { return -1, ErrNotStarted })
	res, err := exec(ctx, ex.ExecutionID, ExecRequest{Command: "/bin/sh", Args: []string{"-c", "cat; echo $A"}, Env: map[string]string{"A": "1"}, Stdin: "in\n"})
	if err != nil || res.Stdout != "in\n1\n" {
		t.Fatalf("fallback: %+v %v", res, err)
	}
	if s := h.ExecStats(); s != (ExecStats{Docker: 1, Fallbacks: 1}) {
		t.Fatalf("stats after a fallback: %+v", s)
	}

	// The runner's result, and what it was given.
	var got Command
	var stdin string
	use(func(_ context.Context, c Command) (int, error) {
		got = c
		b, _ := io.ReadAll(c.Stdin)
		stdin = string(b)
		_, _ = io.WriteString(c.Stdout, "out")
		_, _ = io.WriteString(c.Stderr, "err")
		return 5, nil
	})
	res, err = exec(ctx, ex.ExecutionID, ExecRequest{Command: "x", Args: []string{"a b"}, Env: map[string]string{"A": "1"}, Stdin: "in"})
	if err != nil || res.ExitCode != 5 || res.Stdout != "out" || res.Stderr != "err" || res.OOMKilled {
		t.Fatalf("runner result: %+v %v", res, err)
	}
	if !slices.Equal(got.Argv, []string{"x", "a b"}) || got.Dir != WorkspaceDir || got.Env["A"] != "1" || stdin != "in" {
		t.Fatalf("runner got %+v stdin %q", got, stdin)
	}
	use(func(context.Context, Command) (int, error) { return 137, nil })
	if res, err := exec(ctx, ex.ExecutionID, ExecRequest{Command: "x"}); err != nil || res.ExitCode != 137 || res.OOMKilled {
		t.Fatalf("137 without an OOM kill: %+v %v", res, err)
	}
	if s := h.ExecStats(); s.Runner != 2 || s.Docker != 1 {
		t.Fatalf("stats: %+v", s)
	}

	// The runner lost a command it had started (one that killed the
	// agent): agent_lost, and the execution lives on.
	use(func(_ context.Context, c Command) (int, error) {
		_, _ = io.WriteString(c.Stdout, "partial")
		return -1, fmt.Errorf("agent tunnel: %w: %w", ErrRunnerLost, io.EOF)
	})
	res, err = exec(ctx, ex.ExecutionID, ExecRequest{Command: "x"})
	if ErrorCode(err) != CodeAgentLost || !strings.Contains(err.Error(), "later commands run as usual") {
		t.Fatalf("runner lost the command: %+v %v, want %s saying later commands run", res, err, CodeAgentLost)
	}
	// What it printed before the agent went is the caller's (README:
	// agent_lost's stdout and stderr hold the output so far).
	if out := cutOutput(err); out == nil {
		t.Fatalf("agent_lost carries no output: %v", err)
	} else if got, rerr := out.Stdout.String(); rerr != nil || got != "partial" {
		t.Fatalf("agent_lost's stdout: %q %v, want what the command printed (partial)", got, rerr)
	}
	use(func(context.Context, Command) (int, error) { return 0, nil })
	if res, err := exec(ctx, ex.ExecutionID, ExecRequest{Command: "x"}); err != nil || res.ExitCode != 0 {
		t.Fatalf("the next command after a lost one: %+v %v", res, err)
	}

	// A checkpoint waits for a running command.
	started, release := make(chan struct{}), make(chan struct{})
	var order []string
	var orderMu sync.Mutex
	note := func(s string) { orderMu.Lock(); order = append(order, s); orderMu.Unlock() }
	use(func(context.Context, Command) (int, error) {
		close(started)
		<-release
		note("command done")
		return 0, nil
	})
	execDone := make(chan error, 1)
	go func() { _, err := exec(ctx, ex.ExecutionID, ExecRequest{Command: "x"}); execDone <- err }()
	<-started
	cpDone := make(chan error, 1)
	go func() {
		_, err := h.Checkpoint(ctx, ex.ExecutionID, CheckpointRequest{Reason: "during exec"})
		note("checkpoint done")
		cpDone <- err
	}()
	e, _ := h.lookup(ctx, ex.ExecutionID)
	if err := e.lock.waitWriter(ctx); err != nil {
		t.Fatalf("the checkpoint never waited for the lock: %v", err)
	}
	// A command queued behind the checkpoint for its whole timeout does
	// not run, and says why; it used to wait for the checkpoint however
	// long it took. The execution lives on.
	// The checkpoint is not being taken: it waits for the command above,
	// and the caller is told so (it read "was taking a checkpoint ...:
	// try again, or give it a longer timeoutMs", which no timeout helps
	// while that command runs on).
	if res, err := exec(ctx, ex.ExecutionID, ExecRequest{Command: "x", TimeoutMs: 50}); ErrorCode(err) != CodeConflict || !strings.Contains(err.Error(), "waits for the 1 command running in it") {
		t.Fatalf("a command queued behind a checkpoint past its timeout: %+v %v, want conflict saying the checkpoint waits for the running command", res, err)
	}
	close(release)
	if err := <-execDone; err != nil {
		t.Fatal(err)
	}
	if err := <-cpDone; err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(order, []string{"command done", "checkpoint done"}) {
		t.Fatalf("order %q: the checkpoint did not wait for the command", order)
	}

	// Terminated while the command runs: gone, not the command's status.
	started = make(chan struct{})
	use(func(ctx context.Context, c Command) (int, error) {
		close(started)
		<-release // closed: returns at once, after the terminate below
		return 0, nil
	})
	release = make(chan struct{})
	go func() { _, err := exec(ctx, ex.ExecutionID, ExecRequest{Command: "x"}); execDone <- err }()
	<-started
	if err := h.Terminate(ctx, ex.ExecutionID); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-execDone; ErrorCode(err) != CodeGone {
		t.Fatalf("exec terminated meanwhile: %v, want gone", err)
	}

	// Output overflow, timeout and abort destroy the container.
	for _, tc := range []struct {
		name    string
		run     fakeRunner
		cancel  bool
		timeout int64
		code    string
	}{
		{"output", func(_ context.Context, c Command) (int, error) {
			_, err := c.Stdout.Write(make([]byte, small().MaxOutputBytes+1))
			return -1, err
		}, false, 60_000, CodeOutputLimit},
		{"timeout", func(ctx context.Context, c Command) (int, error) {
			<-ctx.Done()
			return -1, context.Cause(ctx)
		}, false, 300, CodeTimeout},
		{"abort", func(ctx context.Context, c Command) (int, error) {
			<-ctx.Done()
			return -1, context.Cause(ctx)
		}, true, 60_000, CodeAborted},
		// A runner that loses the command as the timeout ends it (its
		// connection torn down with it): the timeout, as ever.
		{"timeout, runner lost", func(ctx context.Context, c Command) (int, error) {
			<-ctx.Done()
			return -1, fmt.Errorf("agent tunnel: %w: %w", ErrRunnerLost, io.EOF)
		}, false, 300, CodeTimeout},
	} {
		ex := provision(t, h, emptyReq(img, small()))
		started := make(chan struct{})
		use(func(ctx context.Context, c Command) (int, error) { close(started); return tc.run(ctx, c) })
		cctx, cancel := context.WithCancel(ctx)
		go func() {
			<-started
			if tc.cancel {
				cancel()
			}
		}()
		_, err := exec(cctx, ex.ExecutionID, ExecRequest{Command: "x", TimeoutMs: tc.timeout})
		cancel()
		if ErrorCode(err) != tc.code {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
		waitRemoved(t, cli, ex.ContainerID, time.Minute)
		if _, err := h.Get(ctx, ex.ExecutionID); ErrorCode(err) != CodeGone {
			t.Errorf("%s: execution after: %v, want gone", tc.name, err)
		}
	}

	// The caller's server stopping cuts the command and keeps the
	// execution, for its next start to adopt.
	ex = provision(t, h, emptyReq(img, small()))
	started = make(chan struct{})
	use(func(ctx context.Context, c Command) (int, error) {
		close(started)
		<-ctx.Done()
		return -1, context.Cause(ctx)
	})
	cctx, cancel := context.WithCancelCause(ctx)
	go func() { <-started; cancel(fmt.Errorf("the gateway is shutting down: %w", ErrStopping)) }()
	_, err = exec(cctx, ex.ExecutionID, ExecRequest{Command: "x"})
	if ErrorCode(err) != CodeInterrupted || !strings.Contains(err.Error(), "kept") {
		t.Errorf("stopping: %v, want %s", err, CodeInterrupted)
	}
	use(func(context.Context, Command) (int, error) { return 0, nil })
	if res, err := exec(ctx, ex.ExecutionID, ExecRequest{Command: "x"}); err != nil || res.ExitCode != 0 {
		t.Errorf("a command after the interrupted one: %+v %v, want the execution kept", res, err)
	}

}

// countingAPI counts the exec creates of one argv, in all and per
// container.
type countingAPI struct {
	DockerAPI
	argv []string
	mu   sync.Mutex
	n    int
	in   map[string]int
}

func (c *countingAPI) ContainerExecCreate(ctx context.Context, cid string, o container.ExecOptions) (container.ExecCreateResponse, error) {
	if len(o.Cmd) >= len(c.argv) && slices.Equal(o.Cmd[len(o.Cmd)-len(c.argv):], c.argv) {
		c.mu.Lock()
		c.n++
		if c.in == nil {
			c.in = map[string]int{}
		}
		c.in[cid]++
		c.mu.Unlock()
	}
	return c.DockerAPI.ContainerExecCreate(ctx, cid, o)
}

func (c *countingAPI) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// countIn is count in container cid alone: a refill's warm container,
// which pre-starts its agent while the test runs, is not counted.
func (c *countingAPI) countIn(cid string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.in[cid]
}

// testPoolAgent: with PoolConfig.Agent, each warm container holds that
// command started ahead; the claiming execution's first AttachStdio gets
// it (no exec create after the claim), a second one starts a fresh one
// (never shared), and a provision env the agent would read gets a fresh
// one too. Close leaves no container (goleak checks the goroutines).
func testPoolAgent(t *testing.T) {
	cli, img := engine(t)
	argv := helloArgv
	req := emptyReq(img, small())
	h, api := countingHost(t, cli, &Config{CheckpointDir: t.TempDir(),
		Pool: &PoolConfig{Size: 1, Keys: []ProvisionRequest{req}, Agent: argv, RefillDelay: -1}})
	ctx := testCtx(t, 2*time.Minute)
	talk := func(id string) string { t.Helper(); return talkTo(ctx, t, h, id, argv) }

	waitPool(t, h, "a warm container", func(s PoolStats) bool { return s.Ready == 1 })
	if n := api.count(); n != 1 {
		t.Fatalf("agent started %d times for one warm container", n)
	}
	req.Env = map[string]string{"GREETING": "hello"}
	ex := provision(t, h, req)
	// The pre-started agent has no provision env (it only reads LANG,
	// LC_ALL, TZ and HOSTGATE_* from its own), and needs no exec create.
	// Counted in the claimed container: the pool's refill pre-starts an
	// agent in a new one meanwhile (once in .ci/run, a third create).
	if got := talk(ex.ExecutionID); got != "got hi \n" || api.countIn(ex.ContainerID) != 1 {
		t.Fatalf("first attach: %q, %d exec creates; want the pre-started agent", got, api.countIn(ex.ContainerID))
	}
	if got := talk(ex.ExecutionID); got != "got hi hello\n" || api.countIn(ex.ContainerID) != 2 {
		t.Fatalf("second attach: %q, %d exec creates; want a fresh one with the provision env", got, api.countIn(ex.ContainerID))
	}

	waitPool(t, h, "a refill", func(s PoolStats) bool { return s.Ready == 1 })
	req.Env = map[string]string{"TZ": "UTC", "GREETING": "tz"}
	ex = provision(t, h, req)
	if s := h.PoolStats(); s.Hits != 2 {
		t.Fatalf("pool stats %+v, want 2 hits", s)
	}
	n := api.countIn(ex.ContainerID) // its warm agent's
	if got := talk(ex.ExecutionID); got != "got hi tz\n" || api.countIn(ex.ContainerID) != n+1 {
		t.Fatalf("attach with TZ in the env: %q, %d exec creates; want a fresh agent", got, api.countIn(ex.ContainerID)-n)
	}

	waitPool(t, h, "a refill", func(s PoolStats) bool { return s.Ready == 1 })
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	// The claimed ones are executions and live on; no warm one is left.
	for _, c := range poolContainers(t, cli, h.owner) {
		if _, claimed := claimedPooled(c); !claimed {
			t.Fatalf("unclaimed pooled container left after Close: %v", c.Names)
		}
	}
}

// helloArgv stands for a pre-started agent: it reads a line and answers
// one, with $GREETING (a provision env it sees or not).
var helloArgv = []string{"/bin/sh", "-c", `read -r x && echo "got $x $GREETING"`}

// countingHost is a host of cfg under an owner of its own, its engine
// calls counting the exec creates of helloArgv, reaped at cleanup.
func countingHost(t *testing.T, cli *client.Client, cfg *Config) (*Docker, *countingAPI) {
	t.Helper()
	api := &countingAPI{DockerAPI: cli, argv: helloArgv}
	cfg.Owner = uniqueOwner()
	h, err := NewDocker(testCtx(t, time.Minute), slog.New(slog.DiscardHandler), api, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.Close()
		reapOwner(t, cli, cfg.Owner)
	})
	return h, api
}

// talkTo attaches argv (a script that reads a line and answers one) in
// execution id, says hi and returns the answer.
func talkTo(ctx context.Context, t *testing.T, h *Docker, id string, argv []string) string {
	t.Helper()
	s, err := h.AttachStdio(ctx, id, argv, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := io.WriteString(s, "hi\n"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(s).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return line
}

// testLoadAgent: with Config.LoadAgent, a restore's new container starts
// that command while its tar unpacks. The execution's first AttachStdio
// gets it, with no exec create after the restore, and it has the
// container's env (the restore's); a second attach starts a fresh one. A
// provision with nothing to load starts none ahead, and a restore whose
// tar fails its check leaves no container (goleak checks that the early
// one's goroutines ended with it).
func testLoadAgent(t *testing.T) {
	cli, img := engine(t)
	argv := helloArgv
	dir := t.TempDir()
	h, api := countingHost(t, cli, &Config{CheckpointDir: dir, LoadAgent: argv})
	ctx := testCtx(t, 2*time.Minute)
	talk := func(id string) string { t.Helper(); return talkTo(ctx, t, h, id, argv) }

	ex := provision(t, h, emptyReq(img, small()))
	if n := api.countIn(ex.ContainerID); n != 0 {
		t.Fatalf("a provision with nothing to load started the agent %d times", n)
	}
	sh(t, h, ex.ExecutionID, `echo kept > /workspace/f`)
	cp, err := h.Checkpoint(ctx, ex.ExecutionID, CheckpointRequest{})
	if err != nil {
		t.Fatal(err)
	}
	rex, err := h.Restore(ctx, RestoreRequest{CheckpointID: cp.CheckpointID, Env: map[string]string{"GREETING": "hello"}})
	if err != nil {
		t.Fatal(err)
	}
	if n := api.countIn(rex.ContainerID); n != 1 {
		t.Fatalf("the agent started %d times by the restore's answer, want once (during its load)", n)
	}
	if got := talk(rex.ExecutionID); got != "got hi hello\n" || api.countIn(rex.ContainerID) != 1 {
		t.Fatalf("first attach: %q, %d exec creates; want the agent started during the load, with the restore's env", got, api.countIn(rex.ContainerID))
	}
	if got := talk(rex.ExecutionID); got != "got hi hello\n" || api.countIn(rex.ContainerID) != 2 {
		t.Fatalf("second attach: %q, %d exec creates; want a fresh one", got, api.countIn(rex.ContainerID))
	}
	if got := sh(t, h, rex.ExecutionID, `cat /workspace/f`).Stdout; got != "kept\n" {
		t.Fatalf("the restored workspace: %q", got)
	}

	tamper(t, filepath.Join(dir, cp.CheckpointID+".tar"), "kept\n")
	before := api.count()
	if _, err := h.Restore(ctx, RestoreRequest{CheckpointID: cp.CheckpointID}); ErrorCode(err) != CodeInvalidRequest {
		t.Fatalf("tampered restore: %v, want invalid_request", err)
	}
	if api.count() != before+1 {
		t.Fatalf("the tampered restore started the agent %d times, want once", api.count()-before)
	}
	for _, c := range ownerContainers(t, cli, h) {
		if c.ID != ex.ContainerID && c.ID != rex.ContainerID {
			waitRemoved(t, cli, c.ID, time.Minute)
		}
	}
}

// TestHandoffWriter: a pre-started command's stderr goes where its
// claimer says, from then on.
func TestHandoffWriter(t *testing.T) {
	var a, b strings.Builder
	w := &handoffWriter{w: &a}
	_, _ = w.Write([]byte("1"))
	w.set(&b)
	_, _ = w.Write([]byte("2"))
	if a.String() != "1" || b.String() != "2" {
		t.Fatalf("a %q b %q", a.String(), b.String())
	}
	if _, err := (&handoffWriter{w: errWriter{}}).Write([]byte("x")); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("error not passed on: %v", err)
	}
}

type errWriter struct{}

func (errWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

// TestInterruptedThroughRunnerClaimsNoLiveProcess: a command the agent ran
// (a CommandRunner) that a gateway stop cuts ends with its SSH channel,
// so its interrupted message does not say a docker exec process may still
// run; it said "(one docker exec ran may still be running)" whichever way
// the command had run (found by the README audit, where the agent had
// ended the command).
func TestInterruptedThroughRunnerClaimsNoLiveProcess(t *testing.T) {
	ctx, stop := stopping(t)
	started := make(chan struct{})
	via := fakeRunner(func(ctx context.Context, c Command) (int, error) {
		close(started)
		<-ctx.Done()
		return -1, context.Cause(ctx)
	})
	go func() { <-started; stop() }()
	_, way, err := (&ProcessRunner{}).exec(ctx, "c1", "65534:65534", ExecRequest{Command: "sleep", Args: []string{"30"}, TimeoutMs: 60000}, 1<<20, via, nil, nil)
	if way != wayRunner || ErrorCode(err) != CodeInterrupted {
		t.Fatalf("exec cut by a stop: way %d, %v; want the runner's way and %s", way, err, CodeInterrupted)
	}
	if msg := err.Error(); strings.Contains(msg, "docker exec") || !strings.Contains(msg, "kept") {
		t.Errorf("interrupted through the agent: %q, want the execution kept and no docker exec process", msg)
	}
}

// silentInspect is an engine that stops answering inspects when silent
// is set, as a stopping engine does.
type silentInspect struct {
	DockerAPI
	silent atomic.Bool
}

func (s *silentInspect) ContainerInspect(ctx context.Context, id string) (container.InspectResponse, error) {
	if s.silent.Load() {
		return container.InspectResponse{}, errors.New("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?")
	}
	return s.DockerAPI.ContainerInspect(ctx, id)
}

// TestExecViaEngineSilent: a command whose agent is lost while the engine
// does not answer is answered agent_lost saying so, not "later commands
// run as usual": found by stopping dockerd under a command, whose
// container went with it. A test of its own, not one of TestEngine's: it
// shortens containerGoneWait for the package, which TestEngine's
// concurrent tests read (ExecVia's lost command, given 100 ms to hear
// from a loaded engine, was told the engine had not answered; -race
// reported the write).
func TestExecViaEngineSilent(t *testing.T) {
	old := containerGoneWait
	containerGoneWait = 100 * time.Millisecond
	t.Cleanup(func() { containerGoneWait = old })
	cli, img := engine(t)
	api := &silentInspect{DockerAPI: cli}
	owner := uniqueOwner()
	h, err := NewDocker(testCtx(t, time.Minute), slog.New(slog.DiscardHandler), api, &Config{Owner: owner, CheckpointDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close(); reapOwner(t, cli, owner) })
	h.SetExecVia(func(string) CommandRunner {
		return fakeRunner(func(context.Context, Command) (int, error) {
			api.silent.Store(true)
			return -1, fmt.Errorf("agent tunnel: %w: %w", ErrRunnerLost, io.EOF)
		})
	})
	ex := provision(t, h, emptyReq(img, small()))
	_, err = h.Exec(testCtx(t, time.Minute), ex.ExecutionID, ExecRequest{Command: "x", TimeoutMs: 60_000})
	if ErrorCode(err) != CodeAgentLost || strings.Contains(err.Error(), "later commands run") || !strings.Contains(err.Error(), "Docker engine has not answered") {
		t.Fatalf("agent lost while the engine is silent: %v, want %s saying the engine did not answer", err, CodeAgentLost)
	}
	api.silent.Store(false)
}

// TestTimeoutOutputSealed: a runner's copiers may write a moment after its
// Run returned (the agent tunnel's return as the timeout ends the
// command, with output still in flight). The output a timeout's error
// carries is fixed once exec returns: reading it races no write (-race),
// later writes are refused, and it reads the same twice.
func TestTimeoutOutputSealed(t *testing.T) {
	late := make(chan error, 1)
	returned := make(chan struct{})
	via := fakeRunner(func(ctx context.Context, c Command) (int, error) {
		_, _ = io.WriteString(c.Stdout, "before\n")
		<-ctx.Done()
		go func() {
			// Writes racing exec's return (for -race), then one
			// surely after it: 1000 racing ones could all land
			// before it on a loaded machine (CI).
			var err error
			for i := 0; i < 1000 && err == nil; i++ {
				_, err = io.WriteString(c.Stdout, "late\n")
			}
			<-returned
			_, err = io.WriteString(c.Stdout, "late\n")
			late <- err
		}()
		return -1, context.Cause(ctx)
	})
	r := &ProcessRunner{destroy: func(string) error { return nil }}
	_, _, err := r.exec(context.Background(), "c1", "65534:65534", ExecRequest{Command: "x", TimeoutMs: 50}, 1<<20, via, nil, nil)
	close(returned)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeTimeout || e.Output == nil {
		t.Fatalf("exec past its timeout: %v, want timeout with its output", err)
	}
	defer func() { _ = e.Output.Close() }()
	first, rerr := e.Output.Stdout.String()
	if rerr != nil || !strings.HasPrefix(first, "before\n") {
		t.Fatalf("timeout's stdout: %q %v, want it to begin with before\\n", first, rerr)
	}
	if werr := <-late; !errors.Is(werr, errOutputSealed) {
		t.Fatalf("a write after exec returned: %v, want %v", werr, errOutputSealed)
	}
	if again, _ := e.Output.Stdout.String(); again != first {
		t.Fatalf("timeout's stdout changed after exec returned: %q, then %q", first, again)
	}
}
