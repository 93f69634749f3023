package dockerhost

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The benchmarks compare each path with the docker CLI doing the same work
// against the same engine in the same run; report them as ratios.

func dockerCLI(b *testing.B, stdin, stdout string, args ...string) {
	b.Helper()
	cmd := exec.Command("docker", args...)
	if stdin != "" {
		f, err := os.Open(stdin)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		cmd.Stdin = f
	}
	if stdout != "" {
		f, err := os.Create(stdout)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		cmd.Stdout = f
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		b.Fatalf("docker %v: %v: %s", args, err, stderr.String())
	}
}

func runFlags(r Resources) []string {
	return []string{"--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--user", "65534:65534",
		"--network", "none", "--init", "--pids-limit", fmt.Sprint(r.Pids), "--memory", fmt.Sprint(r.MemoryBytes),
		"--memory-swap", fmt.Sprint(r.MemoryBytes), "--cpus", fmt.Sprint(r.CPUs),
		"--tmpfs", fmt.Sprintf("/workspace:size=%d,uid=65534,gid=65534,mode=0700,exec", r.DiskBytes)}
}

// BenchmarkProvisionFirstCommand times create-to-first-command: Provision
// then Exec of true, with a warm pool (each iteration waits, untimed, for
// the pool to be full and no refill running: a pool sized for its load),
// without one, and docker run --rm with the same flags.
// Each reports its p50 (p50-ms); compare them as ratios, e.g.
// go test -run ^$ -bench ProvisionFirstCommand -benchtime 20x.
func BenchmarkProvisionFirstCommand(b *testing.B) {
	cli, img := engine(b)
	r := small()
	hostgate := func(h *Docker, warm bool) func(b *testing.B) {
		return func(b *testing.B) {
			var samples []time.Duration
			for b.Loop() {
				if warm {
					b.StopTimer()
					if _, err := h.pool.waitFor(testCtx(b, 2*time.Minute), func(s PoolStats) bool { return s.Ready == 2 && s.Filling == 0 }); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				start := time.Now()
				ex := provision(b, h, emptyReq(img, r))
				sh(b, h, ex.ExecutionID, "true")
				samples = append(samples, time.Since(start))
				if err := h.Terminate(testCtx(b, time.Minute), ex.ExecutionID); err != nil {
					b.Fatal(err)
				}
			}
			reportP50(b, samples)
			if warm {
				s := h.PoolStats()
				b.ReportMetric(float64(s.Hits)/float64(max(1, s.Hits+s.Misses)), "hit-ratio")
			}
		}
	}
	b.Run("hostgate-pool", func(b *testing.B) {
		h := newTestHost(b, cli, &Config{Pool: &PoolConfig{Size: 2, Keys: []ProvisionRequest{emptyReq(img, r)}}})
		hostgate(h, true)(b)
	})
	b.Run("hostgate", func(b *testing.B) { hostgate(newTestHost(b, cli, nil), false)(b) })
	b.Run("docker-run", func(b *testing.B) {
		args := append(append([]string{"run", "--rm"}, runFlags(r)...), img, "true")
		var samples []time.Duration
		for b.Loop() {
			start := time.Now()
			dockerCLI(b, "", "", args...)
			samples = append(samples, time.Since(start))
		}
		reportP50(b, samples)
	})
	// The floor of any create-to-first-command: one docker exec into a
	// running container (a claim adds a rename and an inspect to it).
	b.Run("docker-exec-floor", func(b *testing.B) {
		h := newTestHost(b, cli, nil)
		ex := provision(b, h, emptyReq(img, r))
		var samples []time.Duration
		for b.Loop() {
			start := time.Now()
			dockerCLI(b, "", "", "exec", "-u", userOfExec(b, h, ex.ExecutionID), ex.ContainerID, "true")
			samples = append(samples, time.Since(start))
		}
		reportP50(b, samples)
	})
}

// reportP50 reports the median sample in milliseconds.
func reportP50(b *testing.B, samples []time.Duration) {
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	b.ReportMetric(float64(samples[(len(samples)-1)/2].Microseconds())/1000, "p50-ms")
}

func BenchmarkExec(b *testing.B) {
	cli, img := engine(b)
	h := newTestHost(b, cli, nil)
	ex := provision(b, h, emptyReq(img, small()))
	b.Run("hostgate", func(b *testing.B) {
		for b.Loop() {
			if _, err := h.Exec(testCtx(b, time.Minute), ex.ExecutionID, ExecRequest{Command: "true", TimeoutMs: 60_000}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("docker-exec", func(b *testing.B) {
		for b.Loop() {
			dockerCLI(b, "", "", "exec", "-u", userOfExec(b, h, ex.ExecutionID), ex.ContainerID, "true")
		}
	})
}

const benchWorkspace = 100 << 20

func bigResources() Resources {
	r := small()
	r.CPUs = 1
	r.DiskBytes = 128 << 20
	r.MemoryBytes = 512 << 20
	return r
}

// BenchmarkCheckpoint100MiB copies a 100 MiB workspace out; the peer is
// docker exec tar into a file, the same bytes through the same daemon.
func BenchmarkCheckpoint100MiB(b *testing.B) {
	cli, img := engine(b)
	dir := b.TempDir()
	h := newTestHost(b, cli, &Config{CheckpointDir: dir})
	ex := provision(b, h, emptyReq(img, bigResources()))
	sh(b, h, ex.ExecutionID, fmt.Sprintf("head -c %d /dev/urandom > /workspace/blob", benchWorkspace))
	b.Run("hostgate", func(b *testing.B) {
		b.SetBytes(benchWorkspace)
		for b.Loop() {
			cp, err := h.Checkpoint(testCtx(b, time.Minute), ex.ExecutionID, CheckpointRequest{})
			if err != nil {
				b.Fatal(err)
			}
			_ = h.store.Delete(testCtx(b, time.Minute), cp.CheckpointID)
		}
	})
	b.Run("docker-exec-tar", func(b *testing.B) {
		b.SetBytes(benchWorkspace)
		out := filepath.Join(dir, "peer.tar")
		for b.Loop() {
			dockerCLI(b, "", out, "exec", "-u", userOfExec(b, h, ex.ExecutionID), ex.ContainerID, "tar", "-C", "/workspace", "-cf", "-", ".")
		}
	})
}

// BenchmarkRestore100MiB provisions a new execution from a 100 MiB
// checkpoint; the peer is docker run -d, docker exec -i tar -x from the
// same tar file, docker rm -f.
func BenchmarkRestore100MiB(b *testing.B) {
	cli, img := engine(b)
	dir := b.TempDir()
	h := newTestHost(b, cli, &Config{CheckpointDir: dir})
	r := bigResources()
	ex := provision(b, h, emptyReq(img, r))
	sh(b, h, ex.ExecutionID, fmt.Sprintf("head -c %d /dev/urandom > /workspace/blob", benchWorkspace))
	cp, err := h.Checkpoint(testCtx(b, time.Minute), ex.ExecutionID, CheckpointRequest{})
	if err != nil {
		b.Fatal(err)
	}
	_ = h.Terminate(testCtx(b, time.Minute), ex.ExecutionID)
	b.Run("hostgate", func(b *testing.B) {
		b.SetBytes(benchWorkspace)
		for b.Loop() {
			rex, err := h.Restore(testCtx(b, 2*time.Minute), RestoreRequest{CheckpointID: cp.CheckpointID})
			if err != nil {
				b.Fatal(err)
			}
			_ = h.Terminate(testCtx(b, time.Minute), rex.ExecutionID)
		}
	})
	b.Run("docker-run-exec-tar", func(b *testing.B) {
		b.SetBytes(benchWorkspace)
		tarFile := filepath.Join(dir, cp.CheckpointID+".tar")
		args := append(append([]string{"run", "-d", "--rm", "--label", LabelOwner + "=" + h.owner}, runFlags(r)...), img, "sleep", "600")
		for b.Loop() {
			idFile := filepath.Join(dir, "cid")
			dockerCLI(b, "", idFile, args...)
			raw, _ := os.ReadFile(idFile)
			cid := strings.TrimSpace(string(raw))
			dockerCLI(b, tarFile, "", "exec", "-i", "-u", "65534:65534", cid, "tar", "-C", "/workspace", "-xf", "-")
			dockerCLI(b, "", "", "rm", "-f", cid)
		}
	})
}

// BenchmarkCheckpointWith2000Stored is one checkpoint of a small
// workspace, and one delete, with 2,000 checkpoints stored and no
// retention: the checkpoint's answer (p50-ms) and the time until the
// background work it left is done too (settled-p50-ms, the sweep it
// kicked), and the same for a delete (delete-settled-p50-ms).
func BenchmarkCheckpointWith2000Stored(b *testing.B) {
	cli, img := engine(b)
	dir := b.TempDir()
	for range 2000 {
		writeCheckpoint(b, dir, time.Now().Add(-time.Hour), 4<<10, "stored")
	}
	h := newTestHost(b, cli, &Config{Owner: "gwleft-" + uniqueOwner(), CheckpointDir: dir})
	waitSwept(b, h)
	ex := provision(b, h, emptyReq(img, small()))
	sh(b, h, ex.ExecutionID, "echo hello > /workspace/f")
	var answer, settled, deleted []time.Duration
	for b.Loop() {
		start := time.Now()
		cp, err := h.Checkpoint(testCtx(b, time.Minute), ex.ExecutionID, CheckpointRequest{})
		if err != nil {
			b.Fatal(err)
		}
		answer = append(answer, time.Since(start))
		waitSwept(b, h)
		settled = append(settled, time.Since(start))
		start = time.Now()
		if err := h.DeleteCheckpoint(testCtx(b, time.Minute), cp.CheckpointID); err != nil {
			b.Fatal(err)
		}
		waitSwept(b, h)
		deleted = append(deleted, time.Since(start))
	}
	reportP50(b, answer)
	for name, s := range map[string][]time.Duration{"settled-p50-ms": settled, "delete-settled-p50-ms": deleted} {
		slices.Sort(s)
		b.ReportMetric(float64(s[(len(s)-1)/2].Microseconds())/1000, name)
	}
	if got := h.CheckpointStats().Stored; got != 2000 {
		b.Fatalf("hostgate_checkpoints %d, want 2000", got)
	}
}
