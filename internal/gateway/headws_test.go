package gateway

import (
	"net/http"
	"testing"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/store"
)

// TestWebSocketHeadRefused: a HEAD with a WebSocket handshake's headers
// (GET routes take HEAD too) is answered as the API's JSON 405, before it
// does anything a handshake would: an agent's HEAD replaced the host's
// live tunnel (cutting its sessions) and audited a tunnel that never came
// up, and a caller's opened a stream to the host, each then answered by
// the WebSocket library's plain-text 405.
func TestWebSocketHeadRefused(t *testing.T) {
	e := newEnv(t, nil)
	agentTok := e.token(store.RoleAgent, "h1")
	_, hostKey := newKey(t)
	if _, err := e.dialAgent(agentTok, hostKey, hostgate.Info{Kind: "machine", OS: "linux"}); err != nil {
		t.Fatal(err)
	}
	admin := e.token(store.RoleAdmin)
	for _, c := range []struct{ path, token string }{
		{wire.ConnectPath, agentTok},
		{"/v1/hosts/h1/ssh", admin},
	} {
		req, _ := http.NewRequestWithContext(e.ctx, http.MethodHead, e.ts.URL+c.path, nil)
		req.Header.Set("Authorization", "Bearer "+c.token)
		req.Header.Set(wire.HeaderHostKey, hostKey)
		wsHeaders(req.Header)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Content-Type") != "application/json" || res.Header.Get("Allow") != "GET" {
			t.Errorf("HEAD %s: %d, Content-Type %q, Allow %q; want 405 application/json, Allow GET",
				c.path, res.StatusCode, res.Header.Get("Content-Type"), res.Header.Get("Allow"))
		}
	}
	// The host's tunnel is the one its agent opened, and serves.
	conn, err := e.relay("h1", admin)
	if err != nil {
		t.Fatalf("relay after the HEADs: %v", err)
	}
	echoRoundTrip(t, conn, 1<<10)
	sessions, err := e.store.Sessions(e.ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	tunnels := 0
	for _, s := range sessions {
		if s.Kind == "tunnel" {
			tunnels++
		}
	}
	if tunnels != 1 {
		t.Errorf("audit log holds %d tunnels, want the agent's 1: %+v", tunnels, sessions)
	}
}
