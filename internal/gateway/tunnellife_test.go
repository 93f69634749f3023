package gateway

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/store"
)

// An agent's connect handler returns once its tunnel is up; the tunnel
// lives on in goroutines of its own (tunnelLife). The handler's goroutine,
// grown by the TLS handshake and the upgrade, and the 8 KiB of net/http
// buffers its conn kept reachable were held per idle agent for as long as
// it stayed connected. The tunnel works and ends as before.
func TestConnectHandlerReturnsOnceTunnelIsUp(t *testing.T) {
	e := newEnv(t, nil)
	_, key := newKey(t)
	a, err := e.dialAgent(e.token(store.RoleAgent, "h1"), key, hostgate.Info{Kind: "machine", OS: "linux"})
	if err != nil {
		t.Fatal(err)
	}
	// A frame of the handler itself, not a goroutine it created.
	frame := []byte("\ngithub.com/hostgate/hostgate/internal/gateway.(*Server).agentConnect(")
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(10 * time.Second); ; {
		n := runtime.Stack(buf, true)
		if !bytes.Contains(buf[:n], frame) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the connect handler is still running with the tunnel up:\n%s", buf[:n])
		}
		time.Sleep(10 * time.Millisecond)
	}
	c, err := e.relay("h1", e.token(store.RoleAdmin))
	if err != nil {
		t.Fatal(err)
	}
	echoRoundTrip(t, c, 4<<10)
	a.close()
	for deadline := time.Now().Add(10 * time.Second); e.srv.tunnels.Connected("h1"); {
		if time.Now().After(deadline) {
			t.Fatal("host h1 still connected after its agent closed the tunnel")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
