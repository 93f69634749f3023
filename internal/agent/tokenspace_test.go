package agent

import (
	"log/slog"
	"strings"
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

// A --host-id read from a file keeps its newline the same way (a
// Kubernetes ConfigMap's env var): net/http refused the header it went
// into at every dial ("invalid header field value"), which the agent
// retried for ever as if the network failed. It is trimmed as the token
// is; a control character inside it is refused at the start, naming
// --host-id.
func TestConnectHostIDWithTrailingNewline(t *testing.T) {
	g := newGW(t)
	var logs syncBuffer
	tunnels := runAgent(t, g.ctx, ConnectConfig{GatewayURL: g.ts.URL, Token: g.token(store.RoleAgent, "h1"), HostID: "h1\r\n", StateDir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	select {
	case id := <-tunnels:
		if id != "h1" {
			t.Fatalf("tunnel for %q, want h1", id)
		}
	case <-logs.has("reconnecting"):
		t.Fatalf("no tunnel: %s", logs.String())
	}
	_, err := newConnector(&ConnectConfig{GatewayURL: g.ts.URL, Token: "t", HostID: "h\x001", StateDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "--host-id") {
		t.Errorf("a host id with a NUL: %v, want it refused naming --host-id", err)
	}
}
