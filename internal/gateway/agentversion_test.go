package gateway

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
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

// TestAgentTunnelsByVersion: /metrics counts the live tunnels of agents by
// the build each says it is, so a dashboard shows a rolling upgrade's
// progress, and the series of a build no tunnel runs any more goes.
func TestAgentTunnelsByVersion(t *testing.T) {
	e := newEnv(t, nil)
	const old, cur = "hostgate-agent (3f1c2ab4d5e6 2026-12-02T06:40:00Z go1.26.0)", "hostgate-agent (9a8b7c6d5e4f 2026-12-04T06:40:00Z go1.26.8)"
	agents := map[string]*fakeAgent{}
	for id, ua := range map[string]string{"a": old, "b": cur, "c": cur} {
		_, key := newKey(t)
		a, err := e.dialAgentHeader(e.token(store.RoleAgent, id), key, hostgate.Info{Kind: "machine"}, signerOf(key), http.Header{"User-Agent": {ua}})
		if err != nil {
			t.Fatal(err)
		}
		agents[id] = a
	}
	m := e.metricsText()
	for _, want := range []string{
		`hostgate_agent_tunnels{version="3f1c2ab4d5e6 2026-12-02T06:40:00Z go1.26.0"} 1`,
		`hostgate_agent_tunnels{version="9a8b7c6d5e4f 2026-12-04T06:40:00Z go1.26.8"} 2`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, grepLines(m, "hostgate_agent_tunnels"))
		}
	}
	agents["a"].close()
	for end := time.Now().Add(30 * time.Second); e.srv.tunnels.Connected("a"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("host a still connected 30 s after its agent closed the tunnel")
		}
	}
	if m := e.metricsText(); strings.Contains(m, "3f1c2ab4d5e6") {
		t.Errorf("/metrics still has the build no agent runs:\n%s", grepLines(m, "hostgate_agent_tunnels"))
	}
}

// TestAgentTunnelsVersionsBounded: agents name their own builds, so the
// version label takes at most maxAgentVersions values besides "other":
// the builds with the most tunnels keep their series.
func TestAgentTunnelsVersionsBounded(t *testing.T) {
	r := NewRegistry(0, nil)
	defer r.Close()
	register := func(id, version string) {
		pt := newPendingTunnel()
		pt.agent = version
		if _, _, err := r.Register(id, pt); err != nil {
			t.Fatal(err)
		}
	}
	for i := range maxAgentVersions + 5 {
		register(fmt.Sprintf("h%d", i), fmt.Sprintf("v%02d", i))
	}
	register("again", fmt.Sprintf("v%02d", maxAgentVersions+4)) // the last build, twice: it keeps a series
	register("none", "")
	got := boundVersions(r.agentVersions(), maxAgentVersions)
	if len(got) != maxAgentVersions+1 {
		t.Fatalf("%d series, want %d and other: %v", len(got), maxAgentVersions, got)
	}
	if got[fmt.Sprintf("v%02d", maxAgentVersions+4)] != 2 || got[otherAgentVersions] != 6 {
		t.Fatalf("series %v: want the build with 2 tunnels kept and the 6 past the bound as other", got)
	}
	sum := 0
	for _, n := range got {
		sum += n
	}
	if sum != maxAgentVersions+7 {
		t.Fatalf("series count %d tunnels, want all %d", sum, maxAgentVersions+7)
	}
}

// grepLines is the lines of text that contain s.
func grepLines(text, s string) string {
	var out []string
	for l := range strings.Lines(text) {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}

// TestAgentVersionNotUTF8: an agent's User-Agent may carry any byte from
// 0x80 up; it becomes a label of hostgate_agent_tunnels, and one that is
// not UTF-8 failed the whole /metrics scrape (from one agent token's
// connection). It is shown with those bytes replaced.
func TestAgentVersionNotUTF8(t *testing.T) {
	e := newEnv(t, nil)
	_, key := newKey(t)
	a, err := e.dialAgentHeader(e.token(store.RoleAgent, "h"), key, hostgate.Info{Kind: "machine"}, signerOf(key), http.Header{"User-Agent": {"hostgate-agent (b\xff\xfe\x80d)"}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	if m := e.metricsText(); !strings.Contains(m, `hostgate_agent_tunnels{version="b?d"} 1`) {
		t.Errorf("/metrics: want the version with its bytes replaced:\n%s", grepLines(m, "hostgate_agent_tunnels"))
	}
	var one HostRecord
	if code, _ := e.call("GET", "/v1/hosts/h", e.token(store.RoleAdmin), nil, &one); code != http.StatusOK || one.AgentVersion != "b?d" {
		t.Errorf("GET /v1/hosts/h: %d agentVersion %q, want %q", code, one.AgentVersion, "b?d")
	}
}
