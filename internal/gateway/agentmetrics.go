package gateway

import (
	"cmp"
	"maps"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// maxAgentVersions bounds the version label of hostgate_agent_tunnels:
// each agent names its own build (its User-Agent), which the holder of an
// agent token chooses, so the label's values are not the gateway's to
// bound otherwise.
const maxAgentVersions = 20

// otherAgentVersions is the version label of the tunnels past
// maxAgentVersions builds; unknownAgentVersion that of an agent that sent
// no User-Agent.
const (
	otherAgentVersions  = "other"
	unknownAgentVersion = "unknown"
)

var agentTunnelsDesc = prometheus.NewDesc("hostgate_agent_tunnels",
	"Live tunnels of agents that dialed in, by the build each says it is (agentVersion of GET /v1/hosts): in a rolling upgrade, how many hosts still run an old agent. The 20 builds with the most tunnels have their own series, the rest count as version=\"other\".",
	[]string{"version"}, nil)

// agentTunnels collects hostgate_agent_tunnels from the registry at each
// scrape, so a version no tunnel runs any more leaves no series behind.
type agentTunnels struct{ r *Registry }

func (c agentTunnels) Describe(ch chan<- *prometheus.Desc) { ch <- agentTunnelsDesc }

func (c agentTunnels) Collect(ch chan<- prometheus.Metric) {
	for v, n := range boundVersions(c.r.agentVersions(), maxAgentVersions) {
		ch <- prometheus.MustNewConstMetric(agentTunnelsDesc, prometheus.GaugeValue, float64(n), v)
	}
}

// boundVersions keeps the max versions with the most tunnels (ties by
// name, so a scrape's series do not change at random) and counts the
// rest as otherAgentVersions.
func boundVersions(counts map[string]int, max int) map[string]int {
	if len(counts) <= max {
		return counts
	}
	vs := slices.SortedFunc(maps.Keys(counts), func(a, b string) int {
		return cmp.Or(cmp.Compare(counts[b], counts[a]), cmp.Compare(a, b))
	})
	out := map[string]int{}
	for i, v := range vs {
		if i < max {
			out[v] += counts[v]
		} else {
			out[otherAgentVersions] += counts[v]
		}
	}
	return out
}

// agentVersions counts the live tunnels of dialed-in agents by the build
// each said it is. A sandbox's tunnel is the gateway's own, not counted.
func (r *Registry) agentVersions() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	counts := map[string]int{}
	for _, e := range r.tunnels {
		pt, ok := e.t.(*pendingTunnel)
		if !ok {
			continue
		}
		select {
		case <-pt.Done():
			continue
		default:
		}
		v := pt.agent
		if v == "" {
			v = unknownAgentVersion
		}
		counts[v]++
	}
	return counts
}
