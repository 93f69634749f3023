package dockerhost

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testKillStopped: KillStopped kills the stopped process it is given by
// pid if it has the name and docker exec started it (a stopped agent,
// attached with AttachStdio), and none other: not a decoy of the same name
// that docker exec started and sandbox code stopped too (it killed every
// such process, by name), not one running, not a stopped one sandbox code
// started (its parent inside the container), not PID 1. The pid is the
// one Stdio.PID maps from the engine's. Without a pid (an agent that
// reported none, where the gateway cannot map it) it kills the one
// stopped process of the name, and refuses to pick among several: it
// killed them all, the decoy with the agent.
func testKillStopped(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	ex := provision(t, h, emptyReq(img, small()))
	ctx := testCtx(t, time.Minute)
	var pids []int // the agent, the decoy, one running
	for range 3 {
		s, err := h.AttachStdio(ctx, ex.ExecutionID, []string{"sleep", "1000"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		pids = append(pids, startedPID(t, s))
	}
	agent, decoy, running := pids[0], pids[1], pids[2]
	// Stop the agent and the decoy; start and stop one of the sandbox's
	// own.
	list := `for d in /proc/[0-9]*; do read -r s < $d/stat; case "$s" in *"(sleep) "*) set -- ${s##*) }; echo "${d#/proc/} $1 $2";; esac; done | sort -n`
	res := sh(t, h, ex.ExecutionID, fmt.Sprintf(`(sleep 999 </dev/null >/dev/null 2>&1 &); sleep 0.2
for d in /proc/[0-9]*; do read -r s < $d/stat; case "$s" in *"(sleep) S 1 "*) kill -STOP ${d#/proc/};; esac; done
kill -STOP %d %d; sleep 0.2; `, agent, decoy)+list)
	before := res.Stdout
	// (The deadline's own sleep, under its shell, is listed too.)
	for _, want := range []string{fmt.Sprintf("%d T 0\n", agent), fmt.Sprintf("%d T 0\n", decoy), fmt.Sprintf("%d S 0\n", running)} {
		if !strings.Contains(before, want) {
			t.Fatalf("sleeps before: %q, want %q: Stdio.PID mapped %v, the attached sleeps' (the first two stopped)", before, want, pids)
		}
	}
	if strings.Count(before, " T 1") != 1 {
		t.Fatalf("sleeps before: %q, want one of the sandbox's stopped", before)
	}
	n, err := h.KillStopped(ctx, ex.ExecutionID, "sleep", 0)
	var cerr *StoppedCandidatesError
	if !errors.As(err, &cerr) || n != 0 || cerr.Count != 2 || !slices.Equal(cerr.PIDs, []int{min(agent, decoy), max(agent, decoy)}) || cerr.ExecutionID != ex.ExecutionID {
		t.Fatalf("KillStopped without a pid, two stopped: %d %v, want none killed and the two named", n, err)
	}
	if after := sh(t, h, ex.ExecutionID, list).Stdout; after != before {
		t.Fatalf("sleeps after KillStopped refused: %q, want as before: %q", after, before)
	}
	if n, err := h.KillStopped(ctx, ex.ExecutionID, "sleep", running); err != nil || n != 0 {
		t.Fatalf("KillStopped of a running one: %d %v, want none killed", n, err)
	}
	if n, err := h.KillStopped(ctx, ex.ExecutionID, "sleep", agent); err != nil || n != 1 {
		t.Fatalf("KillStopped of pid %d: %d %v, want 1 killed (the decoy %d left)", agent, n, err, decoy)
	}
	after := sh(t, h, ex.ExecutionID, list).Stdout
	if strings.Contains(after, fmt.Sprintf("%d ", agent)) || !strings.Contains(after, fmt.Sprintf("%d T 0", decoy)) ||
		strings.Count(after, " T 1") != 1 || strings.Count(after, " S 0") != 1 {
		t.Fatalf("sleeps after: %q (before %q), want the stopped one of pid %d gone, and the decoy %d, still stopped, with the others", after, before, agent, decoy)
	}
	if n, err := h.KillStopped(ctx, ex.ExecutionID, "sleep", 0); err != nil || n != 1 {
		t.Fatalf("KillStopped without a pid, one stopped: %d %v, want it killed", n, err)
	}
	if n, err := h.KillStopped(ctx, ex.ExecutionID, "agent-of-a-very-long-name", 0); err != nil || n != 0 {
		t.Fatalf("KillStopped of a name nothing has: %d %v", n, err)
	}
	if _, err := h.KillStopped(ctx, ex.ExecutionID, "sleep", -1); err == nil {
		t.Fatal("KillStopped of pid -1: no error")
	}
}

// testKillStoppedHeld: KillStopped's script runs as the sandbox's uid,
// which sandbox code that stops the agent may stop too (kill -STOP -1 in a
// loop stops every process of the uid but the loop's own): KillStopped
// then gives up at its own bound saying so, rather than wait as long as
// its caller does (here the test's minute; for ever for a caller without
// a deadline).
func testKillStoppedHeld(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	h.killStoppedWait = 3 * time.Second
	ex := provision(t, h, emptyReq(img, small()))
	ctx := testCtx(t, time.Minute)
	agent, err := h.AttachStdio(ctx, ex.ExecutionID, []string{"sleep", "1000"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Close()
	pid := startedPID(t, agent)
	stopper, err := h.AttachStdio(ctx, ex.ExecutionID, []string{"/bin/sh", "-c", "while :; do kill -STOP -1 2>/dev/null; done"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stopper.Close()
	startedPID(t, stopper)
	n, err := h.KillStopped(ctx, ex.ExecutionID, "sleep", pid)
	if ctx.Err() != nil {
		t.Fatalf("KillStopped while sandbox code stops every process of its uid: %d %v: waited until its caller gave up", n, err)
	}
	if err == nil || n != 0 || !strings.Contains(err.Error(), "kill -STOP") || !strings.Contains(err.Error(), ex.ExecutionID) {
		t.Fatalf("KillStopped while sandbox code stops every process of its uid: %d %v, want an error naming the execution and the stop", n, err)
	}
}

// testKillStoppedForgedComm: sandbox code that gives a process of its own
// a comm holding a newline ("sleep) T 0\nx", written to /proc/self/comm)
// makes that process's /proc/PID/stat start with a line "PID (sleep) T 0":
// a stopped sleep that docker exec started, to a reader of the first line
// only. The process runs, and its parent is in the container: KillStopped
// leaves it, without a pid and with its pid (it killed it both ways).
func testKillStoppedForgedComm(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	ex := provision(t, h, emptyReq(img, small()))
	ctx := testCtx(t, time.Minute)
	res := sh(t, h, ex.ExecutionID, `cd /workspace || exit 1
(sh -c 'printf "sleep) T 0\nx" > /proc/self/comm && echo $$ > forged; while :; do sleep 1; done' </dev/null >/dev/null 2>&1 &)
i=0; until [ -s forged ]; do i=$((i+1)); [ $i -gt 400 ] && { echo never ran; exit 1; }; sleep 0.05; done
p=$(cat forged); read -r s < /proc/$p/stat; echo "$p|$s"`)
	p, first, _ := strings.Cut(strings.TrimSpace(res.Stdout), "|")
	forged, err := strconv.Atoi(p)
	if err != nil || first != p+" (sleep) T 0" {
		t.Fatalf("the forged process: %+v, want its pid and its stat's first line %q", res, p+" (sleep) T 0")
	}
	for _, pid := range []int{0, forged} {
		if n, err := h.KillStopped(ctx, ex.ExecutionID, "sleep", pid); err != nil || n != 0 {
			t.Errorf("KillStopped(sleep, %d) with a running process of the sandbox's whose comm forges a stopped sleep's stat line: %d %v, want none killed", pid, n, err)
		}
	}
	if res := sh(t, h, ex.ExecutionID, fmt.Sprintf(`kill -0 %d && echo alive`, forged)); res.Stdout != "alive\n" {
		t.Fatalf("the forged process after KillStopped: %+v, want alive", res)
	}
}

// testStdioPIDUnseen: Stdio.PID fails, naming why, where the gateway does
// not see the engine's process of the exec, or sees another one there (it
// runs in a pid namespace of its own), rather than name a wrong pid.
func testStdioPIDUnseen(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	ex := provision(t, h, emptyReq(img, small()))
	ctx := testCtx(t, time.Minute)
	s, err := h.AttachStdio(ctx, ex.ExecutionID, []string{"sleep", "1000"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	startedPID(t, s)
	ins, err := cli.ContainerExecInspect(ctx, s.execID)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, status, want string }{
		{"no such process", "", "does not see the engine's process"},
		{"runc's init yet", "Name:\trunc:[2:INIT]\nNSpid:\t%d\t7\n", "has not started yet"},
		{"another name", "Name:\tbash\nNSpid:\t%d\t7\n", `is "bash", not the command`},
		{"not in a container", "Name:\tsleep\nNSpid:\t%d\n", "in no container's pid namespace"},
		{"NSpid of another pid", "Name:\tsleep\nNSpid:\t1%d\t7\n", "in no container's pid namespace"},
	} {
		s.proc = t.TempDir()
		if tc.status != "" {
			dir := filepath.Join(s.proc, strconv.Itoa(ins.Pid))
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "status"), fmt.Appendf(nil, tc.status, ins.Pid), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if pid, err := s.PID(ctx); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: PID %d, %v; want an error saying %q", tc.name, pid, err, tc.want)
		}
	}
}

// startedPID waits for s's command to run (the engine reports an exec
// started a moment after the attachment, and running while runc's init
// has yet to execute it) and returns its Stdio.PID.
func startedPID(t *testing.T, s *Stdio) int {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		pid, err := s.PID(ctx)
		if err == nil {
			return pid
		}
		if !strings.Contains(err.Error(), "not running") && !strings.Contains(err.Error(), "not started yet") {
			t.Fatalf("Stdio.PID, with the engine's processes in sight: %v", err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("Stdio.PID: %v for 30 s", err)
		case <-tick.C:
		}
	}
}
