package main

import (
	"fmt"
	"time"

	"github.com/hostgate/hostgate/bench"
)

// cpuUse is the CPU time one side of a pair used: the whole machine's, and
// of it the gateway's and the bench agent's on hostgate's side, the ssh
// master's and sshd's on OpenSSH's.
type cpuUse struct{ machine, gateway, agent, ssh, sshd time.Duration }

// metered runs side and stores the CPU time it used in *u, with the
// processes' shares of it: the gateway's and the agent's on hostgate's side,
// the ssh master's and sshd's on OpenSSH's.
func (e *env) metered(u *cpuUse, hostgate bool, side func() error) func() error {
	if hostgate {
		return e.meter(u, meterHostgate, 0, side)
	}
	return e.meter(u, meterOpenSSH, 0, side)
}

// meteredAlone is metered for a side with no gateway, whose agent is the
// process agentPid (agentServe's).
func (e *env) meteredAlone(u *cpuUse, agentPid int, side func() error) func() error {
	return e.meter(u, meterAlone, agentPid, side)
}

// meterMode says whose share of a side's CPU time is read.
type meterMode int

const (
	meterHostgate meterMode = iota // the gateway and the bench agent
	meterAlone                     // one agent process, no gateway
	meterOpenSSH                   // the ssh master and sshd's processes
)

func (e *env) meter(u *cpuUse, mode meterMode, agentPid int, side func() error) func() error {
	return func() error {
		var (
			pids   []int
			server []int // sshd's processes: they may come and go
			err    error
		)
		switch mode {
		case meterHostgate:
			pids = []int{e.gw.Pid(), e.agent.Pid()}
		case meterAlone:
			pids = []int{agentPid}
		case meterOpenSSH:
			var master int
			if master, server, err = e.sshd.processes(); err != nil {
				return fmt.Errorf("cpu meter: %w", err)
			}
			pids = []int{master}
		}
		m, err := bench.StartCPU(pids...)
		if err != nil {
			return fmt.Errorf("cpu meter: %w", err)
		}
		before := readCPU(server)
		if err := side(); err != nil {
			return err
		}
		after := readCPU(server)
		machine, procs, err := m.Stop()
		if err != nil {
			return fmt.Errorf("cpu meter: %w", err)
		}
		u.machine = machine
		switch mode {
		case meterHostgate:
			u.gateway, u.agent = procs[0], procs[1]
		case meterAlone:
			u.agent = procs[0]
		case meterOpenSSH:
			u.ssh, u.sshd = procs[0], after.since(before)
		}
		return nil
	}
}

// cpuTimes is the CPU time of processes that may end at any time: a pid
// that cannot be read is left out.
type cpuTimes map[int]bench.ProcessTimes

func readCPU(pids []int) cpuTimes {
	t := cpuTimes{}
	for _, p := range pids {
		if pt, err := bench.ProcessStat(p); err == nil {
			t[p] = pt
		}
	}
	return t
}

// since is the CPU time the processes read both times used in between. A
// process that ended meanwhile counts for nothing, and so does a pid that
// names another process the second time (its start time differs).
func (t cpuTimes) since(before cpuTimes) time.Duration {
	var sum time.Duration
	for p, now := range t {
		if b, ok := before[p]; ok && b.Start == now.Start {
			sum += now.CPU - b.CPU
		}
	}
	return sum
}

// cpuRow is the companion of a throughput row: the machine's CPU time per
// unit of work on each side of every pair, with the gateway's and agent's
// part of hostgate's kept for the note.
type cpuRow struct {
	s         *bench.Scenario
	what      string // the unit of work, for the note
	gw, agent []float64
	// With peerShares, the note gives the ssh master's and sshd's part of
	// OpenSSH's time too: only where no process on its side is started
	// per unit of work (forward), so these two are OpenSSH's whole path.
	peerShares bool
	ssh, sshd  []float64
	alone      bool // hostgate's side had no gateway (agentServe)
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
	r.ssh = append(r.ssh, per(peer.ssh))
	r.sshd = append(r.sshd, per(peer.sshd))
}

// scenario returns the row, its note saying how hostgate's time divides.
func (r *cpuRow) scenario() *bench.Scenario {
	if r.s.Pairs() > 0 {
		ours := fmt.Sprintf("the gateway process used %.3g ms and the agent %.3g ms", bench.Median(r.gw), bench.Median(r.agent))
		if r.alone {
			ours = fmt.Sprintf("the agent process used %.3g ms", bench.Median(r.agent))
		}
		r.s.Note = fmt.Sprintf("the whole machine's busy CPU time (/proc/stat: user, nice, system, irq, softirq) while each side ran, per %s, every process and the kernel included; of hostgate's, %s (medians)",
			r.what, ours)
		if r.peerShares {
			r.s.Note += fmt.Sprintf("; of OpenSSH's, the ssh master used %.3g ms and sshd (its session process included) %.3g ms",
				bench.Median(r.ssh), bench.Median(r.sshd))
		}
	}
	return r.s
}
