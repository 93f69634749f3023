package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// openBearerTerminal opens host id's web terminal with a bearer token and
// waits until its shell answers.
func openBearerTerminal(t *testing.T, ctx context.Context, g *gw, id string) *websocket.Conn {
	t.Helper()
	hdr := http.Header{}
	hdr.Set("Authorization", "Bearer "+g.admin)
	return dialTerminal(t, ctx, g, id, hdr)
}

// TestTerminalSaysWhyItsHostWent: a web terminal whose host's tunnel ends
// under it (the agent stops or is killed, the gateway shuts down) tells
// the page so, and what to do. The page showed "sshlayer: process:
// sshlayer: connection lost: EOF" for each.
func TestTerminalSaysWhyItsHostWent(t *testing.T) {
	g := startGateway(t, "")
	ctx := testCtx(t, 3*time.Minute)
	agentState := t.TempDir() // one host key for the agent's every start
	const agentGone = "host alpha: its agent disconnected from the gateway; its shell ended: reload the page for a new terminal"
	for _, c := range []struct {
		name string
		end  func(agent *proc)
		want string
	}{
		{"agent stops", func(a *proc) { a.stop() }, agentGone},
		{"agent killed", func(a *proc) { a.kill() }, agentGone},
		// The terminal's own end at shutdown ("terminal closed: the
		// gateway is shutting down") may come first, or its tunnel's.
		{"gateway stops", func(*proc) { g.stop() }, "the gateway is shutting down"},
	} {
		t.Run(c.name, func(t *testing.T) {
			agent := g.startAgent("alpha", agentState)
			defer agent.stop()
			ws := openBearerTerminal(t, ctx, g, "alpha")
			c.end(agent)
			if err := readUntil(ctx, ws, c.want); err != nil {
				t.Fatalf("terminal after its host went: %v", err)
			}
		})
	}
}
