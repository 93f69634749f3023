package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/bench"
	"github.com/hostgate/hostgate/client"
	"github.com/hostgate/hostgate/internal/agent"
)

// scale connects N idle agents (in this process, with the real
// agent.Connect, so each is a full WebSocket + yamux tunnel with its own
// SSH server behind it) and measures the gateway process's RSS per tunnel
// and exec p99 through random tunnels while all are connected.
func (e *env) scale(ctx context.Context) ([]*bench.Scenario, error) {
	n := e.cfg.scaleN
	if n <= 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	// Tokens first, so enrolment time is only the tunnels'.
	t0 := time.Now()
	toks := make([]string, n)
	for i := range toks {
		tok, err := e.gw.AgentToken(ctx, fmt.Sprintf("scale-%d", i))
		if err != nil {
			return nil, fmt.Errorf("token %d: %w", i, err)
		}
		toks[i] = tok
	}
	e.log.Info("scale tokens", "n", n, "took", time.Since(t0).Round(time.Millisecond))

	actx, stopAgents := context.WithCancel(ctx)
	var (
		wg  sync.WaitGroup
		up  atomic.Int64
		sig = make(chan struct{}, n)
	)
	defer func() { stopAgents(); wg.Wait() }()
	start := func(i int) error {
		// Sharded: one directory of 10,000 entries takes minutes to remove.
		dir := filepath.Join(e.dir, "scale", fmt.Sprint(i/100), fmt.Sprint(i))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		var once sync.Once
		cfg := &agent.ConnectConfig{GatewayURL: e.gw.url, Token: toks[i], HostID: fmt.Sprintf("scale-%d", i), StateDir: dir,
			Info: hostgate.Info{Kind: "machine", OS: "linux", Home: e.dir, TempDir: os.TempDir()},
			OnTunnel: func(string) {
				once.Do(func() { up.Add(1); sig <- struct{}{} })
			}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := agent.Connect(actx, cfg); err != nil {
				e.log.Warn("scale agent", "i", i, "err", err)
			}
		}()
		return nil
	}
	waitUp := func(want int64) error {
		t := time.NewTimer(60 * time.Second)
		defer t.Stop()
		for up.Load() < want {
			select {
			case <-sig:
			case <-t.C:
				return fmt.Errorf("%d of %d tunnels up after 60 s", up.Load(), want)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	if err := start(0); err != nil {
		return nil, err
	}
	if err := waitUp(1); err != nil {
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
	for i := 1; i < n; i += batch {
		end := min(i+batch, n)
		for j := i; j < end; j++ {
			if err := start(j); err != nil {
				return nil, err
			}
		}
		if err := waitUp(int64(end)); err != nil {
			return nil, err
		}
	}
	e.log.Info("scale tunnels up", "n", n, "took", time.Since(t0).Round(time.Millisecond))
	after, err := e.gw.RSS()
	if err != nil {
		return nil, err
	}
	perTunnel := float64(after-before) / float64(n-1) / 1024
	rss := &bench.Scenario{Name: fmt.Sprintf("gateway RSS per idle tunnel, N=%d", n), Unit: "KiB", PeerName: "target 64 KiB", Better: bench.Lower,
		Note: fmt.Sprintf("VmRSS of the gateway process %.0f MiB before, %.0f MiB with %d tunnels; agents are agent.Connect in the harness process, enrolled in batches of %d in %v",
			float64(before)/mib, float64(after)/mib, n, batch, time.Since(t0).Round(time.Second))}
	rss.Add(perTunnel, 64)

	loaded, err := e.tunnelExecs(ctx, func() int { return rand.IntN(n) }, execs)
	if err != nil {
		return []*bench.Scenario{rss}, fmt.Errorf("exec under load: %w", err)
	}
	p99 := &bench.Scenario{Name: fmt.Sprintf("exec p99 through a random tunnel, N=%d connected", n), Unit: "ms", PeerName: "same, 1 tunnel connected", Better: bench.Lower,
		Note: fmt.Sprintf("%d execs of true, each on a fresh client.Dial to a random tunnel (dial not timed), against %d on the first tunnel before the others connected", execs, execs)}
	p99.Add(bench.Percentile(loaded, 99), bench.Percentile(base, 99))
	loadedHost, err := hostExecs()
	if err != nil {
		return []*bench.Scenario{rss, p99}, err
	}
	// The same through the separate agent process on its open connection:
	// the gateway's share, without the harness's in-process agents.
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
