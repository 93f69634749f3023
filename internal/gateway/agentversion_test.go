package gateway

import (
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/internal/testenv"
)

// TestHostsShowTheAgentBuild: GET /v1/hosts and /v1/hosts/{id} name the
// build a connected agent says it is (its User-Agent), so that an
// operator sees which hosts still run an old agent in a rolling upgrade;
// the tunnel up log line was the only place that said it. An agent older
// than that User-Agent shows Go's default, and a host that is not
// connected shows none.
func TestHostsShowTheAgentBuild(t *testing.T) {
	for ua, want := range map[string]string{
		"hostgate-agent (3f1c2ab4d5e6 2026-12-02T06:40:00Z go1.26.0)": "3f1c2ab4d5e6 2026-12-02T06:40:00Z go1.26.0",
		"Go-http-client/1.1": "Go-http-client/1.1",
	} {
		e := newEnv(t, nil)
		var logs testenv.LogBuffer
		e.srv.logger = slog.New(slog.NewTextHandler(&logs, nil))
		admin := e.token(store.RoleAdmin)
		_, key := newKey(t)
		a, err := e.dialAgentHeader(e.token(store.RoleAgent, "h"), key, hostgate.Info{Kind: "machine"}, signerOf(key), http.Header{"User-Agent": {ua}})
		if err != nil {
			t.Fatal(err)
		}
		waitLogLine(t, &logs, "tunnel up")
		_, other := newKey(t)
		e.pin("offline", other)

		var one HostRecord
		if code, _ := e.call("GET", "/v1/hosts/h", admin, nil, &one); code != http.StatusOK || !one.Connected || one.AgentVersion != want {
			t.Fatalf("GET /v1/hosts/h with User-Agent %q: %d %+v, want connected with agentVersion %q", ua, code, one, want)
		}
		var all struct{ Hosts []HostRecord }
		if code, _ := e.call("GET", "/v1/hosts", admin, nil, &all); code != http.StatusOK || len(all.Hosts) != 2 {
			t.Fatalf("GET /v1/hosts: %d %+v", code, all)
		}
		for _, h := range all.Hosts {
			if w := map[string]string{"h": want}[h.ID]; h.AgentVersion != w {
				t.Errorf("GET /v1/hosts: host %s agentVersion %q, want %q", h.ID, h.AgentVersion, w)
			}
		}

		a.close()
		for end := time.Now().Add(30 * time.Second); e.srv.tunnels.Connected("h"); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatal("host h still connected 30 s after its agent closed the tunnel")
			}
		}
		one = HostRecord{}
		if code, _ := e.call("GET", "/v1/hosts/h", admin, nil, &one); code != http.StatusOK || one.Connected || one.AgentVersion != "" {
			t.Fatalf("GET /v1/hosts/h after the agent left: %d %+v, want no agentVersion", code, one)
		}
	}
}
