package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/bench"
	"github.com/hostgate/hostgate/client"
)

// scale connects N idle agents (the real agent.Connect, so each is a full
// WebSocket + yamux tunnel with its own SSH server behind it, all in one
// child process) and measures the gateway process's RSS per tunnel and
// exec p99 while all are connected: through random tunnels, and through
// the separate agent process on its open connection.
func (e *env) scale(ctx context.Context) ([]*bench.Scenario, error) {
	n := e.cfg.scaleN
	if n <= 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	// Tokens first, so enrolment time is only the tunnels'.
	t0 := time.Now()
	var lines strings.Builder
	for i := range n {
		id := fmt.Sprintf("scale-%d", i)
		tok, err := e.gw.AgentToken(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("token %d: %w", i, err)
		}
		fmt.Fprintf(&lines, "%s %s\n", id, tok)
	}
	tokens := filepath.Join(e.dir, "scale-tokens")
	if err := os.WriteFile(tokens, []byte(lines.String()), 0o600); err != nil {
		return nil, err
	}
	e.log.Info("scale tokens", "n", n, "took", time.Since(t0).Round(time.Millisecond))
	sim, err := startAgentSim(ctx, e.gw.url, tokens, filepath.Join(e.dir, "scale"))
	if err != nil {
		return nil, err
	}
	defer sim.Stop()
	if err := sim.Up(1); err != nil {
		return nil, err
	}
	const execs = 100
	base, err := e.tunnelExecs(ctx, func() int { return 0 }, execs)
	if err != nil {
		return nil, fmt.Errorf("baseline exec: %w", err)
	}
	hostExecs := func() ([]float64, error) {
		return samples(execs, func() error {
			_, err := e.host.Exec(ctx, []string{"true"}, hostgate.ExecOptions{})
			return err
		})
	}
	baseHost, err := hostExecs()
	if err != nil {
		return nil, err
	}
	before, err := e.gw.RSS()
	if err != nil {
		return nil, err
	}
	t0 = time.Now()
	const batch = 250
	for k := 1 + batch; ; k += batch {
		k = min(k, n)
		if err := sim.Up(k); err != nil {
			return nil, err
		}
		if k == n {
			break
		}
	}
	took := time.Since(t0).Round(time.Second)
	e.log.Info("scale tunnels up", "n", n, "took", took)
	after, err := e.gw.RSS()
	if err != nil {
		return nil, err
	}
	perTunnel := float64(after-before) / float64(n-1) / 1024
	rss := &bench.Scenario{Name: fmt.Sprintf("gateway RSS per idle tunnel, N=%d", n), Unit: "KiB", PeerName: "target 64 KiB", Better: bench.Lower,
		Note: fmt.Sprintf("VmRSS of the gateway process %.0f MiB before, %.0f MiB with %d tunnels (the whole process over N: %.1f KiB each; the gateway had run the other scenarios, so some of the before is heap the tunnels reuse); the agents are agent.Connect in one child process, enrolled in batches of %d in %v",
			float64(before)/mib, float64(after)/mib, n, float64(after)/float64(n)/1024, batch, took)}
	rss.Add(perTunnel, 64)

	loaded, err := e.tunnelExecs(ctx, func() int { return rand.IntN(n) }, execs)
	if err != nil {
		return []*bench.Scenario{rss}, fmt.Errorf("exec under load: %w", err)
	}
	p99 := &bench.Scenario{Name: fmt.Sprintf("exec p99 through a random tunnel, N=%d connected", n), Unit: "ms", PeerName: "same, 1 tunnel connected", Better: bench.Lower,
		Note: fmt.Sprintf("%d execs of true, 10 per client.Dial of a random tunnel (dial not timed), against %d on the first tunnel before the others connected", execs, execs)}
	p99.Add(bench.Percentile(loaded, 99), bench.Percentile(base, 99))
	loadedHost, err := hostExecs()
	if err != nil {
		return []*bench.Scenario{rss, p99}, err
	}
	// The same through the separate agent process on its open connection.
	p99h := &bench.Scenario{Name: fmt.Sprintf("exec p99 through the agent process, N=%d connected", n), Unit: "ms", PeerName: "same, before the N connected", Better: bench.Lower}
	p99h.Add(bench.Percentile(loadedHost, 99), bench.Percentile(baseHost, 99))
	return []*bench.Scenario{rss, p99, p99h}, nil
}

// tunnelExecs dials pick()'s host through the gateway every 10 execs and
// times each exec of true (ms).
func (e *env) tunnelExecs(ctx context.Context, pick func() int, n int) ([]float64, error) {
	var out []float64
	for len(out) < n {
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		h, err := client.Dial(dctx, e.gw.url, e.gw.admin, fmt.Sprintf("scale-%d", pick()))
		cancel()
		if err != nil {
			return nil, err
		}
		s, err := samples(min(10, n-len(out)), func() error {
			_, err := h.Exec(ctx, []string{"true"}, hostgate.ExecOptions{})
			return err
		})
		_ = h.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, s...)
	}
	return out, nil
}
