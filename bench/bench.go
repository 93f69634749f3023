// Package bench holds the arithmetic and the output of the side-by-side
// benchmark harness (bench/cmd/hgbench, run by scripts/bench): paired
// samples of hostgate and its peer, the median of the per-pair ratios, the
// markdown table and JSON list the harness writes to bench/latest.*, and
// the CPU meter (cpu.go) that says how much of the machine each side used.
package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// Better says which direction of a number is good.
type Better string

// The two directions.
const (
	Higher Better = "higher" // throughput
	Lower  Better = "lower"  // latency, memory
)

// Scenario accumulates the A/B pairs of one scenario. Each pair is one
// measurement of hostgate and one of the peer taken back to back (in the
// order Alternate gives), so load from the rest of the machine hits both
// alike; the ratio is taken per pair and the median of those ratios is
// reported.
type Scenario struct {
	Name     string
	Unit     string
	PeerName string
	Better   Better
	// Note is shown under the table (scaled sizes, skipped peers).
	Note string

	hostgate, peer []float64
}

// Add records one pair.
func (s *Scenario) Add(hostgate, peer float64) {
	s.hostgate = append(s.hostgate, hostgate)
	s.peer = append(s.peer, peer)
}

// Pairs is the number of pairs recorded.
func (s *Scenario) Pairs() int { return len(s.hostgate) }

// Result is one row of bench/latest.json.
type Result struct {
	Scenario string  `json:"scenario"`
	Unit     string  `json:"unit"`
	Hostgate float64 `json:"hostgate"`
	Peer     float64 `json:"peer"`
	PeerName string  `json:"peerName"`
	// Ratio is hostgate/peer, the median over pairs; read it with Better.
	Ratio    float64 `json:"ratio"`
	RatioMin float64 `json:"ratioMin"`
	RatioMax float64 `json:"ratioMax"`
	Pairs    int     `json:"pairs"`
	Better   Better  `json:"better"`
	Note     string  `json:"note,omitempty"`
}

// ErrNoPairs means a scenario was summarised before any pair was added.
var ErrNoPairs = errors.New("bench: scenario has no pairs")

// Result summarises the pairs: medians of each side and of the per-pair
// ratios hostgate/peer, with the smallest and largest pair ratio.
func (s *Scenario) Result() (Result, error) {
	if len(s.hostgate) == 0 {
		return Result{}, fmt.Errorf("%w: %s", ErrNoPairs, s.Name)
	}
	ratios := make([]float64, len(s.hostgate))
	for i := range s.hostgate {
		ratios[i] = Ratio(s.hostgate[i], s.peer[i])
	}
	return Result{
		Scenario: s.Name, Unit: s.Unit, PeerName: s.PeerName, Better: s.Better, Note: s.Note,
		Hostgate: Median(s.hostgate), Peer: Median(s.peer),
		Ratio: Median(ratios), RatioMin: slices.Min(ratios), RatioMax: slices.Max(ratios),
		Pairs: len(ratios),
	}, nil
}

// Alternate runs the sides of A/B pair number pair (counting from 0): in
// the order given in even pairs and in reverse in odd ones, so that over
// the pairs neither side always runs right after the other. Callers pass
// hostgate's side first. It stops at the first error and returns it.
//
// The order is not neutral: a measurement runs in whatever state the one
// before it left (caches, memory just freed, CPU frequency). Twelve pairs
// of the "bulk stream from head -c" row, the order alternated by hand, gave
// a median ratio of 0.95× in pairs where both sides ran after hostgate and
// 0.67× where both ran after OpenSSH. With hostgate always first every pair
// leans the same way, and the median of pairs cannot cancel it.
//
// With three sides (hostgate, hostgate another way, the peer) odd pairs
// run the peer, hostgate another way, hostgate.
func Alternate(pair int, sides ...func() error) error {
	for i := range sides {
		if pair%2 == 1 {
			i = len(sides) - 1 - i
		}
		if err := sides[i](); err != nil {
			return err
		}
	}
	return nil
}

// Ratio is a/b; 0 when b is 0 (a peer that measured nothing).
func Ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// Median of xs (the mean of the middle two for an even count); NaN for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Percentile is the nearest-rank p-th percentile (0 < p ≤ 100) of xs; NaN
// for none.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}

// WriteTable writes results as a markdown table, then their notes.
func WriteTable(w io.Writer, results []Result) error {
	var b strings.Builder
	b.WriteString("| scenario | hostgate | peer | ratio (median of pairs) | min–max | better |\n")
	b.WriteString("|---|---:|---:|---:|---:|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %s %s | %s %s (%s) | %.2f× | %.2f–%.2f | %s |\n",
			r.Scenario, num(r.Hostgate), r.Unit, num(r.Peer), r.Unit, r.PeerName, r.Ratio, r.RatioMin, r.RatioMax, r.Better)
	}
	first := true
	for _, r := range results {
		if r.Note == "" {
			continue
		}
		if first {
			b.WriteString("\n")
			first = false
		}
		fmt.Fprintf(&b, "- %s: %s\n", r.Scenario, r.Note)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON writes results as an indented JSON list.
func WriteJSON(w io.Writer, results []Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if results == nil {
		results = []Result{}
	}
	return enc.Encode(results)
}

// num prints a number with three significant figures, without exponent.
func num(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}
