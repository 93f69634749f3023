package gateway

import (
	"bytes"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/store"
)

// An agent's connect handler returns once its tunnel is up; the tunnel
// lives on in its session's goroutine, and its end runs from callbacks
// (tunnelLife), with no goroutine parked to wait for it. The handler's
// goroutine, grown by the TLS handshake and the upgrade, and the 8 KiB of
// net/http buffers its conn kept reachable were held per idle agent for
// as long as it stayed connected, and a goroutine waiting for the end
// held a stack. The tunnel works and ends as before.
func TestConnectHandlerReturnsOnceTunnelIsUp(t *testing.T) {
	e := newEnv(t, nil)
	_, key := newKey(t)
	a, err := e.dialAgent(e.token(store.RoleAgent, "h1"), key, hostgate.Info{Kind: "machine", OS: "linux"})
	if err != nil {
		t.Fatal(err)
	}
	// A frame of the handler itself or of a wait for the end, not a
	// goroutine created there.
	frames := [][]byte{
		[]byte("\ngithub.com/hostgate/hostgate/internal/gateway.(*Server).agentConnect("),
		[]byte("\ngithub.com/hostgate/hostgate/internal/gateway.(*Server).tunnelLife("),
		[]byte("\ngithub.com/hostgate/hostgate/internal/gateway.(*Server).tunnelEnd("),
	}
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(10 * time.Second); ; {
		n := runtime.Stack(buf, true)
		if !slices.ContainsFunc(frames, func(f []byte) bool { return bytes.Contains(buf[:n], f) }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the connect handler, or a wait for the tunnel's end, is still running with the tunnel up:\n%s", buf[:n])
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
