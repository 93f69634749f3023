package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// value gathers reg and returns the value of the series name{label=value}
// (any labels when label is empty), and how many series name has.
func value(t *testing.T, reg *prometheus.Registry, name, label, lv string) (float64, int) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		var v float64
		for _, m := range mf.GetMetric() {
			if label != "" && !hasLabel(m, label, lv) {
				continue
			}
			v = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
		return v, len(mf.GetMetric())
	}
	t.Fatalf("no metric %s", name)
	return 0, 0
}

func hasLabel(m *dto.Metric, name, v string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == v {
			return true
		}
	}
	return false
}

func TestTwoGatewaysTwoRegistries(t *testing.T) {
	r1, r2 := prometheus.NewRegistry(), prometheus.NewRegistry()
	a, b := NewGateway(r1), NewGateway(r2)
	a.AuthFailures.WithLabelValues(ReasonUnknown).Inc()
	a.BytesRelayed.WithLabelValues(ToHost).Add(10)
	b.TunnelsConnected.Set(3)
	if v, n := value(t, r1, "hostgate_auth_failures_total", "reason", ReasonUnknown); v != 1 || n != 6 {
		t.Errorf("auth failures %v over %d series (want 1 over 6 pre-created)", v, n)
	}
	if v, _ := value(t, r2, "hostgate_relayed_bytes_total", "direction", ToHost); v != 0 {
		t.Errorf("registries share state: %v", v)
	}
	if v, _ := value(t, r2, "hostgate_tunnels_connected", "", ""); v != 3 {
		t.Errorf("tunnels %v", v)
	}
}
