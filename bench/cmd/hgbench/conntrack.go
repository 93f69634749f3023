package main

import (
	"context"
	"fmt"
	"time"

	"github.com/hostgate/hostgate/bench"
)

// conntrackRoom waits until the kernel's connection-tracking table has
// room for need more entries (with a quarter of it to spare): a full table
// drops new connections' packets, and the forward rows then measure stalls
// of seconds (a request of a forward run hung 30 s here after several runs
// back to back). Closed connections leave it 120 s after their TIME_WAIT
// began, so this waits at most 3 minutes, then fails naming the fix.
func (e *env) conntrackRoom(ctx context.Context, need int) error {
	deadline := time.Now().Add(3 * time.Minute)
	for logged := false; ; {
		count, limit, ok, err := bench.Conntrack()
		if err != nil || !ok {
			return err // no table, nothing to wait for
		}
		if count+need <= limit*3/4 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("conntrack table %d of %d entries in use, %d more needed: wait for TIME_WAIT entries to expire or raise net.netfilter.nf_conntrack_max", count, limit, need)
		}
		if !logged {
			e.log.Warn("waiting for room in the conntrack table (closed connections leave it after 120 s)", "inUse", count, "limit", limit, "need", need)
			logged = true
		}
		if err := sleep(ctx, 2*time.Second); err != nil {
			return err
		}
	}
}
