package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestMedianPercentile(t *testing.T) {
	for _, tc := range []struct {
		xs       []float64
		med, p99 float64
	}{
		{[]float64{3}, 3, 3},
		{[]float64{5, 1, 3}, 3, 5},
		{[]float64{4, 1, 3, 2}, 2.5, 4},
	} {
		if got := Median(tc.xs); got != tc.med {
			t.Errorf("Median(%v) = %v, want %v", tc.xs, got, tc.med)
		}
		if got := Percentile(tc.xs, 99); got != tc.p99 {
			t.Errorf("Percentile(%v, 99) = %v, want %v", tc.xs, got, tc.p99)
		}
	}
	xs := make([]float64, 100)
	for i := range xs {
		xs[i] = float64(100 - i) // 100..1, unsorted
	}
	if got := Percentile(xs, 50); got != 50 {
		t.Errorf("p50 of 1..100 = %v, want 50", got)
	}
	if got := Percentile(xs, 99); got != 99 {
		t.Errorf("p99 of 1..100 = %v, want 99", got)
	}
	if !math.IsNaN(Median(nil)) || !math.IsNaN(Percentile(nil, 50)) {
		t.Error("empty input should give NaN")
	}
}

func TestScenarioResultIsMedianOfPairRatios(t *testing.T) {
	s := &Scenario{Name: "bulk", Unit: "MiB/s", PeerName: "ssh", Better: Higher}
	if _, err := s.Result(); !errors.Is(err, ErrNoPairs) {
		t.Fatalf("empty scenario: err %v, want ErrNoPairs", err)
	}
	// Pair ratios 2, 0.5, 1: median 1 even though the medians of each side
	// (200 and 100) would say 2.
	s.Add(200, 100)
	s.Add(100, 200)
	s.Add(300, 300)
	r, err := s.Result()
	if err != nil {
		t.Fatal(err)
	}
	if r.Ratio != 1 || r.RatioMin != 0.5 || r.RatioMax != 2 || r.Pairs != 3 {
		t.Errorf("ratio %v min %v max %v pairs %d, want 1 0.5 2 3", r.Ratio, r.RatioMin, r.RatioMax, r.Pairs)
	}
	if r.Hostgate != 200 || r.Peer != 200 {
		t.Errorf("medians %v/%v, want 200/200", r.Hostgate, r.Peer)
	}
	if Ratio(1, 0) != 0 {
		t.Error("ratio over a zero peer should be 0")
	}
}

func TestTableAndJSON(t *testing.T) {
	res := []Result{
		{Scenario: "exec p50", Unit: "ms", Hostgate: 4.2, Peer: 15.25, PeerName: "OpenSSH ControlMaster", Ratio: 0.275, RatioMin: 0.2, RatioMax: 0.31, Pairs: 5, Better: Lower},
		{Scenario: "bulk", Unit: "MiB/s", Hostgate: 612.4, Peer: 500, PeerName: "ssh", Ratio: 1.22, RatioMin: 1.1, RatioMax: 1.3, Pairs: 5, Better: Higher, Note: "256 MiB per run"},
	}
	var tb bytes.Buffer
	if err := WriteTable(&tb, res); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(tb.String()), "\n")
	want := []string{
		"| scenario | hostgate | peer | ratio (median of pairs) | min–max | better |",
		"|---|---:|---:|---:|---:|---|",
		"| exec p50 | 4.20 ms | 15.2 ms (OpenSSH ControlMaster) | 0.28× | 0.20–0.31 | lower |",
		"| bulk | 612 MiB/s | 500 MiB/s (ssh) | 1.22× | 1.10–1.30 | higher |",
		"",
		"- bulk: 256 MiB per run",
	}
	if len(lines) != len(want) {
		t.Fatalf("table:\n%s", tb.String())
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d:\n got %q\nwant %q", i, lines[i], want[i])
		}
	}
	var jb bytes.Buffer
	if err := WriteJSON(&jb, res); err != nil {
		t.Fatal(err)
	}
	var back []map[string]any
	if err := json.Unmarshal(jb.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back) != 2 || back[1]["scenario"] != "bulk" || back[1]["peerName"] != "ssh" || back[1]["better"] != "higher" || back[0]["ratio"] != 0.275 {
		t.Errorf("json: %s", jb.String())
	}
	jb.Reset()
	if err := WriteJSON(&jb, nil); err != nil || strings.TrimSpace(jb.String()) != "[]" {
		t.Errorf("empty json %q, %v", jb.String(), err)
	}
}

func TestAlternate(t *testing.T) {
	var ran []string
	side := func(name string) func() error {
		return func() error { ran = append(ran, name); return nil }
	}
	for pair, want := range []string{"hostgate peer", "peer hostgate", "hostgate peer", "peer hostgate"} {
		ran = nil
		if err := Alternate(pair, side("hostgate"), side("peer")); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(ran, " "); got != want {
			t.Errorf("pair %d ran %q, want %q", pair, got, want)
		}
	}
	for pair, want := range []string{"a b peer", "peer b a"} {
		ran = nil
		if err := Alternate(pair, side("a"), side("b"), side("peer")); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(ran, " "); got != want {
			t.Errorf("three sides, pair %d ran %q, want %q", pair, got, want)
		}
	}

	// An error ends the pair: the side after the failing one does not run,
	// whichever side failed and whichever went first.
	boom := errors.New("boom")
	fail := func(name string) func() error {
		return func() error { ran = append(ran, name); return boom }
	}
	for _, tc := range []struct {
		pair       int
		ours, peer func() error
		want       string
	}{
		{0, fail("hostgate"), side("peer"), "hostgate"},
		{1, side("hostgate"), fail("peer"), "peer"},
		{2, side("hostgate"), fail("peer"), "hostgate peer"},
		{3, fail("hostgate"), side("peer"), "peer hostgate"},
	} {
		ran = nil
		if err := Alternate(tc.pair, tc.ours, tc.peer); !errors.Is(err, boom) {
			t.Errorf("pair %d: err %v, want boom", tc.pair, err)
		}
		if got := strings.Join(ran, " "); got != tc.want {
			t.Errorf("pair %d with an error ran %q, want %q", tc.pair, got, tc.want)
		}
	}
}
