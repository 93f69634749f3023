package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hostgate/hostgate/client"
)

// BenchmarkRestore restores one checkpoint again and again through the
// gateway's API, of a workspace of 1 MiB and of 32 MiB: per op, the
// restore until it answers (its container made, the tar unpacked and
// checked, the sandbox's agent started) and then its first command. The
// terminate after each is not timed. The gateway starts the agent while
// the tar unpacks (dockerhost.Config.LoadAgent).
func BenchmarkRestore(b *testing.B) {
	ctx, c, e, _ := benchExecution(b)
	for _, mib := range []int{1, 32} {
		b.Run(fmt.Sprintf("%dMiB", mib), func(b *testing.B) {
			sh(b, ctx, c, e.ExecutionID, fmt.Sprintf("rm -f blob && head -c %d /dev/urandom > blob", mib<<20))
			cp, err := c.Checkpoint(ctx, e.ExecutionID, "bench")
			if err != nil {
				b.Fatal(err)
			}
			var restoreT, firstT time.Duration
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				r, err := c.Restore(ctx, client.RestoreRequest{CheckpointID: cp.CheckpointID})
				if err != nil {
					b.Fatalf("restore: %v", err)
				}
				t1 := time.Now()
				if _, err := c.Exec(ctx, r.ExecutionID, client.ExecRequest{Command: "true", TimeoutMs: 60000}); err != nil {
					b.Fatalf("first command: %v", err)
				}
				restoreT += t1.Sub(t0)
				firstT += time.Since(t1)
				b.StopTimer()
				if err := c.Terminate(context.WithoutCancel(ctx), r.ExecutionID); err != nil {
					b.Fatalf("terminate: %v", err)
				}
				b.StartTimer()
			}
			b.StopTimer()
			b.ReportMetric(float64(restoreT.Nanoseconds())/float64(b.N), "restore-ns/op")
			b.ReportMetric(float64(firstT.Nanoseconds())/float64(b.N), "first-ns/op")
		})
	}
}
