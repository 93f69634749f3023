package e2e

import (
	"net/http"
	"testing"
	"time"
)

// TestSandboxTerminalSaysWhyItEnded: the web terminal of a sandbox whose
// execution ends under it (a DELETE, its runtime out) tells the page the
// sandbox ended, why, and that a new sandbox is the way on, as the
// executions API's gone answers do; reloading the page, which it said
// too, only finds the sandbox gone.
func TestSandboxTerminalSaysWhyItEnded(t *testing.T) {
	g, c, image := execGateway(t)
	ctx := testCtx(t, 5*time.Minute)
	hdr := http.Header{}
	hdr.Set("Authorization", "Bearer "+g.admin)

	t.Run("terminated", func(t *testing.T) {
		e := provision(t, ctx, c, execRequest(image))
		ws := dialTerminal(t, ctx, g, e.ExecutionID, hdr)
		if err := c.Terminate(ctx, e.ExecutionID); err != nil {
			t.Fatal(err)
		}
		want := "host " + e.ExecutionID + ": its execution ended (reason terminated): start a new sandbox"
		if err := readUntil(ctx, ws, want); err != nil {
			t.Fatalf("terminal of a sandbox terminated under it: %v; want %q", err, want)
		}
	})
	t.Run("runtime", func(t *testing.T) {
		req := execRequest(image)
		req.Resources.RuntimeMs = 20_000
		e := provisionShort(t, ctx, c, req, 10*time.Second)
		ws := dialTerminal(t, ctx, g, e.ExecutionID, hdr)
		want := "host " + e.ExecutionID + ": its execution ended (reason runtime): start a new sandbox"
		if err := readUntil(ctx, ws, want); err != nil {
			t.Fatalf("terminal of a sandbox whose runtime ran out: %v; want %q", err, want)
		}
	})
}
