package main

import (
	"context"
	"fmt"
	"time"

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
	for range e.cfg.pairs {
		a, err := streamTo(ctx, e.host, n)
		if err != nil {
			return nil, fmt.Errorf("this agent: %w", err)
		}
		b, err := streamTo(ctx, e.before, n)
		if err != nil {
			return nil, fmt.Errorf("agent before: %w", err)
		}
		s.Add(rate(a), rate(b))
	}
	return []*bench.Scenario{s}, nil
}
