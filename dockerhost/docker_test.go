package dockerhost

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

func testExecBasics(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	req := emptyReq(img, small())
	req.Env = map[string]string{"GREETING": "hello"}
	ex := provision(t, h, req)

	res, err := h.Exec(testCtx(t, time.Minute), ex.ExecutionID, ExecRequest{
		Command:   "/bin/sh",
		Args:      []string{"-c", `echo "$GREETING $EXTRA"; pwd; id -u; cat; echo oops >&2; exit 3`},
		Env:       map[string]string{"EXTRA": "world"},
		Stdin:     "from stdin\n",
		TimeoutMs: 30_000,
	})
	if err != nil {
		t.Fatal(err)
	}
	uid := uidOf(t, h, ex.ExecutionID)
	want := "hello world\n/workspace\n" + uid + "\nfrom stdin\n"
	if res.ExitCode != 3 || res.Stdout != want || res.Stderr != "oops\n" {
		t.Fatalf("got exit %d stdout %q stderr %q; want exit 3 stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr, want, "oops\n")
	}
	// Out of memory the kernel takes a command before the agent: one that
	// docker exec runs (before the agent's tunnel is up) had 0, the
	// agent's own, where the agent's commands have CommandOOMScoreAdj.
	if got, want := sh(t, h, ex.ExecutionID, `cat /proc/self/oom_score_adj`).Stdout, strconv.Itoa(CommandOOMScoreAdj)+"\n"; got != want {
		t.Errorf("a command's oom_score_adj under docker exec: %q, want %q", got, want)
	}

	// Stdin and output are bytes, not text: every byte value and
	// sequences that are not UTF-8 pass through docker exec intact (the
	// API's base64 encoding relies on it).
	bin := make([]byte, 0, 270)
	for i := range 256 {
		bin = append(bin, byte(i))
	}
	bin = append(bin, 0x80, 0xe2, 0x82, 0xc0, 0x80, 0xed, 0xa0, 0x80, 0xf0, 0x9f)
	res, err = h.Exec(testCtx(t, time.Minute), ex.ExecutionID, ExecRequest{Command: "/bin/sh", Args: []string{"-c", "cat > b && cat b && cat b >&2"}, Stdin: string(bin), TimeoutMs: 30_000})
	if err != nil || res.ExitCode != 0 || res.Stdout != string(bin) || res.Stderr != string(bin) {
		t.Fatalf("binary through docker exec: %v %+v, want stdout and stderr %x", err, res, bin)
	}

	ins, err := cli.ContainerInspect(testCtx(t, time.Minute), ex.ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	hc := ins.HostConfig
	if hc.NanoCPUs != 5e8 || hc.Memory != 64<<20 || hc.MemorySwap != 64<<20 || *hc.PidsLimit != 64 ||
		!hc.ReadonlyRootfs || hc.NetworkMode != "none" || !hc.AutoRemove || len(hc.CapDrop) != 1 || hc.CapDrop[0] != "ALL" ||
		len(hc.CapAdd) != 0 || ins.Config.User != uid+":"+uid || ins.Config.Labels[LabelUID] != uid {
		t.Fatalf("container config not hardened as asked: %+v user %q", hc.Resources, ins.Config.User)
	}
	if !strings.Contains(strings.Join(hc.SecurityOpt, ","), "no-new-privileges") {
		t.Fatalf("SecurityOpt %v lacks no-new-privileges", hc.SecurityOpt)
	}
	if got := ins.Config.Labels[LabelExecution]; got != ex.ExecutionID {
		t.Fatalf("label %s = %q, want %q", LabelExecution, got, ex.ExecutionID)
	}

	// Inside: rootfs read-only, no network but loopback, no capabilities.
	res = sh(t, h, ex.ExecutionID, `touch /x 2>&1; ls /sys/class/net; grep CapEff /proc/self/status; grep NoNewPrivs /proc/self/status`)
	for _, want := range []string{"Read-only file system", "lo", "CapEff:\t0000000000000000", "NoNewPrivs:\t1"} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("inside the container, %q missing from:\n%s", want, res.Stdout)
		}
	}
	if strings.Contains(res.Stdout, "eth0") {
		t.Errorf("container has a network interface:\n%s", res.Stdout)
	}

	if err := h.Terminate(testCtx(t, time.Minute), ex.ExecutionID); err != nil {
		t.Fatal(err)
	}
	waitRemoved(t, cli, ex.ContainerID, time.Minute)
	if err := h.Terminate(testCtx(t, time.Minute), ex.ExecutionID); err != nil {
		t.Fatalf("second terminate: %v", err)
	}
	_, err = h.Exec(testCtx(t, time.Minute), ex.ExecutionID, ExecRequest{Command: "true", TimeoutMs: 1000})
	if ErrorCode(err) != CodeGone {
		t.Fatalf("exec after terminate: %v, want code gone", err)
	}
	if err := h.Terminate(testCtx(t, time.Minute), "never-was"); err != nil {
		t.Fatalf("terminate unknown: %v, want success (idempotent, as DELETE /v1/executions/{id})", err)
	}
}

// Terminate during a running command ends the command, which reports the
// execution gone rather than the kill's exit status.
func testTerminateDuringExec(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	ex := provision(t, h, emptyReq(img, small()))
	got := make(chan error, 1)
	go func() {
		_, err := h.Exec(testCtx(t, time.Minute), ex.ExecutionID, ExecRequest{Command: "sleep", Args: []string{"600"}, TimeoutMs: 600_000})
		got <- err
	}()
	if err := h.Terminate(testCtx(t, time.Minute), ex.ExecutionID); err != nil {
		t.Fatal(err)
	}
	if err := <-got; ErrorCode(err) != CodeGone {
		t.Fatalf("exec during terminate: %v, want gone", err)
	}
	waitRemoved(t, cli, ex.ContainerID, time.Minute)
}

// A provision abandoned at any point leaves no container behind: the
// deadlines below land in different provisioning steps.
func testProvisionAbortLeavesNothing(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	for _, d := range []time.Duration{50 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond, time.Second} {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		ex, err := h.Provision(ctx, emptyReq(img, small()))
		cancel()
		if err == nil {
			// Fast enough this time: a live execution is fine too.
			if err := h.Terminate(testCtx(t, time.Minute), ex.ExecutionID); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range ownerContainers(t, cli, h) {
		waitRemoved(t, cli, c.ID, time.Minute)
	}
	if n := len(h.List()); n != 0 {
		t.Fatalf("%d executions registered after aborted provisions", n)
	}
}

// Terminate of an execution still being provisioned ends it: Provision
// fails with gone (or, if it won the race, the execution is gone after),
// and no container is left.
func testTerminateDuringProvision(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	req := emptyReq(img, small())
	req.ExecutionID = "terminate-during-provision"
	type result struct {
		ex  *Execution
		err error
	}
	got := make(chan result, 1)
	go func() {
		ex, err := h.Provision(testCtx(t, 2*time.Minute), req)
		got <- result{ex, err}
	}()
	// Spin until the host knows the id, pending or live (microseconds):
	// a Terminate before that is of an id never seen, which succeeds and
	// ends nothing.
	deadline := time.Now().Add(time.Minute)
	for {
		h.mu.Lock()
		known := h.pending[req.ExecutionID] != nil || h.execs[req.ExecutionID] != nil
		h.mu.Unlock()
		if known {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the provision never registered its id")
		}
		runtime.Gosched()
	}
	if err := h.Terminate(testCtx(t, time.Minute), req.ExecutionID); err != nil {
		t.Fatalf("terminate: %v", err)
	}
	r := <-got
	if r.err != nil && ErrorCode(r.err) != CodeGone {
		t.Fatalf("provision: %v, want success or gone", r.err)
	}
	if _, err := h.Exec(testCtx(t, time.Minute), req.ExecutionID, ExecRequest{Command: "true", TimeoutMs: 1000}); ErrorCode(err) != CodeGone {
		t.Fatalf("exec after terminate: %v, want gone", err)
	}
	for _, c := range ownerContainers(t, cli, h) {
		waitRemoved(t, cli, c.ID, time.Minute)
	}
	t.Logf("provision ended with %v", r.err)
}

// A Terminate during a checkpoint ends the checkpoint with code gone, as
// any use of an ended execution does: it killed tar with the container,
// and the checkpoint answered an engine error (a 502 through the API).
func testCheckpointDuringTerminate(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, &Config{CheckpointDir: t.TempDir()})
	r := small()
	r.MemoryBytes, r.DiskBytes = 128<<20, 64<<20
	ex := provision(t, h, emptyReq(img, r))
	sh(t, h, ex.ExecutionID, "head -c 40000000 /dev/urandom > /workspace/blob")
	errc := make(chan error, 1)
	go func() {
		_, err := h.Checkpoint(testCtx(t, time.Minute), ex.ExecutionID, CheckpointRequest{Reason: "race"})
		errc <- err
	}()
	time.Sleep(100 * time.Millisecond)
	if err := h.Terminate(testCtx(t, time.Minute), ex.ExecutionID); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil && ErrorCode(err) != CodeGone {
		t.Fatalf("checkpoint under a terminate: %v (code %q), want success or gone", err, ErrorCode(err))
	}
}

// A container killed outside the host is noticed by Verify: the
// execution ends (gone from then on) rather than staying live with no
// container behind it.
func testVerifyKilledOutside(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	ex := provision(t, h, emptyReq(img, small()))
	ctx := testCtx(t, time.Minute)
	if err := h.Verify(ctx, ex.ExecutionID); err != nil {
		t.Fatalf("Verify of a live execution: %v", err)
	}
	if err := cli.ContainerKill(ctx, ex.ContainerID, "KILL"); err != nil {
		t.Fatal(err)
	}
	waitRemoved(t, cli, ex.ContainerID, time.Minute)
	if _, err := h.Get(ctx, ex.ExecutionID); err != nil {
		t.Fatalf("Get trusts the host's records: %v", err)
	}
	if err := h.Verify(ctx, ex.ExecutionID); ErrorCode(err) != CodeGone {
		t.Fatalf("Verify after the container was killed: %v, want gone", err)
	}
	if _, err := h.Get(ctx, ex.ExecutionID); ErrorCode(err) != CodeGone {
		t.Fatalf("Get after Verify: %v, want gone", err)
	}
}
