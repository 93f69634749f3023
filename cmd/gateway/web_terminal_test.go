package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coder/websocket"
)

// TestTerminalOfOfflineHostSaysWhatToDo: the terminal page of a host whose
// agent stopped says that its agent is not connected and how to bring it
// back; it said "cannot start a terminal on box: gateway: host offline",
// the Go error, and left the person guessing.
func TestTerminalOfOfflineHostSaysWhatToDo(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "state")
	base := startServe(t, dir)
	token := func(args ...string) string {
		t.Helper()
		out, err := cli(t, ctx, append([]string{"token", "create", "--state-dir", dir}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		return lastLine(out)
	}
	admin := token("--role", "admin")
	runAgent(t, ctx, base, token("--role", "agent", "--host", "box"))()

	waitOffline(t, ctx, base, admin, "box")

	h := http.Header{}
	h.Set("Authorization", "Bearer "+admin)
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/v1/hosts/box/pty", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	typ, b, err := ws.Read(ctx)
	if err != nil || typ != websocket.MessageText {
		t.Fatalf("first message: %v %q %v, want the spawn error", typ, b, err)
	}
	var msg struct{ Type, Message string }
	if err := json.Unmarshal(b, &msg); err != nil {
		t.Fatal(err)
	}
	want := "cannot start a terminal on box: its agent is not connected to the gateway: start it on the host (agent connect), then reload this page"
	if msg.Type != "error" || msg.Message != want {
		t.Fatalf("terminal of an offline host says %q, want %q", msg.Message, want)
	}
}
