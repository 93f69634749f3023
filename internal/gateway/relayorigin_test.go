package gateway

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/store"
)

// countingTunnels counts the streams opened through it.
type countingTunnels struct {
	Tunnels
	opens atomic.Int64
}

func (c *countingTunnels) Open(ctx context.Context, id string) (net.Conn, error) {
	c.opens.Add(1)
	return c.Tunnels.Open(ctx, id)
}

// A page of another site (a preview's, same-site with the gateway) that
// opens /v1/hosts/{id}/ssh in a logged-in admin's browser is refused
// before any stream to the host is opened: the host's agent sees no
// connection begin, and the refusal is the API's JSON 403. The
// gateway's own origin, and a program (no Origin), still get their relay.
func TestRelayForeignOriginOpensNoStream(t *testing.T) {
	var route *countingTunnels
	e := newEnv(t, &Config{Route: func(local *Registry) Tunnels {
		route = &countingTunnels{Tunnels: local}
		return route
	}})
	_, k := newKey(t)
	if _, err := e.dialAgent(e.token(store.RoleAgent, "a"), k, hostgate.Info{}); err != nil {
		t.Fatal(err)
	}
	admin := e.token(store.RoleAdmin)
	for _, origin := range []string{"http://3000--a.preview.example.com", "https://evil.example", "null"} {
		req, _ := http.NewRequestWithContext(e.ctx, "GET", e.ts.URL+"/v1/hosts/a/ssh", nil)
		wsHeaders(req.Header)
		req.AddCookie(&http.Cookie{Name: SessionCookie, Value: admin})
		req.Header.Set("Origin", origin)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden || res.Header.Get("Content-Type") != "application/json" {
			t.Errorf("Origin %s: %d %s, want a JSON 403", origin, res.StatusCode, res.Header.Get("Content-Type"))
		}
		if n := route.opens.Load(); n != 0 {
			t.Fatalf("Origin %s: %d streams opened to the host before the refusal, want none", origin, n)
		}
	}
	c, err := e.relay("a", admin)
	if err != nil {
		t.Fatal(err)
	}
	echoRoundTrip(t, c, 100)
	if n := route.opens.Load(); n != 1 {
		t.Errorf("a program's relay opened %d streams, want 1", n)
	}
}
