package agent

import (
	"log/slog"
	"testing"

	"github.com/hostgate/hostgate/internal/store"
)

// A token read from a file keeps its newline when the file goes into the
// environment whole (a Kubernetes secret's env var, systemd's
// EnvironmentFile with quotes): the agent connects with it all the same,
// as the key signature already trims it.
func TestConnectTokenWithTrailingNewline(t *testing.T) {
	g := newGW(t)
	var logs syncBuffer
	tunnels := runAgent(t, g.ctx, ConnectConfig{GatewayURL: g.ts.URL, Token: g.token(store.RoleAgent, "h1") + "\n", StateDir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	select {
	case id := <-tunnels:
		if id != "h1" {
			t.Fatalf("tunnel for %q, want h1", id)
		}
	case <-logs.has("reconnecting"):
		t.Fatalf("no tunnel: %s", logs.String())
	}
}
