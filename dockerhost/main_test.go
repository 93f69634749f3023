package dockerhost

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/hostgate/hostgate/internal/testenv"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// engineTests run against the real engine. They mostly wait on it, so
// TestEngine runs them concurrently, beyond -parallel (which defaults to
// GOMAXPROCS, 2 here): t.Run may be called from several goroutines.
var engineTests = []struct {
	name string
	fn   func(*testing.T)
}{
	{"ExecBasics", testExecBasics},
	{"TerminateDuringExec", testTerminateDuringExec},
	{"TerminateTwiceConcurrently", testTerminateTwiceConcurrently},
	{"TerminateDuringRestoreLeavesNothing", testTerminateDuringRestoreLeavesNothing},
	{"TimeoutRemovalFails", testTimeoutRemovalFails},
	{"LimitCPU", testLimitCPU},
	{"LimitMemory", testLimitMemory},
	{"LimitDisk", testLimitDisk},
	{"LimitDiskOverMemory", testLimitDiskOverMemory},
	{"ProvisionForeignPath", testProvisionForeignPath},
	{"LimitPids", testLimitPids},
	{"LimitOutput", testLimitOutput},
	{"LimitContainerLog", testLimitContainerLog},
	{"LimitCoreDumps", testLimitCoreDumps},
	{"LimitPTYs", testLimitPTYs},
	{"LimitInodes", testLimitInodes},
	{"LimitDataAndInodes", testLimitDataAndInodes},
	{"TimeoutDestroys", testTimeoutDestroys},
	{"TimeoutKeepsOutput", testTimeoutKeepsOutput},
	{"UnreadStdinIsNoTimeout", testUnreadStdinIsNoTimeout},
	{"AbortDestroys", testAbortDestroys},
	{"RuntimeDeadlineWithoutHost", testRuntimeDeadlineWithoutHost},
	{"RuntimeDeadlineHost", testRuntimeDeadlineHost},
	{"GitWorkspace", testGitWorkspace},
	{"GitImportRefused", testGitImportRefused},
	{"GitNotOwned", testGitNotOwned},
	{"GitRefusedBeforeEngine", testGitRefusedBeforeEngine},
	{"GitRefusedKeepsThePool", testGitRefusedKeepsThePool},
	{"CheckpointRestore", testCheckpointRestore},
	{"CheckpointDeleteDuringRestore", testCheckpointDeleteDuringRestore},
	{"CheckpointRetention", testCheckpointRetention},
	{"CheckpointAnswersBeforeRetention", testCheckpointAnswersBeforeRetention},
	{"CheckpointCountsFollow", testCheckpointCountsFollow},
	{"CheckpointDuringTerminate", testCheckpointDuringTerminate},
	{"StoppingCutsCheckpointRestore", testStoppingCutsCheckpointRestore},
	{"CheckpointReadOnlyDirs", testCheckpointReadOnlyDirs},
	{"CheckpointManyReadOnlyDirs", testCheckpointManyReadOnlyDirs},
	{"ImportReadOnlyDirsWithoutChmod", testImportReadOnlyDirsWithoutChmod},
	{"CheckpointSparse", testCheckpointSparse},
	{"CheckpointFailuresNamed", testCheckpointFailuresNamed},
	{"CheckpointOfStoppedTar", testCheckpointOfStoppedTar},
	{"VerifyKilledOutside", testVerifyKilledOutside},
	{"AdoptAndReap", testAdoptAndReap},
	{"ImageMustHaveShSleepTar", testImageMustHaveShSleepTar},
	{"RestoreTooLarge", testRestoreTooLarge},
	{"RestoreHostileTar", testRestoreHostileTar},
	{"RestoreCutReadsNoMore", testRestoreCutReadsNoMore},
	{"AttachStdio", testAttachStdio},
	{"Tools", testTools},
	{"TerminateDuringProvision", testTerminateDuringProvision},
	{"ProvisionAbortLeavesNothing", testProvisionAbortLeavesNothing},
	{"PoolDeadlineFromClaim", testPoolDeadlineFromClaim},
	{"PoolLearnRefillNeverReused", testPoolLearnRefillNeverReused},
	{"PoolAdopt", testPoolAdopt},
	{"PoolTTLAndClose", testPoolTTLAndClose},
	{"PoolConcurrentClaims", testPoolConcurrentClaims},
	{"PoolFillFailure", testPoolFillFailure},
	{"PoolImageMoved", testPoolImageMoved},
	{"ExecVia", testExecVia},
	{"PoolAgent", testPoolAgent},
	{"LoadAgent", testLoadAgent},
	{"ToolsVolume", testToolsVolume},
	{"ImageCheckedOnce", testImageCheckedOnce},
	{"Tombstones", testTombstones},
	{"OwnUID", testOwnUID},
	{"UIDsOfOtherGateways", testUIDsOfOtherGateways},
	{"DeadlineToolSurvivesSandbox", testDeadlineToolSurvivesSandbox},
	{"DeadlineToolPool", testDeadlineToolPool},
	{"DeadlineToolReaps", testDeadlineToolReaps},
	{"DeadlineToolCheckpointRestore", testDeadlineToolCheckpointRestore},
	{"DeadlineToolForkBomb", testDeadlineToolForkBomb},
	{"DeadlineToolAdoptsOldLayout", testDeadlineToolAdoptsOldLayout},
	{"SetTimeoutShmFull", testSetTimeoutShmFull},
	{"KillStopped", testKillStopped},
	{"KillStoppedForgedComm", testKillStoppedForgedComm},
	{"KillStoppedHeld", testKillStoppedHeld},
	{"StdioPIDUnseen", testStdioPIDUnseen},
	{"ExecArgTooLong", testExecArgTooLong},
	{"EngineRefusesCPUs", testEngineRefusesCPUs},
	{"ExecArgSpace", testExecArgSpace},
	{"MemoryPastEngine", testMemoryPastEngine},
	{"ExecArgSpaceImageEnv", testExecArgSpaceImageEnv},
	{"ExecArgSpacePooled", testExecArgSpacePooled},
	{"ProvisionImageEnvTooLarge", testProvisionImageEnvTooLarge},
	{"ImageHostgateLabels", testImageHostgateLabels},
}

// engineConcurrency bounds how many engine tests run at once.
const engineConcurrency = 8

func TestEngine(t *testing.T) {
	sem := make(chan struct{}, engineConcurrency)
	var wg sync.WaitGroup
	for _, et := range engineTests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			t.Run(et.name, et.fn)
		}()
	}
	wg.Wait()
}

// engine returns a client for the real Docker engine and the digest-pinned
// test image, or skips (fails under HOSTGATE_E2E=require) without them.
func engine(t testing.TB) (*client.Client, string) {
	t.Helper()
	return testenv.DockerEngine(t)
}

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func uniqueOwner() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "test-" + hex.EncodeToString(b[:])
}

// newTestHost returns a host with an owner of its own, so Adopt never
// touches another test's containers; cleanup removes whatever the owner
// still has.
func newTestHost(t testing.TB, cli *client.Client, cfg *Config) *Docker {
	t.Helper()
	if cfg == nil {
		cfg = &Config{}
	}
	if cfg.Owner == "" {
		cfg.Owner = uniqueOwner()
	}
	if cfg.Store == nil && cfg.CheckpointDir == "" {
		cfg.CheckpointDir = t.TempDir()
	}
	h, err := NewDocker(testCtx(t, time.Minute), slog.New(slog.DiscardHandler), cli, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.Close()
		reapOwner(t, cli, cfg.Owner)
	})
	return h
}

func reapOwner(t testing.TB, cli *client.Client, owner string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Executions and pooled containers, then tools volume holders.
	for _, label := range []string{LabelOwner, LabelTools} {
		list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", label+"="+owner))})
		if err != nil {
			t.Errorf("list containers: %v", err)
			return
		}
		for _, c := range list {
			// RemoveVolumes: a sandbox's /dev/pts is an anonymous volume.
			_ = cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		}
	}
	vols, err := cli.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(filters.Arg("label", LabelTools+"="+owner))})
	if err != nil {
		t.Errorf("list volumes: %v", err)
		return
	}
	for _, v := range vols.Volumes {
		if err := cli.VolumeRemove(ctx, v.Name, true); err != nil {
			t.Errorf("remove tools volume: %v", err)
		}
	}
}

// small are limits that keep the tests light on a loaded 2-core machine.
func small() Resources {
	return Resources{CPUs: 0.5, MemoryBytes: 64 << 20, DiskBytes: 8 << 20, Pids: 64, RuntimeMs: 120_000, MaxOutputBytes: 1 << 20}
}

func emptyReq(img string, r Resources) ProvisionRequest {
	return ProvisionRequest{Image: img, Workspace: WorkspaceSpec{Kind: WorkspaceEmpty}, Resources: r, Network: Network{Mode: "none"}}
}

func provision(t testing.TB, h *Docker, req ProvisionRequest) *Execution {
	t.Helper()
	ex, err := h.Provision(testCtx(t, 2*time.Minute), req)
	if err != nil {
		t.Fatalf("provision: %v", err)
	}
	return ex
}

func sh(t testing.TB, h *Docker, id, script string) *ExecResult {
	t.Helper()
	res, err := h.Exec(testCtx(t, 2*time.Minute), id, ExecRequest{Command: "/bin/sh", Args: []string{"-c", script}, TimeoutMs: 60_000})
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	return res
}

// waitRemoved waits (on the engine's own wait API, no polling) until the
// container is removed.
func waitRemoved(t testing.TB, cli *client.Client, cid string, d time.Duration) {
	t.Helper()
	ctx := testCtx(t, d)
	okC, errC := cli.ContainerWait(ctx, cid, container.WaitConditionRemoved)
	select {
	case <-okC:
	case err := <-errC:
		if !cerrdefs.IsNotFound(err) {
			t.Fatalf("container %s not removed: %v", cid, err)
		}
	}
	if _, err := cli.ContainerInspect(ctx, cid); !cerrdefs.IsNotFound(err) {
		t.Fatalf("container %s still exists (inspect err %v)", cid, err)
	}
}

// uidOf is the uid execution id's processes run as, as a string; it fails
// the test unless that is one of the sandbox range.
func uidOf(t testing.TB, h *Docker, id string) string {
	t.Helper()
	h.mu.Lock()
	e := h.execs[id]
	h.mu.Unlock()
	if e == nil || !sandboxUID(e.uid) {
		t.Fatalf("execution %s: no sandbox uid (%+v)", id, e)
	}
	return strconv.Itoa(e.uid)
}

// userOfExec is execution id's "uid:gid", for docker exec -u.
func userOfExec(t testing.TB, h *Docker, id string) string {
	t.Helper()
	u := uidOf(t, h, id)
	return u + ":" + u
}
