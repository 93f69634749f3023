package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/bench"
)

// bulkAB streams the bulk scenario's bytes to this agent and to the
// -agent-before one, alternating, through the same gateway and client: the
// before/after number of an agent-side change, from one run.
func (e *env) bulkAB(ctx context.Context) ([]*bench.Scenario, error) {
	if e.before == nil {
		return nil, nil
	}
	n := int64(e.cfg.bulkMiB) * mib
	s := &bench.Scenario{Name: fmt.Sprintf("bulk stream %d MiB, this agent", e.cfg.bulkMiB), Unit: "MiB/s",
		PeerName: "agent before the change", Better: bench.Higher}
	rate := func(d time.Duration) float64 { return float64(n) / mib / d.Seconds() }
	stream := func(h *hostgate.Host) (time.Duration, error) {
		return timeIt(func() error {
			p, err := h.Spawn(ctx, []string{"sh", "-c", "cat >/dev/null"}, hostgate.SpawnOptions{})
			if err != nil {
				return err
			}
			go func() { _, _ = io.Copy(io.Discard, p.Stdout()) }()
			go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
			werr := writeN(p.Stdin(), n)
			_ = p.Stdin().Close()
			return errors.Join(werr, p.Wait())
		})
	}
	for range e.cfg.pairs {
		a, err := stream(e.host)
		if err != nil {
			return nil, fmt.Errorf("this agent: %w", err)
		}
		b, err := stream(e.before)
		if err != nil {
			return nil, fmt.Errorf("agent before: %w", err)
		}
		s.Add(rate(a), rate(b))
	}
	return []*bench.Scenario{s}, nil
}
