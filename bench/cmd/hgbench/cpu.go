package main

import (
	"fmt"
	"time"

	"github.com/hostgate/hostgate/bench"
)

// cpuUse is the CPU time one side of a pair used: the whole machine's, and
// of it the gateway's and the bench agent's (zero on OpenSSH's side).
type cpuUse struct{ machine, gateway, agent time.Duration }

// metered runs side and stores the CPU time it used in *u. With hostgate
// true the gateway's and the agent's own share is read too.
func (e *env) metered(u *cpuUse, hostgate bool, side func() error) func() error {
	return func() error {
		var pids []int
		if hostgate {
			pids = []int{e.gw.Pid(), e.agent.Pid()}
		}
		m, err := bench.StartCPU(pids...)
		if err != nil {
			return fmt.Errorf("cpu meter: %w", err)
		}
		if err := side(); err != nil {
			return err
		}
		machine, procs, err := m.Stop()
		if err != nil {
			return fmt.Errorf("cpu meter: %w", err)
		}
		u.machine = machine
		if hostgate {
			u.gateway, u.agent = procs[0], procs[1]
		}
		return nil
	}
}

// cpuRow is the companion of a throughput row: the machine's CPU time per
// unit of work on each side of every pair, with the gateway's and agent's
// part of hostgate's kept for the note.
type cpuRow struct {
	s         *bench.Scenario
	what      string // the unit of work, for the note
	gw, agent []float64
}

func newCPURow(of *bench.Scenario, what string) *cpuRow {
	return &cpuRow{what: what, s: &bench.Scenario{Name: of.Name + ", CPU time per " + what, Unit: "ms",
		PeerName: of.PeerName, Better: bench.Lower}}
}

// add records one pair: ours and peer each did work units.
func (r *cpuRow) add(ours, peer cpuUse, work float64) {
	per := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / work }
	r.s.Add(per(ours.machine), per(peer.machine))
	r.gw = append(r.gw, per(ours.gateway))
	r.agent = append(r.agent, per(ours.agent))
}

// scenario returns the row, its note saying how hostgate's time divides.
func (r *cpuRow) scenario() *bench.Scenario {
	if r.s.Pairs() > 0 {
		r.s.Note = fmt.Sprintf("the whole machine's busy CPU time (/proc/stat: user, nice, system, irq, softirq) while each side ran, per %s, every process and the kernel included; of hostgate's, the gateway process used %.3g ms and the agent %.3g ms (medians)",
			r.what, bench.Median(r.gw), bench.Median(r.agent))
	}
	return r.s
}
