package dockerhost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
)

func fields(t *testing.T, s string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

func num(t *testing.T, m map[string]string, k string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(m[k], 64)
	if err != nil {
		t.Fatalf("%s: %v (output %v)", k, err, m)
	}
	return v
}

// A busy loop is held to the CFS quota: the cgroup's quota/period is the
// limit and the loop uses at most about cpus × wall time. Only an upper
// bound is asserted; a loaded machine can only give the loop less.
func testLimitCPU(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	r := small()
	r.CPUs = 0.2
	ex := provision(t, h, emptyReq(img, r))
	res := sh(t, h, ex.ExecutionID, `
cg=/sys/fs/cgroup/cpu; acct=/sys/fs/cgroup/cpuacct
read u0 < $acct/cpuacct.usage; read t0 rest < /proc/uptime
timeout 2 sh -c 'while :; do :; done'
read u1 < $acct/cpuacct.usage; read t1 rest < /proc/uptime
echo usage=$((u1-u0)); echo wall0=$t0; echo wall1=$t1
echo quota=$(cat $cg/cpu.cfs_quota_us); echo period=$(cat $cg/cpu.cfs_period_us)
grep nr_throttled $cg/cpu.stat | tr ' ' =`)
	m := fields(t, res.Stdout)
	if q, p := num(t, m, "quota"), num(t, m, "period"); q/p != 0.2 {
		t.Fatalf("cfs quota/period = %v/%v, want 0.2", q, p)
	}
	used := num(t, m, "usage") / 1e9
	wall := num(t, m, "wall1") - num(t, m, "wall0")
	if used > 0.2*wall*1.5+0.05 {
		t.Errorf("busy loop used %.2fs CPU in %.2fs wall; the 0.2 CPU limit allows about %.2fs", used, wall, 0.2*wall)
	}
	// Throttling is logged, not asserted: on a loaded machine the loop may
	// never get enough CPU to reach its quota.
	t.Logf("busy loop: %.2fs CPU in %.2fs wall (limit 0.2 CPU), throttled periods %s", used, wall, m["nr_throttled"])
}

// A memory bomb is OOM-killed inside the memory limit and reported.
func testLimitMemory(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	r := small()
	r.MemoryBytes = 32 << 20
	ex := provision(t, h, emptyReq(img, r))
	res := sh(t, h, ex.ExecutionID, `x=aaaaaaaa; while :; do x=$x$x; done`)
	if res.ExitCode != 137 || !res.OOMKilled {
		t.Fatalf("memory bomb: exit %d oomKilled %v, want 137 and true (stderr %q)", res.ExitCode, res.OOMKilled, res.Stderr)
	}
	// The execution survives its command's OOM kill.
	if res := sh(t, h, ex.ExecutionID, "echo alive"); res.Stdout != "alive\n" {
		t.Fatalf("after the OOM kill: %q", res.Stdout)
	}
}

// Filling the disk gets ENOSPC inside at diskBytes; the execution and the
// host go on.
func testLimitDisk(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	r := small()
	r.DiskBytes = 4 << 20
	ex := provision(t, h, emptyReq(img, r))
	res := sh(t, h, ex.ExecutionID, `dd if=/dev/zero of=/workspace/big bs=1M count=64 2>&1; echo rc=$?; echo size=$(stat -c %s /workspace/big)`)
	m := fields(t, res.Stdout)
	if !strings.Contains(res.Stdout, "No space left on device") || m["rc"] == "0" {
		t.Fatalf("disk fill did not hit ENOSPC: %s", res.Stdout)
	}
	if size := num(t, m, "size"); size > 4<<20 {
		t.Fatalf("wrote %v bytes past the 4 MiB disk limit", size)
	}
	if res := sh(t, h, ex.ExecutionID, "rm /workspace/big && echo ok"); res.Stdout != "ok\n" {
		t.Fatalf("after the fill: %q %q", res.Stdout, res.Stderr)
	}
}

// provisionOverMemory provisions an execution whose diskBytes is over its
// memoryBytes, as the seed's own example asks.
func provisionOverMemory(t *testing.T) (*Docker, *Execution, Resources) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	r := small()
	r.MemoryBytes, r.DiskBytes = 48<<20, 256<<20
	return h, provision(t, h, emptyReq(img, r)), r
}

// A workspace asked larger than memory is held under the memory limit (a
// tmpfs is memory): filling it gets ENOSPC, not an OOM kill, and the
// execution goes on. Without the bound dd was killed (137) with the
// cgroup full, and so was every command after it. /dev/shm, another
// tmpfs, is held to the same bound.
func testLimitDiskOverMemory(t *testing.T) {
	h, ex, r := provisionOverMemory(t)
	if ex.WorkspaceBytes != WorkspaceSize(r) || ex.WorkspaceBytes >= r.DiskBytes {
		t.Fatalf("workspaceBytes %d, want the size applied, %d (diskBytes %d)", ex.WorkspaceBytes, WorkspaceSize(r), r.DiskBytes)
	}
	res := sh(t, h, ex.ExecutionID, `dd if=/dev/zero of=/workspace/big bs=1M count=100 2>&1; echo rc=$?; echo size=$(stat -c %s /workspace/big)
dd if=/dev/zero of=/dev/shm/big bs=1M count=100 2>&1; echo shmrc=$?; echo shm=$(stat -c %s /dev/shm/big)`)
	if res.ExitCode != 0 || res.OOMKilled {
		t.Fatalf("filling the workspace: exit %d, oomKilled %v: %s", res.ExitCode, res.OOMKilled, res.Stdout)
	}
	m := fields(t, res.Stdout)
	if !strings.Contains(res.Stdout, "No space left on device") || m["rc"] == "0" || m["shmrc"] == "0" {
		t.Fatalf("disk fill did not hit ENOSPC: %s", res.Stdout)
	}
	if size, want := num(t, m, "size"), float64(WorkspaceSize(r)); size > want {
		t.Fatalf("wrote %v bytes to /workspace past its %v", size, want)
	}
	if size := num(t, m, "shm"); size > float64(WorkspaceSize(r)) {
		t.Fatalf("wrote %v bytes to /dev/shm past the workspace's bound", size)
	}
	if res := sh(t, h, ex.ExecutionID, "rm /workspace/big /dev/shm/big && echo ok"); res.Stdout != "ok\n" {
		t.Fatalf("after the fill: exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
}

// The caller's environment is the container's, PATH included: a PATH
// without sleep must not keep the main process from starting. Their
// directories are searched first.
func testProvisionForeignPath(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	req := emptyReq(img, small())
	req.Env = map[string]string{"PATH": "/nowhere"}
	ex := provision(t, h, req)
	res, err := h.Exec(testCtx(t, time.Minute), ex.ExecutionID, ExecRequest{Command: "/bin/sh", Args: []string{"-c", "echo $PATH"}, TimeoutMs: 30_000})
	if err != nil || res.Stdout != "/nowhere:"+defaultPath+"\n" {
		t.Fatalf("exec with the caller's PATH: %v %+v", err, res)
	}
}

// A fork loop stops short of the pids limit: forks fail at the
// container's nproc ulimit, which leaves the agent's headroom free, and
// the cgroup never holds more than the limit.
func testLimitPids(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	r := small()
	r.Pids = 32
	ex := provision(t, h, emptyReq(img, r))
	// Builtins only after the loop: no fork is left to run cat.
	res := sh(t, h, ex.ExecutionID, `
# busybox sh exits on a failed fork: loop in a subshell.
( i=0; while [ $i -lt 100 ]; do sleep 600 & i=$((i+1)); done )
read cur < /sys/fs/cgroup/pids/pids.current; read max < /sys/fs/cgroup/pids/pids.max
read failed < /sys/fs/cgroup/pids/pids.events
echo cur=$cur; echo max=$max; echo events=$failed`)
	m := fields(t, res.Stdout)
	if m["max"] != "32" || num(t, m, "cur") > float64(CommandTasks(32)) {
		t.Fatalf("pids: %s; want at most %d held", res.Stdout, CommandTasks(32))
	}
	if !strings.Contains(res.Stderr, "can't fork") {
		t.Errorf("stderr lacks the fork failure: %q", res.Stderr)
	}
	// The ulimit stopped the loop, not the cgroup (events counts the
	// forks the cgroup refused), but the cgroup stays the bound: see
	// TestSandboxPidsLimitKeepsAgent for the agent's side.
	if m["events"] == "" {
		t.Fatalf("pids.events unread: %s", res.Stdout)
	}
}

// An output flood stops at maxOutputBytes, and the execution is destroyed.
func testLimitOutput(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	r := small()
	r.MaxOutputBytes = 64 << 10
	ex := provision(t, h, emptyReq(img, r))
	// Exactly at the limit is fine, split over both streams.
	res := sh(t, h, ex.ExecutionID, `head -c 32768 /dev/zero; head -c 32768 /dev/zero >&2`)
	if len(res.Stdout)+len(res.Stderr) != 64<<10 {
		t.Fatalf("at the limit: got %d+%d bytes", len(res.Stdout), len(res.Stderr))
	}
	_, err := h.Exec(testCtx(t, time.Minute), ex.ExecutionID, ExecRequest{Command: "yes", TimeoutMs: 60_000})
	if ErrorCode(err) != CodeOutputLimit {
		t.Fatalf("flood: %v, want output_limit", err)
	}
	// The error carries what was kept: the limit's worth of "y\n".
	if got, want := errOutput(t, err), strings.Repeat("y\n", 32<<10); got[0] != want || got[1] != "" {
		t.Fatalf("flood's output in its error: stdout %d bytes (%.20q…), stderr %q; want the %d bytes kept", len(got[0]), got[0], got[1], len(want))
	}
	waitRemoved(t, cli, ex.ContainerID, time.Minute)
	if _, err := h.Exec(testCtx(t, time.Minute), ex.ExecutionID, ExecRequest{Command: "true", TimeoutMs: 1000}); ErrorCode(err) != CodeGone {
		t.Fatalf("exec after the flood: %v, want gone", err)
	}
}

func testTimeoutDestroys(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	ex := provision(t, h, emptyReq(img, small()))
	_, err := h.Exec(testCtx(t, time.Minute), ex.ExecutionID, ExecRequest{Command: "sleep", Args: []string{"600"}, TimeoutMs: 500})
	if ErrorCode(err) != CodeTimeout {
		t.Fatalf("got %v, want timeout", err)
	}
	waitRemoved(t, cli, ex.ContainerID, time.Minute)
}

// A command cut by its timeout loses nothing it printed: the error
// carries it (the last lines of a test run that hung), and the execution
// is destroyed all the same.
func testTimeoutKeepsOutput(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	ex := provision(t, h, emptyReq(img, small()))
	_, err := h.Exec(testCtx(t, time.Minute), ex.ExecutionID, ExecRequest{Command: "/bin/sh", Args: []string{"-c", "echo before; echo warned >&2; sleep 100"}, TimeoutMs: 5000})
	if ErrorCode(err) != CodeTimeout {
		t.Fatalf("got %v, want timeout", err)
	}
	if got := errOutput(t, err); got != [2]string{"before\n", "warned\n"} {
		t.Fatalf("timeout's output in its error: stdout %q, stderr %q; want \"before\\n\", \"warned\\n\"", got[0], got[1])
	}
	waitRemoved(t, cli, ex.ContainerID, time.Minute)
}

// A command that exits without reading all its stdin, more than a pipe
// holds, has ended: docker exec answers its exit code at once, as the
// agent tunnel does, and its stdin is no reason to time it out. The
// stdin copy waited stdinGrace (5 s) for the engine, which reads no more
// of it, so such a command with a timeoutMs under that answered timeout
// and its execution was destroyed.
func testUnreadStdinIsNoTimeout(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	ex := provision(t, h, emptyReq(img, small()))
	stdin := strings.Repeat("x", 4<<20)
	for _, script := range []string{"true", "head -c 1 >/dev/null; echo read one"} {
		t0 := time.Now()
		res, err := h.Exec(testCtx(t, time.Minute), ex.ExecutionID, ExecRequest{Command: "/bin/sh", Args: []string{"-c", script}, Stdin: stdin, TimeoutMs: 3000})
		if err != nil {
			t.Fatalf("%q with 4 MiB of stdin it leaves unread, timeoutMs 3000: %v after %v, want its exit code", script, err, time.Since(t0))
		}
		if want := strings.TrimPrefix(script, "head -c 1 >/dev/null; echo "); res.ExitCode != 0 || (script != "true" && res.Stdout != want+"\n") {
			t.Fatalf("%q: %+v", script, res)
		}
	}
	// Stdin a command does read still reaches it whole, even after the
	// command closed its output.
	res, err := h.Exec(testCtx(t, time.Minute), ex.ExecutionID, ExecRequest{Command: "/bin/sh", Args: []string{"-c", "exec >/dev/null 2>&1; cat > f"}, Stdin: stdin, TimeoutMs: 30_000})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("cat > f: %v %+v", err, res)
	}
	if got := sh(t, h, ex.ExecutionID, "wc -c < f").Stdout; strings.TrimSpace(got) != "4194304" {
		t.Fatalf("cat > f wrote %q bytes, want 4194304", got)
	}
}

// errOutput is the stdout and stderr err's *Error carries.
func errOutput(t *testing.T, err error) [2]string {
	t.Helper()
	var e *Error
	if !asError(err, &e) || e.Output == nil {
		t.Fatalf("%v: carries no output", err)
	}
	defer func() { _ = e.Output.Close() }()
	var got [2]string
	for i, o := range []*Output{e.Output.Stdout, e.Output.Stderr} {
		s, rerr := o.String()
		if rerr != nil {
			t.Fatal(rerr)
		}
		got[i] = s
	}
	return got
}

func testAbortDestroys(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	ex := provision(t, h, emptyReq(img, small()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := h.Exec(ctx, ex.ExecutionID, ExecRequest{Command: "sleep", Args: []string{"600"}, TimeoutMs: 600_000})
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeAborted || !strings.HasPrefix(e.Message, "the caller went away") {
		t.Fatalf("got %v, want aborted as the caller going away", err)
	}
	waitRemoved(t, cli, ex.ContainerID, time.Minute)
	if _, err := h.Get(testCtx(t, time.Minute), ex.ExecutionID); ErrorCode(err) != CodeGone {
		t.Fatalf("get after abort: %v, want gone", err)
	}
	// A request its server ends with a cause (the gateway stopping) says
	// that cause, not that the caller left.
	ex = provision(t, h, emptyReq(img, small()))
	cctx, stop := context.WithCancelCause(context.Background())
	time.AfterFunc(time.Second, func() { stop(errors.New("the gateway is shutting down")) })
	_, err = h.Exec(cctx, ex.ExecutionID, ExecRequest{Command: "sleep", Args: []string{"600"}, TimeoutMs: 600_000})
	if !errors.As(err, &e) || e.Code != CodeAborted || !strings.HasPrefix(e.Message, "the gateway is shutting down") {
		t.Fatalf("got %v, want aborted with the server's cause", err)
	}
}

// The runtime deadline ends the container with no host process left: the
// host is dropped without Terminate (as if the gateway were killed) and the
// in-container sleep plus AutoRemove still remove it.
func testRuntimeDeadlineWithoutHost(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	r := small()
	r.RuntimeMs = 5000 // room for provisioning on a loaded machine
	ex := provision(t, h, emptyReq(img, r))
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	waitRemoved(t, cli, ex.ContainerID, time.Minute)
}

// With the host alive, its own deadline ends the execution too.
func testRuntimeDeadlineHost(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	r := small()
	// Room for provisioning on a loaded machine: under CI's parallel
	// packages with -race a provision once took the whole of 5 s, so the
	// command below found the execution ended before it could start.
	r.RuntimeMs = 12000
	ex := provision(t, h, emptyReq(img, r))
	if ex.ExpiresAt.Sub(ex.CreatedAt) != 12*time.Second {
		t.Fatalf("expiresAt %v - createdAt %v != 12s", ex.ExpiresAt, ex.CreatedAt)
	}
	if left := time.Until(ex.ExpiresAt); left < time.Second {
		t.Fatalf("provisioning took all but %v of the execution's 12 s runtime: the command cannot start before its deadline on a machine this loaded", left)
	}
	// A command the deadline cuts says that is what ended it, not just
	// "has ended" (as after a DELETE).
	_, err := h.Exec(testCtx(t, time.Minute), ex.ExecutionID, ExecRequest{Command: "sleep", Args: []string{"60"}, TimeoutMs: 60_000})
	if ErrorCode(err) != CodeGone || !strings.Contains(err.Error(), "runtime") {
		t.Errorf("a command cut by the runtime deadline: %v, want gone naming the runtime", err)
	}
	waitRemoved(t, cli, ex.ContainerID, time.Minute)
	if _, err := h.Exec(testCtx(t, time.Minute), ex.ExecutionID, ExecRequest{Command: "true", TimeoutMs: 1000}); ErrorCode(err) != CodeGone {
		t.Fatalf("exec after the deadline: %v, want gone", err)
	}
}

// What a command writes to the container's own stdout and stderr, which
// are docker-init's (/proc/1/fd/1 and 2, open to the same user), is kept
// nowhere on the host: under the engine's default json-file driver it went
// to a log file without a bound, past diskBytes and every other limit.
func testLimitContainerLog(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	ex := provision(t, h, emptyReq(img, small()))
	res := sh(t, h, ex.ExecutionID, `head -c 1048576 /dev/zero >/proc/1/fd/1; echo out=$?; head -c 1048576 /dev/zero >/proc/1/fd/2; echo err=$?`)
	if m := fields(t, res.Stdout); m["out"] != "0" || m["err"] != "0" {
		// Refusing the writes would hold too; what matters is below.
		t.Logf("writes to the container's stdout/stderr: %q %q", res.Stdout, res.Stderr)
	}
	logs, err := cli.ContainerLogs(testCtx(t, time.Minute), ex.ContainerID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return // the driver keeps nothing to read
	}
	defer logs.Close()
	n, _ := io.Copy(io.Discard, logs)
	if n > 0 {
		t.Fatalf("the engine stored %d bytes a command wrote to the container's stdout and stderr, outside every limit", n)
	}
}

// Empty files, which take no data pages, end in ENOSPC too: each is an
// inode the memory limit pays for, and without a bound on them a loop of
// them filled the memory limit, after which every command was OOM-killed
// at once and none could remove them.
func testLimitInodes(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	r := small()
	ex := provision(t, h, emptyReq(img, r))
	res, err := h.Exec(testCtx(t, 2*time.Minute), ex.ExecutionID, ExecRequest{Command: "/bin/sh", Args: []string{"-c", `
mkdir /workspace/many && cd /workspace/many || exit 1
i=0; while true 2>/dev/null >f$i; do i=$((i+1)); done
echo made=$i; true >last`}, TimeoutMs: 90_000})
	if err != nil || res.ExitCode == 0 || res.OOMKilled || !strings.Contains(res.Stderr, "No space left on device") {
		t.Fatalf("empty files until one fails: %v %+v, want ENOSPC and no OOM kill", err, res)
	}
	m := fields(t, res.Stdout)
	if made := num(t, m, "made"); made < 1000 || made > float64(WorkspaceInodes(r)) {
		t.Fatalf("made %v empty files, want between 1000 and %d", made, WorkspaceInodes(r))
	} else {
		t.Logf("%v empty files, then ENOSPC (nr_inodes %d)", made, WorkspaceInodes(r))
	}
	if res := sh(t, h, ex.ExecutionID, "rm -rf /workspace/many && echo ok"); res.Stdout != "ok\n" {
		t.Fatalf("after the files: exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	// /dev/shm, another tmpfs, the same.
	res, err = h.Exec(testCtx(t, 2*time.Minute), ex.ExecutionID, ExecRequest{Command: "/bin/sh", Args: []string{"-c", `
mkdir /dev/shm/many && cd /dev/shm/many || exit 1
i=0; while true 2>/dev/null >f$i; do i=$((i+1)); done
echo made=$i; true >last`}, TimeoutMs: 90_000})
	if err != nil || res.ExitCode == 0 || res.OOMKilled || !strings.Contains(res.Stderr, "No space left on device") {
		t.Fatalf("empty files in /dev/shm until one fails: %v %+v, want ENOSPC and no OOM kill", err, res)
	}
	if res := sh(t, h, ex.ExecutionID, "rm -rf /dev/shm/many && echo ok"); res.Stdout != "ok\n" {
		t.Fatalf("after the files in /dev/shm: exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
}

// A workspace asked larger than memory, filled with data and then with
// empty files, and /dev/shm filled the same, ends in ENOSPC each time and
// the sandbox keeps answering. Its size bounded the data and its
// nr_inodes the files, each alone, at more than the memory limit together:
// the files took the sandbox past its limit and the OOM killer took the
// commands (found by the sandboxmem audit).
func testLimitDataAndInodes(t *testing.T) {
	h, ex, _ := provisionOverMemory(t)
	fill := func(dir string) string {
		return `dd if=/dev/zero of=` + dir + `/big bs=1M count=300 2>&1
mkdir ` + dir + `/many && cd ` + dir + `/many || exit 1
i=0; while true 2>/dev/null >f$i; do i=$((i+1)); done
echo made=$i; cd /; true >` + dir + `/many/last`
	}
	for _, dir := range []string{"/workspace", "/dev/shm"} {
		res, err := h.Exec(testCtx(t, 2*time.Minute), ex.ExecutionID, ExecRequest{Command: "/bin/sh", Args: []string{"-c", fill(dir)}, TimeoutMs: 90_000})
		if err != nil || res.ExitCode == 0 || res.OOMKilled || !strings.Contains(res.Stdout, "No space left on device") || !strings.Contains(res.Stderr, "No space left on device") {
			t.Fatalf("%s filled with data, then empty files: %v %+v, want ENOSPC for both and no OOM kill", dir, err, res)
		}
		t.Logf("%s: %s", dir, strings.TrimSpace(res.Stdout))
	}
	res := sh(t, h, ex.ExecutionID, `echo ok; grep -E '^(total_)?(rss|shmem|cache) ' /sys/fs/cgroup/memory/memory.stat; cat /sys/fs/cgroup/memory/memory.usage_in_bytes`)
	if !strings.HasPrefix(res.Stdout, "ok\n") || res.ExitCode != 0 || res.OOMKilled {
		t.Fatalf("a command in the full sandbox: exit %d, oomKilled %v, %q %q", res.ExitCode, res.OOMKilled, res.Stdout, res.Stderr)
	}
	t.Logf("full: %s", strings.ReplaceAll(res.Stdout, "\n", "; "))
	if res := sh(t, h, ex.ExecutionID, "rm -rf /workspace/big /workspace/many /dev/shm/big /dev/shm/many && echo ok"); res.Stdout != "ok\n" {
		t.Fatalf("after the fill: exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
}

// testExecArgTooLong: a command's argument over MAX_ARG_STRLEN, which no
// execve takes, is refused naming it; it ran to exit code 1 with "exec
// /bin/sh: argument list too long" on stderr, as if the command had
// failed. One of the most bytes allowed runs.
func testExecArgTooLong(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	ex := provision(t, h, emptyReq(img, small()))
	ctx := testCtx(t, time.Minute)
	req := func(n int) ExecRequest {
		return ExecRequest{Command: "/bin/sh", Args: []string{"-c", `echo ${#1}`, "sh", strings.Repeat("y", n)}, TimeoutMs: 30_000}
	}
	res, err := h.Exec(ctx, ex.ExecutionID, req(maxArgLen))
	if err != nil || res.ExitCode != 0 || res.Stdout != fmt.Sprintf("%d\n", maxArgLen) {
		t.Fatalf("an argument of %d bytes: %+v %v", maxArgLen, res, err)
	}
	res, err = h.Exec(ctx, ex.ExecutionID, req(maxArgLen+1))
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeInvalidRequest || e.Field != "args[3]" || !strings.Contains(e.Message, "MAX_ARG_STRLEN") {
		t.Fatalf("an argument of %d bytes: %+v %v, want invalid_request naming args[3]", maxArgLen+1, res, err)
	}
	if _, err := h.Get(ctx, ex.ExecutionID); err != nil {
		t.Fatalf("the execution after a refused exec: %v", err)
	}
}

// testEngineRefusesCPUs: a gateway whose maximum allows more CPUs than the
// engine has (an operator's MaxResources) answers a request for them with
// invalid_request naming resources.cpus and the engine's words, and
// leaves no container; it answered "the engine refused the container".
func testEngineRefusesCPUs(t *testing.T) {
	cli, img := engine(t)
	ctx := testCtx(t, 2*time.Minute)
	info, err := cli.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	max := DefaultMaxResources()
	max.CPUs = float64(info.NCPU + 2)
	h := newTestHost(t, cli, &Config{MaxResources: &max})
	r := small()
	r.CPUs = float64(info.NCPU + 1)
	ex, err := h.Provision(ctx, emptyReq(img, r))
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeInvalidRequest || e.Field != "resources.cpus" ||
		!strings.Contains(e.Message, fmt.Sprintf("only %d CPUs available", info.NCPU)) || !strings.Contains(e.Message, "MaxResources") {
		t.Fatalf("%v CPUs of an engine with %d: %+v %v; want invalid_request on resources.cpus with the engine's words", r.CPUs, info.NCPU, ex, err)
	}
	t.Logf("%v", err)
	if got := h.List(); len(got) != 0 {
		t.Errorf("executions after the refusal: %+v", got)
	}
}

// testMemoryPastEngine: with the default maximum, memoryBytes past what the
// real engine has in all is refused at validation, naming the field and
// the engine's total, and nothing is created; the engine itself took such
// a limit (no limit at all) and the sandbox ran with it.
func testMemoryPastEngine(t *testing.T) {
	cli, img := engine(t)
	ctx := testCtx(t, 2*time.Minute)
	info, err := cli.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h := newTestHost(t, cli, nil)
	r := small()
	r.MemoryBytes = info.MemTotal + 1<<30
	ex, err := h.Provision(ctx, emptyReq(img, r))
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeInvalidRequest || e.Field != "resources.memoryBytes" ||
		!strings.Contains(e.Message, fmt.Sprintf("the Docker engine has %d bytes of memory in all", info.MemTotal)) {
		t.Fatalf("memoryBytes %d on an engine of %d: %+v %v; want invalid_request on resources.memoryBytes naming the engine's memory", r.MemoryBytes, info.MemTotal, ex, err)
	}
	t.Logf("%v", err)
	if got := ownerContainers(t, cli, h); len(got) != 0 {
		t.Errorf("containers after the refusal: %+v", got)
	}
}

// A core dump is written by the kernel outside the container when the
// machine's core_pattern pipes it to a helper (systemd-coredump, apport:
// the defaults of most distributions), which runs as root on the host,
// outside the sandbox's cgroup, and stores the core on the host's disk:
// a loop of crashing processes, each as large as the memory limit, spent
// the host's CPU and disk, past every limit of the sandbox. A sandbox's
// processes cannot raise their core size from 0, which such helpers
// honour (they get it as %c).
func testLimitCoreDumps(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	ex := provision(t, h, emptyReq(img, small()))
	res := sh(t, h, ex.ExecutionID, `echo soft=$(ulimit -S -c); echo hard=$(ulimit -H -c); ulimit -c unlimited 2>/dev/null; echo raised=$?`)
	if m := fields(t, res.Stdout); m["soft"] != "0" || m["hard"] != "0" || m["raised"] == "0" {
		t.Fatalf("a sandbox's core size limit is %q (soft) and %q (hard), and raising it exited %q: its processes may dump cores, which a piped core_pattern writes outside the sandbox", m["soft"], m["hard"], m["raised"])
	}
}

// Pseudo-terminals are counted machine-wide (kernel.pty.max, 4096, 1024
// of them kept for the host), and Docker's own /dev/pts for a container
// has no bound of its own: one sandbox held 3,071 and every other
// sandbox's terminal (the web terminal, ssh -t) failed with ENOSPC. A
// sandbox, fresh or warm, holds at most SandboxPTYs, gets its terminals
// back once it closes them, and its /dev/pts goes with its container.
func testLimitPTYs(t *testing.T) {
	cli, img := engine(t)
	req := emptyReq(img, small())
	for name, cfg := range map[string]*Config{
		"fresh":  nil,
		"pooled": {Pool: &PoolConfig{Size: 1, Keys: []ProvisionRequest{req}}},
	} {
		t.Run(name, func(t *testing.T) {
			h := newTestHost(t, cli, cfg)
			if h.pool != nil {
				waitPool(t, h, "a warm container", func(s PoolStats) bool { return s.Ready == 1 })
			}
			ex := provision(t, h, req)
			if h.pool != nil {
				if s := h.PoolStats(); s.Hits != 1 {
					t.Fatalf("want a pool hit, stats %+v", s)
				}
			}
			// Each open of /dev/ptmx takes a terminal, held by the shell's
			// fd until it exits; a few past the bound, never the machine's.
			open := fmt.Sprintf(`i=0; while [ $i -lt %d ]; do command eval "exec $((i+10))<>/dev/ptmx" || break; i=$((i+1)); done; echo opened=$i`, SandboxPTYs+8)
			res := sh(t, h, ex.ExecutionID, open)
			if n := fields(t, res.Stdout)["opened"]; n != strconv.Itoa(SandboxPTYs) || !strings.Contains(res.Stderr, "No space left on device") {
				t.Fatalf("a sandbox opened %s pseudo-terminals of %d tried (stderr %q); want %d, then ENOSPC: one sandbox can take the machine's every terminal", n, SandboxPTYs+8, res.Stderr, SandboxPTYs)
			}
			if res := sh(t, h, ex.ExecutionID, open); fields(t, res.Stdout)["opened"] != strconv.Itoa(SandboxPTYs) {
				t.Fatalf("after its terminals were closed a sandbox opened %q (stderr %q), want %d again", res.Stdout, res.Stderr, SandboxPTYs)
			}

			ins, err := cli.ContainerInspect(testCtx(t, time.Minute), ex.ContainerID)
			if err != nil {
				t.Fatal(err)
			}
			var vol string
			for _, m := range ins.Mounts {
				if m.Destination == "/dev/pts" && m.Type == mount.TypeVolume {
					vol = m.Name
				}
			}
			if vol == "" {
				t.Fatalf("no volume at /dev/pts: %+v", ins.Mounts)
			}
			if err := h.Terminate(testCtx(t, time.Minute), ex.ExecutionID); err != nil {
				t.Fatal(err)
			}
			waitRemoved(t, cli, ex.ContainerID, time.Minute)
			if _, err := cli.VolumeInspect(testCtx(t, time.Minute), vol); !cerrdefs.IsNotFound(err) {
				t.Errorf("the sandbox's /dev/pts volume %s outlived its container (inspect err %v)", vol, err)
			}
		})
	}
}

// TestCreateRefusesDiscardedLimits: an engine whose kernel lacks a
// cgroup controller creates the container anyway, the limit dropped,
// and says so only in the create's warnings (moby's
// verifyPlatformContainerResources): the sandbox ran with its memory,
// swap or pids unbounded. The create now fails naming the limit and
// what to enable, and leaves no container.
func TestCreateRefusesDiscardedLimits(t *testing.T) {
	for _, tc := range []struct{ warning, limit, fix string }{
		{"Your kernel does not support memory limit capabilities or the cgroup is not mounted. Limitation discarded.", "resources.memoryBytes", "memory"},
		{"Your kernel does not support swap limit capabilities or the cgroup is not mounted. Memory limited without swap.", "resources.memoryBytes", "swapaccount=1"},
		{"Your kernel does not support PIDs limit capabilities or the cgroup is not mounted. PIDs limit discarded.", "resources.pids", "pids"},
	} {
		f := &fakeDocker{createErr: []error{nil}, warnings: []string{tc.warning}}
		h := fakeHost(t, f, time.Now())
		cfg, hc, _ := h.policy.ContainerConfig("x", sandboxUIDBase, validReq(), time.Now(), nil)
		id, err := h.create(testCtx(t, time.Minute), cfg, hc, "hostgate-x")
		if err == nil || !strings.Contains(err.Error(), tc.limit) || !strings.Contains(err.Error(), tc.fix) || !strings.Contains(err.Error(), tc.warning) {
			t.Errorf("engine warns %q: create = %q, %v; want an error naming %s, the engine's words and %q", tc.warning, id, err, tc.limit, tc.fix)
		}
		if !slices.Contains(f.removed, "c-new") {
			t.Errorf("engine warns %q: container left behind (removed %v)", tc.warning, f.removed)
		}
	}
	// A warning about nothing the sandbox needs is no reason to refuse.
	f := &fakeDocker{createErr: []error{nil}, warnings: []string{"Published ports are discarded when using host network mode"}}
	h := fakeHost(t, f, time.Now())
	cfg, hc, _ := h.policy.ContainerConfig("x", sandboxUIDBase, validReq(), time.Now(), nil)
	if _, err := h.create(testCtx(t, time.Minute), cfg, hc, "hostgate-x"); err != nil {
		t.Errorf("an unrelated warning: %v", err)
	}
}

// TestCreateEngineCannotLimitCPU: an engine whose kernel has no CFS
// bandwidth control (CONFIG_CFS_BANDWIDTH off, as some Raspberry Pi
// kernels) refuses every NanoCPUs. That was answered as the request's
// fault, invalid_request on resources.cpus, telling the caller to ask
// for a value the engine accepts and the operator to lower the maximum,
// when no value is accepted: it now names the limit and what the
// engine's host lacks, as the engine's failure.
func TestCreateEngineCannotLimitCPU(t *testing.T) {
	const words = "NanoCPUs can not be set, as your kernel does not support CPU CFS scheduler or the cgroup is not mounted"
	f := &fakeDocker{createErr: []error{daemonInvalid(words)}}
	h := fakeHost(t, f, time.Now())
	cfg, hc, _ := h.policy.ContainerConfig("x", sandboxUIDBase, validReq(), time.Now(), nil)
	_, err := h.create(testCtx(t, time.Minute), cfg, hc, "hostgate-x")
	if err == nil || ErrorCode(err) == CodeInvalidRequest || strings.Contains(err.Error(), "MaxResources") ||
		!strings.Contains(err.Error(), "resources.cpus") || !strings.Contains(err.Error(), words) || !strings.Contains(err.Error(), "CONFIG_CFS_BANDWIDTH") {
		t.Fatalf("engine without CFS bandwidth control: %v (code %q); want the engine's failure naming resources.cpus, its words and CONFIG_CFS_BANDWIDTH", err, ErrorCode(err))
	}
}
