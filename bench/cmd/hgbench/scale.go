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
	"github.com/hostgate/hostgate/internal/testenv"
)

// scale connects N idle agents (the real agent.Connect, so each is a full
// WebSocket + yamux tunnel with its own SSH server behind it, all in one
// child process) and measures the gateway process's RSS per tunnel and
// exec p99 while all are connected: through random tunnels, and through
// the separate agent process on its open connection; then the RSS per
// tunnel again, to a gateway serving TLS itself (scaleTLS).
func (e *env) scale(ctx context.Context) ([]*bench.Scenario, error) {
	n := e.cfg.scaleN
	if n <= 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute) // both gateways' N tunnels
	defer cancel()
	tokens := filepath.Join(e.dir, "scale-tokens")
	if err := e.scaleTokens(ctx, e.gw, n, tokens); err != nil {
		return nil, err
	}
	sim, err := startAgentSim(ctx, e.gw.url, tokens, filepath.Join(e.dir, "scale"), "")
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
	took, err := sim.upInBatches(n)
	if err != nil {
		return nil, err
	}
	e.log.Info("scale tunnels up", "n", n, "took", took)
	after, err := e.gw.RSS()
	if err != nil {
		return nil, err
	}
	perTunnel := float64(after-before) / float64(n-1) / 1024
	rss := &bench.Scenario{Name: fmt.Sprintf("gateway RSS per idle tunnel, N=%d", n), Unit: "KiB", PeerName: "target 64 KiB", Better: bench.Lower,
		Note: fmt.Sprintf("VmRSS of the gateway process %.0f MiB before, %.0f MiB with %d tunnels (the whole process over N: %.1f KiB each; the gateway had run the other scenarios, so some of the before is heap the tunnels reuse); the agents are agent.Connect in one child process, enrolled in batches of %d in %v",
			float64(before)/mib, float64(after)/mib, n, float64(after)/float64(n)/1024, scaleBatch, took)}
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
	sim.Stop()
	rssTLS, err := e.scaleTLS(ctx, n)
	if err != nil {
		return []*bench.Scenario{rss, p99, p99h}, fmt.Errorf("idle tunnels under the gateway's own TLS: %w", err)
	}
	return []*bench.Scenario{rss, rssTLS, p99, p99h}, nil
}

// scaleTLS measures n idle tunnels to a gateway that speaks TLS itself
// (gateway serve --tls-cert), as one without a proxy in front does: a
// second, fresh gateway with a self-signed certificate its agents trust.
// Its own TLS is the only difference from the plain row; the plain
// gateway's proxy, whose own memory per connection the plain row leaves
// out, is the other way to serve wss://.
func (e *env) scaleTLS(ctx context.Context, n int) (*bench.Scenario, error) {
	dir := filepath.Join(e.dir, "gw-tls")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	certPEM, keyPEM, _, err := testenv.MakeSelfSigned(time.Now().Add(24*time.Hour), "127.0.0.1")
	if err != nil {
		return nil, err
	}
	certFile, keyFile := filepath.Join(e.dir, "gw-tls.crt"), filepath.Join(e.dir, "gw-tls.key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return nil, err
	}
	gw, err := startGateway(ctx, e.log, e.cfg.gatewayBin, e.cfg.agentBin, dir, false, "--tls-cert", certFile, "--tls-key", keyFile)
	if err != nil {
		return nil, err
	}
	defer gw.Stop()
	tokens := filepath.Join(e.dir, "scale-tls-tokens")
	if err := e.scaleTokens(ctx, gw, n, tokens); err != nil {
		return nil, err
	}
	sim, err := startAgentSim(ctx, gw.url, tokens, filepath.Join(e.dir, "scale-tls"), certFile)
	if err != nil {
		return nil, err
	}
	defer sim.Stop()
	if err := sim.Up(1); err != nil {
		return nil, err
	}
	before, err := gw.RSS()
	if err != nil {
		return nil, err
	}
	took, err := sim.upInBatches(n)
	if err != nil {
		return nil, err
	}
	e.log.Info("scale tunnels up under TLS", "n", n, "took", took)
	after, err := gw.RSS()
	if err != nil {
		return nil, err
	}
	row := &bench.Scenario{Name: fmt.Sprintf("gateway RSS per idle tunnel, N=%d, the gateway's own TLS", n), Unit: "KiB", PeerName: "target 64 KiB", Better: bench.Lower,
		Note: fmt.Sprintf("the same agents to a fresh gateway serving wss:// itself (--tls-cert, a self-signed P-256 certificate; TLS 1.3, X25519MLKEM768): VmRSS %.0f MiB with 1 tunnel, %.0f MiB with %d, enrolled in batches of %d in %v",
			float64(before)/mib, float64(after)/mib, n, scaleBatch, took)}
	row.Add(float64(after-before)/float64(n-1)/1024, 64)
	return row, nil
}

// scaleTokens mints agent tokens scale-0 … scale-(n-1) on gw and writes
// them to path for the agent simulator: before the tunnels, so enrolment
// time is only the tunnels'.
func (e *env) scaleTokens(ctx context.Context, gw *gateway, n int, path string) error {
	t0 := time.Now()
	var lines strings.Builder
	for i := range n {
		id := fmt.Sprintf("scale-%d", i)
		tok, err := gw.AgentToken(ctx, id)
		if err != nil {
			return fmt.Errorf("token %d: %w", i, err)
		}
		fmt.Fprintf(&lines, "%s %s\n", id, tok)
	}
	if err := os.WriteFile(path, []byte(lines.String()), 0o600); err != nil {
		return err
	}
	e.log.Info("scale tokens", "n", n, "took", time.Since(t0).Round(time.Millisecond))
	return nil
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
