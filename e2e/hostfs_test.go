package e2e

import (
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/client"
	"github.com/hostgate/hostgate/providertest"
)

// TestHostFSConformance runs the provider suite on Host.FS through the
// real gateway and agent binaries: SFTP over SSH, over yamux, over the
// agent's WebSocket, as callers use it.
func TestHostFSConformance(t *testing.T) {
	g := startGateway(t, "")
	g.startAgent("fs", "")
	ctx := testCtx(t, 3*time.Minute)
	h, err := client.Dial(ctx, g.url, g.admin, "fs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	providertest.Run(t, func(t *testing.T) (hostgate.Provider, string) {
		p, err := h.FS(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return p, t.TempDir()
	})
}
