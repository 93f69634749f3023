//go:build unix

package main

import (
	"os"
	"strings"
	"testing"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/client"
)

// TestClientErrorsNameTheHost: once a host's connection is lost, every
// error the Go client gives names the host and the operation, where they
// said "sshlayer: spawn: sshlayer: connection lost: EOF": a caller holding
// several hosts could not tell which went. Lost here between the caller
// and the gateway, where no reason from the gateway can name it.
func TestClientErrorsNameTheHost(t *testing.T) {
	ctx := testCtx(t)
	base, agentTok, clientTok := serveHost(t, ctx, "box")
	defer runAgent(t, ctx, base, agentTok)()
	cut := tcpCutter(t, strings.TrimPrefix(base, "http://"))
	h, err := client.Dial(ctx, "http://"+cut.addr, clientTok, "box")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := h.Exec(ctx, []string{"true"}, hostgate.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	fsys, err := h.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Stat(ctx, "/"); err != nil {
		t.Fatal(err)
	}
	// A live connection's errors name the host too (Connection.Name), and
	// keep their type.
	if _, err := fsys.Stat(ctx, "/nonexistent-hostgate"); !os.IsNotExist(err) || !strings.HasPrefix(err.Error(), "host box: stat /nonexistent-hostgate") {
		t.Errorf("Stat of a missing file: %v; want a not-exist error naming host box", err)
	}
	cut.cut()
	_, execErr := h.Exec(ctx, []string{"true"}, hostgate.ExecOptions{})
	_, statErr := fsys.Stat(ctx, "/tmp")
	_, spawnErr := h.Spawn(ctx, []string{"true"}, hostgate.SpawnOptions{})
	_, dialErr := h.Dial(ctx, "tcp", "127.0.0.1:1")
	_, lnErr := h.Listen(ctx, "tcp", "127.0.0.1:0")
	_, readErr := fsys.Open(ctx, "/etc/hostname")
	for op, err := range map[string]error{"spawn": execErr, "stat /tmp": statErr, "spawn ": spawnErr, "dial 127.0.0.1:1": dialErr, "listen 127.0.0.1:0": lnErr, "open /etc/hostname": readErr} {
		if err == nil || !strings.Contains(err.Error(), "host box: ") || !strings.Contains(err.Error(), strings.TrimSpace(op)) {
			t.Errorf("%s after the connection was lost: %v; want an error naming host box and the operation", op, err)
		}
	}
}
