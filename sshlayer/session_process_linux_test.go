package sshlayer

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"

	"github.com/hostgate/hostgate/internal/procstat"
	"github.com/hostgate/hostgate/internal/testenv"
)

// TestKillSessionBothScans: both ways of finding the session's members
// (probing the pids allocated since the leader, and listing /proc when that
// range is long) kill and wait for a background member the leader left
// behind, in its group or, started with job control, in a group of its own.
func TestKillSessionBothScans(t *testing.T) {
	defer func(old int) { maxPIDProbe = old }(maxPIDProbe)
	// The job-control case needs bash: dash (sh on Debian) turns job
	// control on only on a terminal ("set: can't access tty; job control
	// turned off") and leaves the job in the shell's group, which a
	// group kill alone ends too.
	type job struct {
		shell, script string
		ownGroup      bool // the job is in a group of its own
	}
	cases := []job{{"sh", "sleep 300 & echo $!", false}}
	_, err := exec.LookPath("bash")
	haveBash := err == nil
	if haveBash {
		cases = append(cases, job{"bash", "set -m; sleep 300 & echo $!", true})
	}
	for _, tc := range cases {
		script := tc.script
		for _, probe := range []int{1 << 30, -1} { // -1: always list /proc
			maxPIDProbe = probe
			cmd, leader, bg, mark := startLeftover(t, tc.shell, script)
			if pgid, err := syscall.Getpgid(bg); err != nil || (pgid != leader) == !tc.ownGroup {
				t.Fatalf("%q: background pid %d in group %d (%v), leader %d; want a group of its own: %v", script, bg, pgid, err, leader, tc.ownGroup)
			}
			waitExited(leader)
			killSession(leader, leader, mark, 30*time.Second)
			// bg was reparented; a zombie its new parent has not reaped yet
			// counts as gone.
			var buf procstat.Buf
			if _, live := procstat.Session(bg, &buf); live {
				t.Errorf("%q, probe limit %d: background pid %d still running after killSession", script, probe, bg)
			}
			_ = cmd.Wait()
		}
	}
	// Without bash, the sh case has run; the test is then a skip (a
	// failure under HOSTGATE_E2E=require), not a pass without its
	// job-control case.
	testenv.RequirePeer(t, "bash (the job-control case)", haveBash)
}

// startLeftover starts `shell -c script` as a session of its own, script
// printing the pid of a background process it leaves, and returns its
// leader's pid, that process's and markPIDs() before the start.
func startLeftover(t *testing.T, shell, script string) (cmd *exec.Cmd, leader, bg int, mark pidMark) {
	t.Helper()
	cmd = exec.Command(shell, "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	mark = markPIDs()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	bg, err = strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("background pid %q: %v", line, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(bg, syscall.SIGKILL) })
	return cmd, cmd.Process.Pid, bg, mark
}

// TestKillSessionAfterPIDWrap: a command's leftover whose pid is below its
// leader's, as after pid numbers wrapped and climbed past the leader's
// again while it ran, is killed with the command, on both scans. Only the
// wrap is simulated: the leader's pid is taken to be just above the
// leftover's, the last pid allocated a little above that, and a pid
// space's worth of forks counted since the start; the leftover is a real
// process of the real session.
func TestKillSessionAfterPIDWrap(t *testing.T) {
	defer func(old int) { maxPIDProbe = old }(maxPIDProbe)
	defer func(old func() int) { lastPID = old }(lastPID)
	defer func(old func() uint64) { forkCount = old }(forkCount)
	// A kill marks what it read, here the simulated counts.
	defer lastMark.Store(nil)
	for _, probe := range []int{1 << 30, -1} { // -1: always list /proc
		maxPIDProbe = probe
		cmd, sid, bg, mark := startLeftover(t, "sh", "sleep 300 & echo $!")
		if mark.forks == 0 || mark.last == 0 {
			t.Fatalf("markPIDs: %+v; /proc/stat's processes and ns_last_pid are Linux's", mark)
		}
		waitExited(sid)
		leader := bg + 1 // the leader's pid after a wrap, above its child's
		lastPID = func() int { return leader + 2 }
		forkCount = func() uint64 { return mark.forks + 1<<22 } // pid_max's maximum
		killSession(sid, leader, mark, 30*time.Second)
		lastPID, forkCount = readLastPID, readForkCount
		lastMark.Store(nil)
		var buf procstat.Buf
		if _, live := procstat.Session(bg, &buf); live {
			t.Errorf("probe limit %d: leftover pid %d, below its leader's after a wrap, still running after killSession", probe, bg)
		}
		_ = cmd.Wait()
	}
}

// TestChoosePIDScan: the scan is the cheap probe of (leader, last] only
// when the forks since the mark before the leader's start fit in the pids
// allocated since (with forkSlack for the forks in flight); any more, or a
// count or last pid unknown, and every pid is a candidate.
func TestChoosePIDScan(t *testing.T) {
	defer func(old int) { maxPIDProbe = old }(maxPIDProbe)
	maxPIDProbe = 1024
	mark := pidMark{last: 4990, forks: 100}
	for _, tc := range []struct {
		leader, last int
		start        pidMark
		now          uint64
		want         pidScan
	}{
		{5000, 5003, mark, 113, scanProbe},             // 13 pids since the mark, 13 forks
		{5000, 5003, mark, 101, scanProbe},             // the leader alone
		{5000, 5003, mark, 113 + forkSlack, scanProbe}, // forks in flight at the reads
		{5000, 5003, mark, 114 + forkSlack, scanAll},   // more than fit in (4990, 5003]
		{5000, 5003, mark, 100 + 40000, scanAll},       // wrapped and climbed past the leader again
		{5000, 9000, mark, 3000, scanAbove},            // a long range, no wrap
		{5000, 9000, mark, 100000, scanAll},
		{5000, 4000, mark, 104, scanAll},                            // last below the leader: wrapped
		{5000, 5003, pidMark{last: 4990}, 104, scanAll},             // count unknown
		{5000, 5003, mark, 0, scanAll},                              // count unknown
		{5000, 5003, mark, 100, scanAll},                            // a count that does not count
		{5000, 5003, pidMark{forks: 100}, 104, scanAll},             // last pid unknown at the mark
		{5000, 0, mark, 104, scanAll},                               // last pid unknown
		{5000, 5003, pidMark{last: 6000, forks: 100}, 104, scanAll}, // wrapped before the leader started
	} {
		if got := choosePIDScan(tc.leader, tc.last, tc.start, tc.now); got != tc.want {
			t.Errorf("choosePIDScan(leader %d, last %d, mark %+v, forks now %d) = %d, want %d", tc.leader, tc.last, tc.start, tc.now, got, tc.want)
		}
	}
}

// TestForkCount: /proc/stat's count of forks is found and moves with a
// fork; its line is found wherever it is, and a missing or bad one is
// unknown.
func TestForkCount(t *testing.T) {
	before := readForkCount()
	if err := exec.Command("true").Run(); err != nil {
		t.Fatal(err)
	}
	if after := readForkCount(); before == 0 || after <= before {
		t.Fatalf("fork count %d, then %d after a fork", before, after)
	}
	for _, tc := range []struct {
		stat  string
		atEOF bool
		want  uint64
		whole bool
	}{
		{"cpu  1 2 3\nintr 0 0\nctxt 9\nprocesses 2858080\nprocs_running 1\n", true, 2858080, true},
		{"cpu  1 2 3\nintr 0 0\nctxt 9\nprocesses 2858080\nprocs_running", false, 2858080, true},
		{"cpu  1\nprocesses 285", false, 0, false}, // the rest of the line to come
		{"cpu  1\nintr 0 0", false, 0, false},
		{"cpu  1\nprocesses 7", true, 7, true},
		{"cpu  1\nprocs_running 1\n", true, 0, true},
		{"cpu  1\nprocesses x\n", false, 0, true},
		{"cpu  1\nprocesses 99999999999999999999\n", false, 0, true},
		{"", true, 0, true},
	} {
		if got, whole := parseForkCount([]byte(tc.stat), tc.atEOF); got != tc.want || whole != tc.whole {
			t.Errorf("parseForkCount(%q, atEOF %v) = %d %v, want %d %v", tc.stat, tc.atEOF, got, whole, tc.want, tc.whole)
		}
	}
}

// TestChildOOMScoreAdj: a command, and what it starts, gets the configured
// oom_score_adj from its first instruction, so that out of memory the
// kernel takes it before the server (a sandbox's agent); with none set it
// keeps the server's, and the server keeps its own. The server wrote it to
// the command after the start: a child forked at once kept the server's
// (281 of 400 runs of `cat /proc/self/oom_score_adj & wait`), and this
// test's shell looked again for up to 10 s. Each way a command starts is
// covered: a shell on pipes, a direct command, a terminal, under
// ChildTasks (startMu) and not, and starts at once from several sessions;
// and the command is not left traced.
func TestChildOOMScoreAdj(t *testing.T) {
	ownB, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		t.Fatal(err) // Linux has it: a skip here would pass in CI unnoticed
	}
	own := strings.TrimSpace(string(ownB))
	const look = `read a < /proc/self/oom_score_adj; cat /proc/self/oom_score_adj & wait; echo $a; grep TracerPid /proc/self/status`
	for _, tc := range []struct {
		name  string
		adj   int
		tasks *TaskLimit
		want  string
	}{
		{"none", 0, nil, own},
		{"500", 500, nil, "500"},
		{"500 under ChildTasks", 500, &TaskLimit{Max: 1 << 20}, "500"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := srvStartServer(t, &ServerConfig{ChildOOMScoreAdj: tc.adj, ChildTasks: tc.tasks})
			c := srvDialServer(t, ts)
			want := []string{tc.want, tc.want, "TracerPid:", "0"}
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Go(func() {
					for i := range 10 {
						out, _, err := srvRunCmd(t, c, look, nil)
						if got := strings.Fields(out); err != nil || !slices.Equal(got, want) {
							t.Errorf("session %d, run %d: %q %v, want %q for a child forked at once, the command, and no tracer", g, i, out, err, want)
							return
						}
					}
				})
			}
			wg.Wait()
			// A direct command (no shell where the server's is dash).
			if out, _, err := srvRunCmd(t, c, "cat /proc/self/oom_score_adj", nil); err != nil || strings.TrimSpace(out) != tc.want {
				t.Errorf("a direct command: %q %v, want %s", out, err, tc.want)
			}
			// A terminal.
			s, err := c.NewSession()
			if err != nil {
				t.Fatal(err)
			}
			if err := s.RequestPty("dumb", 24, 80, nil); err != nil {
				t.Fatal(err)
			}
			out, err := s.Output(look)
			_ = s.Close()
			if got := strings.Fields(string(out)); err != nil || !slices.Equal(got, want) {
				t.Errorf("a terminal's command: %q %v, want %q", out, err, want)
			}
			if now, err := os.ReadFile("/proc/self/oom_score_adj"); err != nil || strings.TrimSpace(string(now)) != own {
				t.Errorf("the server's own oom_score_adj is %q (%v) after its commands started, want %q", now, err, own)
			}
		})
	}
}

// TestChildTasks: under ChildTasks each command, and what it starts,
// gets a soft RLIMIT_NPROC of Max from its first instruction (its hard one
// the server's), and the server keeps its own; while Count says Max are
// held, a command is refused as a fork at the limit is, not started, so
// the server's own starts cannot take what it keeps for its threads.
func TestChildTasks(t *testing.T) {
	var own unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NPROC, &own); err != nil {
		t.Fatal(err)
	}
	if own.Cur < 41 {
		t.Fatalf("this process's RLIMIT_NPROC is %d; the test needs more than 40", own.Cur)
	}
	var held atomic.Int64
	held.Store(3)
	ts := srvStartServer(t, &ServerConfig{AlwaysShell: true, ChildTasks: &TaskLimit{
		Max:   40,
		Count: func() (int, error) { return int(held.Load()), nil },
	}})
	c := srvDialServer(t, ts)
	want := fmt.Sprintf("Max processes 40 %d processes", own.Max)
	if own.Max == unix.RLIM_INFINITY {
		want = "Max processes 40 unlimited processes"
	}
	for range 5 {
		s, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		// The shell reads it in a builtin at once, then a child reads it.
		out, err := s.Output(`while read -r l; do case $l in "Max processes"*) echo $l;; esac; done </proc/self/limits; grep 'Max processes' /proc/self/limits`)
		_ = s.Close()
		if got := strings.Join(strings.Fields(string(out)), " "); err != nil || got != want+" "+want {
			t.Fatalf("a command and its child under ChildTasks.Max 40: %q %v, want %q twice", got, err, want)
		}
	}
	var after unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NPROC, &after); err != nil || after != own {
		t.Errorf("the server's own RLIMIT_NPROC after the starts: %+v %v, want %+v", after, err, own)
	}

	held.Store(40)
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.CombinedOutput("echo started")
	_ = s.Close()
	if err == nil || strings.Contains(string(out), "started") {
		t.Errorf("a command at ChildTasks.Max: %q %v, want it refused", out, err)
	}
	if _, err := NewServer(&ServerConfig{HostKey: ts.ClientSigner, AuthorizedKeys: []ssh.PublicKey{ts.ClientSigner.PublicKey()}, ChildTasks: &TaskLimit{}}); err == nil {
		t.Error("ChildTasks.Max 0 accepted")
	}
}

// BenchmarkOOMScoreAdjStart: a command's round trip (`true` through the
// shell, on an open connection) under ChildOOMScoreAdj, started traced and
// set at its exec, against the same start untraced and set after it (the
// way before, and the fallback where tracing is refused), alternated in
// one loop so both see the same load. Reported: ns/op of each and
// traced/after.
func BenchmarkOOMScoreAdjStart(b *testing.B) {
	ts := srvStartServer(b, &ServerConfig{ChildOOMScoreAdj: 500, AlwaysShell: true})
	c := srvDialServer(b, ts)
	defer ptraceRefused.Store(ptraceRefused.Load())
	var traced, after time.Duration
	run := func(refused bool, d *time.Duration) {
		ptraceRefused.Store(refused)
		t0 := time.Now()
		if out, _, err := srvRunCmd(b, c, "true", nil); err != nil {
			b.Fatalf("%q %v", out, err)
		}
		*d += time.Since(t0)
	}
	n := 0
	for b.Loop() {
		if n%2 == 0 {
			run(false, &traced)
			run(true, &after)
		} else {
			run(true, &after)
			run(false, &traced)
		}
		n++
	}
	b.ReportMetric(float64(traced.Nanoseconds())/float64(n), "traced-ns/op")
	b.ReportMetric(float64(after.Nanoseconds())/float64(n), "after-ns/op")
	b.ReportMetric(float64(traced)/float64(after), "traced/after")
}
