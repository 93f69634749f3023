package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

// CPU time, read from /proc (Linux). Throughput says how long a side took;
// on a machine whose cores every process of both paths shares, CPU time per
// unit of work says why, and where: hostgate's path has a relay process
// (the gateway) that OpenSSH's has not.

// clockTick is the unit of /proc's CPU times, USER_HZ: 100 per second on
// every Linux architecture Go supports (sysconf(_SC_CLK_TCK) is fixed by
// the ABI, not by the kernel's HZ).
const clockTick = 10 * time.Millisecond

// ErrProcFormat means a /proc file did not read as expected.
var ErrProcFormat = errors.New("bench: unexpected /proc format")

// MachineCPU returns the CPU time all processors have spent busy since
// boot: user, nice, system, irq and softirq from /proc/stat. Steal, time
// the hypervisor gave to someone else, is left out: it is not this
// machine's work.
func MachineCPU() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	t, err := parseProcStat(b)
	return time.Duration(t) * clockTick, err
}

// ProcessCPU returns the CPU time (user and system) process pid has used.
func ProcessCPU(pid int) (time.Duration, error) {
	t, err := ProcessStat(pid)
	return t.CPU, err
}

// ProcessTimes is what ProcessStat reads of a process.
type ProcessTimes struct {
	// CPU is the CPU time (user and system) the process has used.
	CPU time.Duration
	// Start is when the process started, in clock ticks since boot: with
	// the pid it names one process, since pids are reused.
	Start uint64
}

// ProcessStat returns the CPU time and start time of process pid.
func ProcessStat(pid int) (ProcessTimes, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ProcessTimes{}, err
	}
	st, err := parsePidStat(b)
	return ProcessTimes{CPU: time.Duration(st.ticks) * clockTick, Start: st.start}, err
}

// Descendants returns the pids of the processes below pid (children,
// their children, ...), found by the parent field of every
// /proc/PID/stat. A process that starts or ends meanwhile may be missed.
func Descendants(pid int) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	children := map[int][]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue // not a process
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // ended since ReadDir
		}
		st, err := parsePidStat(b)
		if err != nil {
			return nil, fmt.Errorf("/proc/%d/stat: %w", p, err)
		}
		children[st.ppid] = append(children[st.ppid], p)
	}
	var out []int
	seen := map[int]bool{pid: true} // a pid reused during the scan could close a loop
	for next := []int{pid}; len(next) > 0; {
		p := next[0]
		next = next[1:]
		for _, c := range children[p] {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
				next = append(next, c)
			}
		}
	}
	return out, nil
}

// parseProcStat sums the busy fields of /proc/stat's first line, "cpu
// user nice system idle iowait irq softirq steal guest guest_nice" (guest
// time is already inside user and nice).
func parseProcStat(b []byte) (uint64, error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 8 || string(f[0]) != "cpu" {
		return 0, fmt.Errorf("%w: /proc/stat first line %.60q", ErrProcFormat, line)
	}
	var sum uint64
	for _, i := range []int{1, 2, 3, 6, 7} {
		v, err := strconv.ParseUint(string(f[i]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: /proc/stat field %d: %v", ErrProcFormat, i, err)
		}
		sum += v
	}
	return sum, nil
}

// pidStat is what this package reads of /proc/PID/stat.
type pidStat struct {
	ppid  int
	ticks uint64 // utime+stime
	start uint64 // starttime, clock ticks after boot
}

// parsePidStat reads /proc/PID/stat. The command name, field 2, is in
// parentheses and may hold spaces and parentheses itself, so fields are
// counted from the last ')'.
func parsePidStat(b []byte) (pidStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return pidStat{}, fmt.Errorf("%w: no command name in /proc/PID/stat", ErrProcFormat)
	}
	// After ")": state (field 3), ppid (4) ... utime (14), stime (15) ...
	// starttime (22).
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return pidStat{}, fmt.Errorf("%w: %d fields after the command name in /proc/PID/stat", ErrProcFormat, len(f))
	}
	var st pidStat
	var err error
	if st.ppid, err = strconv.Atoi(string(f[1])); err != nil || st.ppid < 0 {
		return pidStat{}, fmt.Errorf("%w: /proc/PID/stat parent %q", ErrProcFormat, f[1])
	}
	for _, s := range f[11:13] {
		v, err := strconv.ParseUint(string(s), 10, 64)
		if err != nil {
			return pidStat{}, fmt.Errorf("%w: /proc/PID/stat times: %v", ErrProcFormat, err)
		}
		st.ticks += v
	}
	if st.start, err = strconv.ParseUint(string(f[19]), 10, 64); err != nil {
		return pidStat{}, fmt.Errorf("%w: /proc/PID/stat start time: %v", ErrProcFormat, err)
	}
	return st, nil
}

// CPUMeter measures the CPU time the machine, and each of some processes,
// use between StartCPU and Stop.
type CPUMeter struct {
	pids    []int
	machine time.Duration
	procs   []time.Duration
}

// StartCPU starts a meter for the machine and the processes pids.
func StartCPU(pids ...int) (*CPUMeter, error) {
	m := &CPUMeter{pids: pids, procs: make([]time.Duration, len(pids))}
	var err error
	if m.machine, err = MachineCPU(); err != nil {
		return nil, err
	}
	for i, pid := range pids {
		if m.procs[i], err = ProcessCPU(pid); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Stop returns the CPU time the machine used since StartCPU, and each
// process, in the order of the pids given.
func (m *CPUMeter) Stop() (machine time.Duration, procs []time.Duration, err error) {
	now, err := MachineCPU()
	if err != nil {
		return 0, nil, err
	}
	procs = make([]time.Duration, len(m.pids))
	for i, pid := range m.pids {
		t, err := ProcessCPU(pid)
		if err != nil {
			return 0, nil, err
		}
		procs[i] = t - m.procs[i]
	}
	return now - m.machine, procs, nil
}
