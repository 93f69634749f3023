package dockerhost

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/hostgate/hostgate/internal/deadline"
)

// deadlineToolConfig is a host config whose containers' PID 1 is the
// agent binary in its deadline mode, as the gateway's: built here
// statically (the test image has no libc), execute-only as the gateway
// writes it.
func deadlineToolConfig(t testing.TB) *Config {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "agent")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/hostgate/hostgate/cmd/agent")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the agent: %v\n%s", err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	return &Config{Tools: []Tool{{Name: "agent", Mode: 0o111, Data: data}}, DeadlineTool: "agent"}
}

// sandboxKills is what sandbox code, as the sandbox's uid, may do to
// every process it can signal, its PID 1 included: with the deadline a
// script under docker-init (its shell and sleep of the sandbox's uid)
// any of the first three ended the sandbox at once, and with the deadline
// tool of the sandbox's uid (deadlineByTool) kill -TERM 1 did, which
// PID 1 honours for docker stop. The signals to PID 1 are those that end
// or dump a Go program that does not handle them.
const sandboxKills = `kill -9 -1; killall sleep; killall -9 sleep; kill -9 1;
for s in TERM HUP INT QUIT ABRT SEGV BUS ILL FPE TRAP SYS USR1 USR2 PIPE ALRM TSTP TTIN TTOU XCPU VTALRM PROF; do
  kill -$s 1
done; kill -TERM -1; echo sent`

// sandboxStops is what kept the script's container past its deadline:
// its sleep stopped.
const sandboxStops = `kill -STOP -1; kill -STOP 1; kill -TSTP 1; echo stopped`

// pid1 is the command line of execution id's PID 1, spaces for NULs.
func pid1(t testing.TB, h *Docker, id string) string {
	t.Helper()
	return strings.TrimSpace(sh(t, h, id, `tr '\0' ' ' < /proc/1/cmdline`).Stdout)
}

// testDeadlineToolSurvivesSandbox: sandbox code that kills or stops every
// process it can neither ends its sandbox nor keeps it past its deadline,
// with no host left to enforce it (closed without reaping); SetTimeout
// still moves the deadline the container keeps itself.
func testDeadlineToolSurvivesSandbox(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, deadlineToolConfig(t))
	r := small()
	// Room for provisioning, the kills and the agent's replacement on a
	// loaded machine: at 15 s (load 14 on 2 cores) the runtime ran out at
	// the exec after the kills, at 30 s under load 21. It must still end
	// by itself within waitRemoved's minute after Close, below.
	r.RuntimeMs = 45_000

	killed := provision(t, h, emptyReq(img, r))
	if got, want := pid1(t, h, killed.ExecutionID), ToolsDir+"/agent __hostgate_deadline 45"; got != want {
		t.Fatalf("PID 1 %q, want %q", got, want)
	}
	if res := sh(t, h, killed.ExecutionID, sandboxKills); !strings.HasSuffix(res.Stdout, "sent\n") {
		t.Fatalf("kills: %+v", res)
	}
	if res, err := h.Exec(testCtx(t, time.Minute), killed.ExecutionID, ExecRequest{Command: "true", TimeoutMs: 10_000}); err != nil || res.ExitCode != 0 {
		t.Fatalf("a command after the sandbox killed every process it could: %+v %v, want the sandbox alive", res, err)
	}

	// /proc/1/environ is not readable (non-dumpable): PID 1 leaves a copy
	// of the environment every process of the container starts with, in
	// a directory of its own uid, which is not the sandbox's: sandbox code
	// can neither change the copy nor signal PID 1.
	if res := sh(t, h, killed.ExecutionID, `tr '\0' '\n' < /run/hostgate/environ; cat /proc/1/environ >/dev/null 2>&1 || echo unreadable`); !strings.Contains(res.Stdout, "\nHOME=/workspace\n") || !strings.HasSuffix(res.Stdout, "\nunreadable\n") {
		t.Fatalf("PID 1's environment copy: %+v", res)
	}
	res := sh(t, h, killed.ExecutionID, `u=$(id -u); set -- $(grep ^Uid: /proc/1/status); [ "$2" != "$u" ] && [ "$2" = "$(stat -c %u /run/hostgate/environ)" ] && echo "pid 1 not $u"
for w in 'echo X=1 >> /run/hostgate/environ' 'rm -f /run/hostgate/environ' 'mv /run/hostgate/environ /run/hostgate/x' 'echo X=1 > /run/hostgate/new' 'chmod 666 /run/hostgate/environ'; do sh -c "$w" 2>/dev/null && echo "sandbox did: $w"; done
tr '\0' '\n' < /run/hostgate/environ | grep -c '^X=' || true`)
	if want := "pid 1 not " + uidOf(t, h, killed.ExecutionID) + "\n0\n"; res.Stdout != want {
		t.Fatalf("PID 1's uid and its environment copy from the sandbox: %+v, want stdout %q", res, want)
	}

	// Room for provisioning and SetTimeout's exec on a loaded machine: at
	// 6 s the runtime ran out during SetTimeout in CI's -race stage (this
	// package's 8 engine tests beside e2e's, on 2 cores).
	const runtime = 20 * time.Second
	r.RuntimeMs = runtime.Milliseconds()
	stopped := provision(t, h, emptyReq(img, r))
	// Moved later, to 12 s past the provisioned runtime whenever
	// SetTimeout runs: the container keeps the new deadline, stopped or
	// not.
	moved, err := h.SetTimeout(testCtx(t, time.Minute), stopped.ExecutionID, time.Until(stopped.CreatedAt.Add(runtime+12*time.Second)).Milliseconds())
	if err != nil {
		t.Fatal(err)
	}
	if res := sh(t, h, stopped.ExecutionID, sandboxStops); !strings.HasSuffix(res.Stdout, "stopped\n") {
		t.Fatalf("stops: %+v", res)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	// Past the provisioned runtime as the container counts it (from its
	// creation, whole seconds, a second of slack), not past the moved one.
	past := time.NewTimer(time.Until(stopped.CreatedAt.Add(runtime + 2*time.Second)))
	<-past.C
	if moved.ExpiresAt.Before(time.Now().Add(time.Second)) {
		t.Fatalf("the moved deadline %v passed before the check (a loaded machine?)", moved.ExpiresAt)
	}
	c, err := cli.ContainerInspect(testCtx(t, time.Minute), stopped.ContainerID)
	if err != nil || !c.State.Running {
		t.Fatalf("container past its provisioned runtime, before its moved deadline: %+v %v, want running", c.State, err)
	}
	waitRemoved(t, cli, killed.ContainerID, time.Minute)
	waitRemoved(t, cli, stopped.ContainerID, time.Minute)
}

// testDeadlineToolPool: a warm container's PID 1 is the deadline tool
// waiting for its runtime on stdin; claimed, it keeps the claim's deadline
// against the sandbox's kills and stops, and ends by itself.
func testDeadlineToolPool(t *testing.T) {
	cli, img := engine(t)
	cfg := deadlineToolConfig(t)
	r := small()
	// Room for the claim and two commands on a loaded machine (CI's -race
	// stage runs this package's engine tests beside e2e's on 2 cores,
	// where 6 s and 20 s runtimes of its neighbours here ran out).
	r.RuntimeMs = 30_000
	req := emptyReq(img, r)
	cfg.Pool = &PoolConfig{Size: 1, Keys: []ProvisionRequest{req}}
	h := newTestHost(t, cli, cfg)
	waitPool(t, h, "a warm container", func(s PoolStats) bool { return s.Ready == 1 })
	ex := provision(t, h, req)
	if s := h.PoolStats(); s.Hits != 1 {
		t.Fatalf("want a pool hit, stats %+v", s)
	}
	if got, want := pid1(t, h, ex.ExecutionID), ToolsDir+"/agent __hostgate_deadline -"; got != want {
		t.Fatalf("PID 1 %q, want %q", got, want)
	}
	sh(t, h, ex.ExecutionID, sandboxKills)
	if res := sh(t, h, ex.ExecutionID, sandboxStops+"; echo alive"); !strings.HasSuffix(res.Stdout, "alive\n") {
		t.Fatalf("after the kills: %+v", res)
	}
	// An unclaimed container whose attachment closes (the gateway died)
	// ends: EOF before a runtime.
	waitPool(t, h, "a refill", func(s PoolStats) bool { return s.Ready == 1 })
	h.pool.mu.Lock()
	var warm *pooled
	for _, ks := range h.pool.keys {
		if len(ks.ready) > 0 {
			warm = ks.ready[0]
		}
	}
	h.pool.mu.Unlock()
	if warm == nil {
		t.Fatal("no warm container")
	}
	warm.hj.Close()
	waitRemoved(t, cli, warm.cid, time.Minute)
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	waitRemoved(t, cli, ex.ContainerID, time.Minute)
}

// testDeadlineToolReaps: the deadline tool, the container's init, reaps
// the orphans commands leave: none stays a zombie, counted against the
// pids limit. The orphans record their pids; each must leave /proc (a
// zombie keeps its entry until reaped).
func testDeadlineToolReaps(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, deadlineToolConfig(t))
	ex := provision(t, h, emptyReq(img, small()))
	res := sh(t, h, ex.ExecutionID, `cd /workspace || exit 1
for i in 1 2 3 4 5 6 7 8 9 10; do ( sh -c 'echo $$ >> pids' & ) ; done
i=0; until [ "$(wc -l < pids)" -eq 10 ]; do i=$((i+1)); [ $i -gt 400 ] && { echo orphans never ran; exit 1; }; sleep 0.05; done
for p in $(cat pids); do
  i=0; while [ -e /proc/$p ]; do i=$((i+1)); [ $i -gt 400 ] && { echo "orphan $p never reaped: $(grep State /proc/$p/status)"; exit 1; }; sleep 0.05; done
done; echo reaped`)
	if res.ExitCode != 0 || res.Stdout != "reaped\n" {
		t.Fatalf("orphans: %+v", res)
	}
}

// testDeadlineToolCheckpointRestore: a checkpoint of a container with the
// deadline tool restores into one with the tool again, workspace kept.
func testDeadlineToolCheckpointRestore(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, deadlineToolConfig(t))
	ex := provision(t, h, emptyReq(img, small()))
	sh(t, h, ex.ExecutionID, `echo kept > /workspace/file`)
	cp, err := h.Checkpoint(testCtx(t, time.Minute), ex.ExecutionID, CheckpointRequest{Reason: "deadline tool"})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Terminate(testCtx(t, time.Minute), ex.ExecutionID); err != nil {
		t.Fatal(err)
	}
	rex, err := h.Restore(testCtx(t, 2*time.Minute), RestoreRequest{CheckpointID: cp.CheckpointID})
	if err != nil {
		t.Fatal(err)
	}
	if got := sh(t, h, rex.ExecutionID, `cat /workspace/file`).Stdout; got != "kept\n" {
		t.Fatalf("restored workspace: %q", got)
	}
	if got, want := pid1(t, h, rex.ExecutionID), ToolsDir+"/agent __hostgate_deadline 120"; got != want {
		t.Fatalf("restored PID 1 %q, want %q", got, want)
	}
	c, err := cli.ContainerInspect(testCtx(t, time.Minute), rex.ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	if c.Config.Labels[LabelDeadline] != deadlineByInit || c.HostConfig.Init == nil || *c.HostConfig.Init {
		t.Fatalf("restored container: deadline label %q, init %v; want %q and no docker-init", c.Config.Labels[LabelDeadline], c.HostConfig.Init, deadlineByInit)
	}
}

// testSetTimeoutShmFull: sandbox code that fills its /dev/shm (every
// inode taken by empty files, made with builtins) keeps uid 0's mkdir of
// the deadline's directory there from succeeding. SetTimeout says so, a
// conflict naming the full /dev/shm; it answered that the execution had
// made the directory itself and that its deadline could not move, which
// the API caller took for good. Room made again, the deadline moves.
func testSetTimeoutShmFull(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	ex := provision(t, h, emptyReq(img, small()))
	ctx := testCtx(t, time.Minute)
	if res := sh(t, h, ex.ExecutionID, `cd /dev/shm || exit 1; i=0; while true 2>/dev/null > f$i; do i=$((i+1)); done; echo "$i files"`); !strings.HasSuffix(res.Stdout, " files\n") || strings.HasPrefix(res.Stdout, "0 ") {
		t.Fatalf("filling /dev/shm: %+v", res)
	}
	_, err := h.SetTimeout(ctx, ex.ExecutionID, small().RuntimeMs+60_000)
	var de *Error
	if !errors.As(err, &de) || de.Code != CodeConflict || strings.Contains(de.Message, "made") || !strings.Contains(de.Message, "No space left on device") {
		t.Fatalf("SetTimeout with /dev/shm full: %v, want a conflict saying /dev/shm has no room, not that the execution made the directory", err)
	}
	sh(t, h, ex.ExecutionID, `rm -f /dev/shm/f*`)
	if _, err := h.SetTimeout(ctx, ex.ExecutionID, small().RuntimeMs+60_000); err != nil {
		t.Fatalf("SetTimeout with room in /dev/shm again: %v", err)
	}
	if got := sh(t, h, ex.ExecutionID, `cat `+deadlineDir+`/extra`).Stdout; got == "" {
		t.Fatalf("no extension in %s/extra after SetTimeout", deadlineDir)
	}
}

// TestAdoptTellsDeadlineKindsApart: a container of either deadline kind
// this host makes is adopted as movable; a plain sleep's (no label) or an
// unknown kind's is not, since SetTimeout could not move it.
func TestAdoptTellsDeadlineKindsApart(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	spec, _ := json.Marshal(redact(validReq()))
	var list []container.Summary
	kinds := map[string]string{"script": deadlineByScript, "tool": deadlineByTool, "init": deadlineByInit, "sleep": "", "unknown": "9"}
	for id, kind := range kinds {
		labels := map[string]string{LabelExecution: id, LabelExpires: fmtUnix(now.Add(time.Hour)), LabelSpec: string(spec), LabelOwner: "gw", LabelUID: "200000000" + string(rune('1'+len(list)))}
		if kind != "" {
			labels[LabelDeadline] = kind
		}
		list = append(list, container.Summary{ID: "c-" + id, State: "running", Labels: labels})
	}
	h := fakeHost(t, &fakeDocker{list: list}, now)
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, want := range map[string]bool{"script": true, "tool": true, "init": true, "sleep": false, "unknown": false} {
		e := h.execs[id]
		if e == nil {
			t.Errorf("%s not adopted", id)
			continue
		}
		if e.movable != want {
			t.Errorf("%s (label %q) adopted movable=%v, want %v", id, kinds[id], e.movable, want)
		}
	}
}

// TestDeadlineToolMustBeATool: a DeadlineTool that Tools lacks (or cannot
// run) is refused at NewDocker, naming it.
func TestDeadlineToolMustBeATool(t *testing.T) {
	for _, tools := range [][]Tool{nil, {{Name: "agent", Mode: 0o644}}, {{Name: "other", Mode: 0o111}}} {
		_, err := NewDocker(testCtx(t, time.Minute), nil, &fakeDocker{}, &Config{CheckpointDir: t.TempDir(), Tools: tools, DeadlineTool: "agent"})
		if err == nil || !strings.Contains(err.Error(), `DeadlineTool "agent"`) {
			t.Errorf("tools %v: %v, want refused naming DeadlineTool", tools, err)
		}
	}
}

// testDeadlineToolForkBomb: sandbox code that holds every task it may (a
// fork bomb at its hard nproc limit, raised to it, whose orphans end, are
// reaped by PID 1 and replaced at once, until long-lived ones hold what
// the pids limit leaves) at the least pids limit neither ends the sandbox
// early nor keeps SetTimeout from moving its deadline, and the sandbox
// ends at the moved deadline with no host left to enforce it. PID 1 makes
// no thread under the bomb: one it made there, with no pid left, was
// fatal ("failed to create new OS thread") and ended the sandbox at once;
// without its spare threads it made one here, in the moment a failing
// fork left a pid free.
func testDeadlineToolForkBomb(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, deadlineToolConfig(t))
	r := small()
	r.Pids = 32
	// Room for provisioning, the bomb's rise and the sampling below on a
	// loaded machine: at 20 s the runtime ran out before SetTimeout in
	// CI's -race stage (this package's 8 engine tests beside e2e's, on
	// 2 cores).
	const runtime = 45 * time.Second
	r.RuntimeMs = runtime.Milliseconds()
	ex := provision(t, h, emptyReq(img, r))
	threads := func() string {
		t.Helper()
		c, err := cli.ContainerInspect(testCtx(t, time.Minute), ex.ContainerID)
		if err != nil || !c.State.Running {
			t.Fatalf("the container under the bomb: %+v %v, want running", c.State, err)
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(c.State.Pid) + "/status")
		if err != nil {
			t.Fatal(err)
		}
		_, v, _ := strings.Cut(string(b), "\nThreads:")
		v, _, _ = strings.Cut(v, "\n")
		return strings.TrimSpace(v)
	}
	before := threads()
	pid1, err := strconv.Atoi(before)
	if err != nil {
		t.Fatal(err)
	}
	// PID 1 caps its tasks at what the nproc ulimit leaves out for it: by
	// the kernel's word it never takes a pid kept for the agent. (Had it
	// needed more, it would have died making a thread: the sandbox ended.)
	c, err := cli.ContainerInspect(testCtx(t, time.Minute), ex.ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	limits, err := os.ReadFile("/proc/" + strconv.Itoa(c.State.Pid) + "/limits")
	if err != nil {
		t.Fatal(err)
	}
	if want := regexp.MustCompile(fmt.Sprintf(`(?m)^Max processes +%d +%d +processes`, h.policy.initTasks(), h.policy.initTasks())); !want.Match(limits) {
		t.Fatalf("PID 1's limits:\n%s\nwant Max processes %d, what the nproc ulimit leaves out for it", limits, h.policy.initTasks())
	}
	peak := pid1
	// Builtins only once the bomb runs: a fork that fails ends the shell.
	res := sh(t, h, ex.ExecutionID, `ulimit -u "$(ulimit -Hu)"
( i=0; while :; do (sleep 0.$RANDOM &); i=$((i+1)); [ $((i % 64)) = 0 ] && (sleep 1000 &); done ) >/dev/null 2>&1 </dev/null &
echo bombed`)
	if !strings.HasSuffix(res.Stdout, "bombed\n") {
		t.Fatalf("the bomb: %+v", res)
	}
	// The engine's cgroup of the container (cgroup v1, the cgroupfs
	// driver, as here), read from the host.
	current := "/sys/fs/cgroup/pids/docker/" + ex.ContainerID + "/pids.current"
	for i := 0; ; i++ {
		b, err := os.ReadFile(current)
		if err != nil {
			t.Logf("the bomb's tasks unknown: %v", err)
			break
		}
		// The sandbox's uid at its hard limit, 16, less what its forks
		// that are failing hold for a moment.
		if n, _ := strconv.Atoi(strings.TrimSpace(string(b))); n >= pid1+14 {
			t.Logf("tasks under the bomb: %d of 32", n)
			break
		}
		if i == 200 {
			t.Fatalf("the bomb holds %s tasks after 10 s, PID 1 %d of them; want %d or more", bytes.TrimSpace(b), pid1, pid1+14)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Reaping: the bomb's orphans end and PID 1 reaps them, for a while;
	// its threads sampled meanwhile.
	for until := time.Now().Add(3 * time.Second); time.Now().Before(until); time.Sleep(20 * time.Millisecond) {
		n, err := strconv.Atoi(threads())
		if err != nil {
			t.Fatal(err)
		}
		peak = max(peak, n)
	}
	t.Logf("PID 1's threads under the bomb: %d at most, of the %d it may hold", peak, h.policy.initTasks())
	// Moved to 10 s past the provisioned runtime whenever SetTimeout runs,
	// so that the check below, 2 s before the moved deadline, comes after
	// the provisioned one and its rounding.
	moved, err := h.SetTimeout(testCtx(t, time.Minute), ex.ExecutionID, time.Until(ex.CreatedAt.Add(runtime+10*time.Second)).Milliseconds())
	if err != nil {
		t.Fatalf("SetTimeout under the bomb: %v", err)
	}
	if after := threads(); after != before {
		t.Errorf("PID 1's threads: %s before the bomb, %s under it", before, after)
	}
	t.Logf("PID 1's threads: %s", before)
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	// Past the provisioned runtime, before the moved deadline: alive.
	if d := time.Until(moved.ExpiresAt.Add(-2 * time.Second)); d > 0 {
		time.Sleep(d)
	} else {
		t.Fatalf("the moved deadline %v passed before the check (a loaded machine?)", moved.ExpiresAt)
	}
	threads()
	// Then it ends by itself (its in-container deadline rounds up, by up
	// to 3 s). How late is read at its exit, not at its removal: on a
	// loaded machine AutoRemove's unmounts alone took seconds, which is
	// the engine's time, not the deadline's.
	ctx := testCtx(t, 45*time.Second)
	exitC, exitErrC := cli.ContainerWait(ctx, ex.ContainerID, container.WaitConditionNextExit)
	okC, errC := cli.ContainerWait(ctx, ex.ContainerID, container.WaitConditionRemoved)
	select {
	case <-exitC:
		// 3 s of rounding and the engine's word of the exit: with the
		// bomb running, that word came 6.3 s after the deadline once
		// under a load of 10 on 2 cores, 10.3 and 10.5 s under 13 and 21
		// (a whole -race suite beside helpers' tests); a deadline that was
		// not moved ends 7 s early or more (the check above), one not kept
		// never.
		late := time.Since(moved.ExpiresAt)
		if late > 20*time.Second {
			t.Errorf("the container ended %v after its moved deadline", late)
		}
		t.Logf("the container ended %v after its moved deadline", late)
	case err := <-exitErrC:
		// Gone before the wait began (already removed): the removal
		// wait below says whether it went in time.
		if !cerrdefs.IsNotFound(err) {
			t.Fatalf("waiting for the container's exit: %v", err)
		}
	}
	select {
	case <-okC:
	case err := <-errC:
		if !cerrdefs.IsNotFound(err) {
			t.Fatalf("container not removed 45 s after its moved deadline %v: %v", moved.ExpiresAt, err)
		}
	}
}

// testDeadlineToolAdoptsOldLayout: a container of the layout before PID 1
// had a uid of its own (hostgate.deadline=2: the container's user the
// sandbox's, no deadline.InitDir, the nproc ulimit at the pids limit),
// left by a gateway before an upgrade, is adopted and keeps working: its
// commands run as its uid, its environment copy is where such a PID 1
// leaves it, and SetTimeout moves its deadline.
func testDeadlineToolAdoptsOldLayout(t *testing.T) {
	cli, img := engine(t)
	owner := uniqueOwner()
	cfg := deadlineToolConfig(t)
	cfg.Owner = owner
	a := newTestHost(t, cli, cfg)
	ctx := testCtx(t, 2*time.Minute)
	uid, err := a.takeUID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := "old-layout-" + owner
	r := small()
	r.Pids = 32
	req := emptyReq(img, r)
	c, hc, err := a.policy.ContainerConfig(id, uid, req, time.Now().Add(2*time.Minute), map[string]string{LabelOwner: owner})
	if err != nil {
		t.Fatal(err)
	}
	c.User = userOf(uid)
	c.Labels[LabelDeadline] = deadlineByTool
	delete(hc.Tmpfs, deadline.InitDir)
	hc.Ulimits = []*container.Ulimit{{Name: "nproc", Soft: CommandTasks(32), Hard: 32}}
	cid, err := a.createStarted(ctx, c, hc, "hostgate-"+id, userOf(uid))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	cfg = deadlineToolConfig(t)
	cfg.Owner = owner
	b := newTestHost(t, cli, cfg)
	if got := b.List(); len(got) != 1 || got[0].ContainerID != cid {
		t.Fatalf("adopted %+v, want the old layout's container %s", got, cid)
	}
	res := sh(t, b, id, `id -u; set -- $(grep ^Uid: /proc/1/status); echo "$2"; tr '\0' '\n' < /dev/shm/.hostgate-environ | grep -c ^HOME=`)
	if want := fmt.Sprintf("%d\n%d\n1\n", uid, uid); res.Stdout != want {
		t.Fatalf("the adopted old layout: %+v, want stdout %q (its uid, PID 1's the same, its environment copy in /dev/shm)", res, want)
	}
	if _, err := b.SetTimeout(ctx, id, 90_000); err != nil {
		t.Fatalf("SetTimeout of the adopted old layout: %v", err)
	}
	if err := b.Terminate(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitRemoved(t, cli, cid, time.Minute)
}
