package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/bench"
	"github.com/hostgate/hostgate/client"
)

// sandboxResources are the limits of every sandbox here; dockerFlags are
// the same limits and hardening as docker run flags (the flags dockerhost's
// own benchmarks use as its CLI peer).
func sandboxResources(diskBytes, memBytes int64) client.Resources {
	return client.Resources{CPUs: 1, MemoryBytes: memBytes, DiskBytes: diskBytes, Pids: 128, RuntimeMs: 600_000, MaxOutputBytes: 1 << 20}
}

func dockerFlags(r client.Resources) []string {
	return []string{"--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--user", "65534:65534",
		"--network", "none", "--init", "--pids-limit", fmt.Sprint(r.Pids), "--memory", fmt.Sprint(r.MemoryBytes),
		"--memory-swap", fmt.Sprint(r.MemoryBytes), "--cpus", fmt.Sprint(r.CPUs),
		"--tmpfs", fmt.Sprintf("/workspace:size=%d,uid=65534,gid=65534,mode=0700,exec", r.DiskBytes)}
}

func docker(ctx context.Context, stdin, stdout string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "docker", args...)
	if stdin != "" {
		f, err := os.Open(stdin)
		if err != nil {
			return "", err
		}
		defer f.Close()
		cmd.Stdin = f
	}
	var out strings.Builder
	if stdout != "" {
		f, err := os.Create(stdout)
		if err != nil {
			return "", err
		}
		defer f.Close()
		cmd.Stdout = f
	} else {
		cmd.Stdout = &out
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("docker %s: %w: %s", args[0], err, stderr.String())
	}
	return strings.TrimSpace(out.String()), nil
}

// sandbox compares the executions API (through the gateway, as a caller
// sees it) with the docker CLI doing the same against the same engine.
func (e *env) sandbox(ctx context.Context) ([]*bench.Scenario, error) {
	if e.cfg.image == "" {
		return nil, nil
	}
	img := e.cfg.image
	small := sandboxResources(64<<20, 256<<20)
	req := client.ProvisionRequest{Image: img, Workspace: client.Workspace{Kind: "empty"}, Resources: small, Network: client.Network{Mode: "none"}}
	execTrue := client.ExecRequest{Command: "true", TimeoutMs: 60_000}
	var out []*bench.Scenario

	create := &bench.Scenario{Name: "sandbox create to first command", Unit: "ms", PeerName: "docker run --rm … true", Better: bench.Lower,
		Note: "hostgate: POST /v1/executions then exec `true` through the gateway; peer: docker run with the same limits and hardening flags"}
	runArgs := append(append([]string{"run", "--rm"}, dockerFlags(small)...), img, "true")
	for i := range e.cfg.pairs {
		var a, b time.Duration
		err := bench.Alternate(i, func() (err error) {
			if a, err = createFirst(ctx, e.api, req, execTrue); err != nil {
				return fmt.Errorf("hostgate create: %w", err)
			}
			return nil
		}, func() (err error) {
			b, err = timeIt(func() error { _, err := docker(ctx, "", "", runArgs...); return err })
			return err
		})
		if err != nil {
			return out, err
		}
		create.Add(ms(a), ms(b))
	}
	out = append(out, create)

	ex, err := e.api.Provision(ctx, req)
	if err != nil {
		return out, err
	}
	defer func() { _ = e.api.Terminate(context.WithoutCancel(ctx), ex.ExecutionID) }()
	cid, err := docker(ctx, "", "", append(append([]string{"run", "-d", "--rm"}, dockerFlags(small)...), img, "sleep", "600")...)
	if err != nil {
		return out, err
	}
	defer func() { _, _ = docker(context.WithoutCancel(ctx), "", "", "rm", "-f", cid) }()
	execS := &bench.Scenario{Name: "sandbox exec round trip of true, p50", Unit: "ms", PeerName: "docker exec", Better: bench.Lower,
		Note: "hostgate: POST /v1/executions/{id}/exec; peer: docker exec -u 65534:65534 into a container started with the same flags; 10 per side per pair"}
	dockerExec := func() error { _, err := docker(ctx, "", "", "exec", "-u", "65534:65534", cid, "true"); return err }
	if err := e.p50Pairs(execS, "hostgate exec", func() error { _, err := e.api.Exec(ctx, ex.ExecutionID, execTrue); return err }, dockerExec); err != nil {
		return out, err
	}
	out = append(out, execS)

	// The same execution as a host: Host.Exec over SSH through the gateway
	// and the execution's own agent tunnel, no Docker API call per command.
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	h, err := e.api.Dial(dctx, ex.ExecutionID)
	cancel()
	if err != nil {
		return out, fmt.Errorf("dial execution as a host: %w", err)
	}
	defer h.Close()
	execH := &bench.Scenario{Name: "sandbox exec round trip of true as a host (Host.Exec), p50", Unit: "ms", PeerName: "docker exec", Better: bench.Lower,
		Note: "hostgate: client.Dial(executionId) once, then Host.Exec through the gateway and the execution's agent tunnel; 10 per side per pair"}
	if err := e.p50Pairs(execH, "hostgate host exec", func() error { _, err := h.Exec(ctx, []string{"true"}, hostgate.ExecOptions{}); return err }, dockerExec); err != nil {
		return out, err
	}
	out = append(out, execH)

	ss, err := e.checkpointRestore(ctx, img)
	out = append(out, ss...)
	if err != nil {
		return out, err
	}
	pool, err := e.sandboxPool(ctx, img)
	if pool != nil {
		out = append(out, pool)
	}
	return out, err
}

// p50Pairs fills s with pairs of the p50 of 10 runs of ours (named who in
// errors) and of 10 runs of peer, alternating which goes first.
func (e *env) p50Pairs(s *bench.Scenario, who string, ours, peer func() error) error {
	for i := range e.cfg.pairs {
		var a, b []float64
		err := bench.Alternate(i, func() (err error) {
			if a, err = samples(10, ours); err != nil {
				return fmt.Errorf("%s: %w", who, err)
			}
			return nil
		}, func() (err error) {
			b, err = samples(10, peer)
			return err
		})
		if err != nil {
			return err
		}
		s.Add(bench.Percentile(a, 50), bench.Percentile(b, 50))
	}
	return nil
}

// sandboxPool measures create-to-first-command on a second gateway with a
// warm pool (--sandbox-pool) for the sandbox defaults' shape, which the
// provision asks for; the peer is docker run with the same limits.
func (e *env) sandboxPool(ctx context.Context, img string) (*bench.Scenario, error) {
	gw, err := startGateway(ctx, e.log, e.cfg.gatewayBin, e.cfg.agentBin, filepath.Join(e.dir, "gw-pool"), true,
		"--sandbox-pool", "2", "--sandbox-image", img)
	if err != nil {
		return nil, fmt.Errorf("pool gateway: %w", err)
	}
	defer gw.Stop()
	api, err := client.New(gw.url, gw.admin, nil)
	if err != nil {
		return nil, err
	}
	// cmd/gateway's sandboxDefaults: the shape the pool pre-warms.
	r := client.Resources{CPUs: 1, MemoryBytes: 512 << 20, DiskBytes: 256 << 20, Pids: 256, RuntimeMs: 3_600_000, MaxOutputBytes: 16 << 20}
	req := client.ProvisionRequest{Image: img, Workspace: client.Workspace{Kind: "empty"}, Resources: r, Network: client.Network{Mode: "none"}}
	runArgs := append(append([]string{"run", "--rm"}, dockerFlags(r)...), img, "true")
	s := &bench.Scenario{Name: "sandbox create to first command, warm pool", Unit: "ms", PeerName: "docker run --rm … true", Better: bench.Lower}
	const gap = 4 * time.Second
	var (
		lastClaim  time.Time     // when the previous hostgate claim ended
		lastDocker time.Duration // the latest docker run
	)
	for i := range e.cfg.pairs {
		// The pool refills in the background (1 s after a claim, then a
		// container create); give it the gap a caller would leave, and
		// start each pair, whichever side goes first, on a quiet engine.
		if err := sleep(ctx, gap); err != nil {
			return nil, err
		}
		var a, b time.Duration
		err := bench.Alternate(i, func() (err error) {
			// With hostgate always first, a claim came gap plus one docker
			// run after the previous one; keep at least that when the
			// previous pair ended with hostgate's claim.
			if !lastClaim.IsZero() {
				if err := sleep(ctx, time.Until(lastClaim.Add(gap+lastDocker))); err != nil {
					return err
				}
			}
			a, err = createFirst(ctx, api, req, client.ExecRequest{Command: "true", TimeoutMs: 60_000})
			lastClaim = time.Now()
			if err != nil {
				return fmt.Errorf("hostgate pooled create: %w", err)
			}
			return nil
		}, func() (err error) {
			b, err = timeIt(func() error { _, err := docker(ctx, "", "", runArgs...); return err })
			lastDocker = b
			return err
		})
		if err != nil {
			return nil, err
		}
		s.Add(ms(a), ms(b))
	}
	hits := strings.Count(gw.output(), "pooled=true")
	s.Note = fmt.Sprintf("a second gateway with --sandbox-pool 2; %d of %d provisions were served warm (gateway log pooled=true); the pool refills 1 s after a claim; pairs start 4 s apart, and a claim comes at least 4 s plus one docker run after the one before", hits, s.Pairs())
	return s, nil
}

// checkpointRestore moves a 100 MiB workspace out and back in.
func (e *env) checkpointRestore(ctx context.Context, img string) ([]*bench.Scenario, error) {
	const size = 100 << 20
	big := sandboxResources(128<<20, 512<<20)
	ex, err := e.api.Provision(ctx, client.ProvisionRequest{Image: img, Workspace: client.Workspace{Kind: "empty"}, Resources: big, Network: client.Network{Mode: "none"}})
	if err != nil {
		return nil, err
	}
	defer func() { _ = e.api.Terminate(context.WithoutCancel(ctx), ex.ExecutionID) }()
	fill := client.ExecRequest{Command: "sh", Args: []string{"-c", fmt.Sprintf("head -c %d /dev/urandom > /workspace/blob", size)}, TimeoutMs: 120_000}
	if r, err := e.api.Exec(ctx, ex.ExecutionID, fill); err != nil || r.ExitCode != 0 {
		return nil, fmt.Errorf("fill workspace: %v %+v", err, r)
	}
	cid, err := docker(ctx, "", "", append(append([]string{"run", "-d", "--rm"}, dockerFlags(big)...), img, "sleep", "600")...)
	if err != nil {
		return nil, err
	}
	defer func() { _, _ = docker(context.WithoutCancel(ctx), "", "", "rm", "-f", cid) }()
	if _, err := docker(ctx, "", "", "exec", "-u", "65534:65534", cid, "sh", "-c", fmt.Sprintf("head -c %d /dev/urandom > /workspace/blob", size)); err != nil {
		return nil, err
	}
	tarFile := filepath.Join(e.dir, "peer.tar")
	rate := func(d time.Duration) float64 { return float64(size) / mib / d.Seconds() }
	cp := &bench.Scenario{Name: "checkpoint 100 MiB workspace", Unit: "MiB/s", PeerName: "docker exec tar -c > file, fsync", Better: bench.Higher,
		Note: "hostgate: POST /v1/executions/{id}/checkpoints, whose tar and manifest are on disk (fsync) when it answers; peer: docker exec tar -c into a file on the same disk, then fsync(2) of the file"}
	rs := &bench.Scenario{Name: "restore 100 MiB workspace", Unit: "MiB/s", PeerName: "docker run -d + docker exec -i tar -x", Better: bench.Higher,
		Note: "hostgate: POST /v1/restores until the new execution answers, the tar checked against its recorded SHA-256 as it streams in and the sandbox's agent started (which the fast exec rows ride on); peer: a new container with the same flags and the same tar piped in"}
	pairs := min(e.cfg.pairs, 4) // even, so each side runs first in half
	var lastCP string
	for i := range pairs {
		var a, b time.Duration
		err := bench.Alternate(i, func() (err error) {
			a, err = timeIt(func() error {
				c, err := e.api.Checkpoint(ctx, ex.ExecutionID, "bench")
				if err == nil {
					lastCP = c.CheckpointID
				}
				return err
			})
			if err != nil {
				return fmt.Errorf("hostgate checkpoint: %w", err)
			}
			return nil
		}, func() (err error) {
			b, err = timeIt(func() error {
				if _, err := docker(ctx, "", tarFile, "exec", "-u", "65534:65534", cid, "tar", "-C", "/workspace", "-cf", "-", "."); err != nil {
					return err
				}
				return fsyncFile(tarFile)
			})
			return err
		})
		if err != nil {
			return nil, err
		}
		cp.Add(rate(a), rate(b))
	}
	runArgs := append(append([]string{"run", "-d", "--rm"}, dockerFlags(big)...), img, "sleep", "600")
	for i := range pairs {
		var a, b time.Duration
		err := bench.Alternate(i, func() (err error) {
			var rid string
			a, err = timeIt(func() error {
				r, err := e.api.Restore(ctx, client.RestoreRequest{CheckpointID: lastCP})
				if err == nil {
					rid = r.ExecutionID
				}
				return err
			})
			if rid != "" {
				_ = e.api.Terminate(ctx, rid)
			}
			if err != nil {
				return fmt.Errorf("hostgate restore: %w", err)
			}
			return nil
		}, func() (err error) {
			var pid string
			b, err = timeIt(func() error {
				id, err := docker(ctx, "", "", runArgs...)
				if err != nil {
					return err
				}
				pid = id
				_, err = docker(ctx, tarFile, "", "exec", "-i", "-u", "65534:65534", id, "tar", "-C", "/workspace", "-xf", "-")
				return err
			})
			if pid != "" {
				_, _ = docker(ctx, "", "", "rm", "-f", pid)
			}
			return err
		})
		if err != nil {
			return []*bench.Scenario{cp}, err
		}
		rs.Add(rate(a), rate(b))
	}
	return []*bench.Scenario{cp, rs}, nil
}

// createFirst times one hostgate create-to-first-command: provision an
// execution and run cmd in it. The execution is terminated after the
// timing.
func createFirst(ctx context.Context, api *client.Client, req client.ProvisionRequest, cmd client.ExecRequest) (time.Duration, error) {
	var id string
	d, err := timeIt(func() error {
		ex, err := api.Provision(ctx, req)
		if err != nil {
			return err
		}
		id = ex.ExecutionID
		_, err = api.Exec(ctx, id, cmd)
		return err
	})
	if id != "" {
		_ = api.Terminate(ctx, id)
	}
	return d, err
}

// sleep waits d (nothing when d ≤ 0) or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// fsyncFile waits until the file at name is on disk, as a checkpoint's
// tar is when the API answers.
func fsyncFile(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}
