package dockerhost

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// testKillStopped: KillStopped kills the stopped process it is given by
// pid if it has the name and docker exec started it (a stopped agent,
// attached with AttachStdio), and none other: not a decoy of the same name
// that docker exec started and sandbox code stopped too (it killed every
// such process, by name), not one running, not a stopped one sandbox code
// started (its parent inside the container), not PID 1. Pid 0 kills every
// stopped one of the name that docker exec started.
func testKillStopped(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	ex := provision(t, h, emptyReq(img, small()))
	ctx := testCtx(t, time.Minute)
	for range 3 {
		s, err := h.AttachStdio(ctx, ex.ExecutionID, []string{"sleep", "1000"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
	}
	// Stop two attached sleeps (the agent and the decoy); start and stop
	// one of the sandbox's own.
	list := `for d in /proc/[0-9]*; do read -r s < $d/stat; case "$s" in *"(sleep) "*) set -- ${s##*) }; echo "${d#/proc/} $1 $2";; esac; done | sort -n`
	res := sh(t, h, ex.ExecutionID, `(sleep 999 </dev/null >/dev/null 2>&1 &); sleep 0.2
for d in /proc/[0-9]*; do read -r s < $d/stat; case "$s" in *"(sleep) S 1 "*) kill -STOP ${d#/proc/};; esac; done
n=0; for d in /proc/[0-9]*; do read -r s < $d/stat; case "$s" in *"(sleep) S 0 "*) kill -STOP ${d#/proc/}; n=$((n+1)); [ $n = 2 ] && break;; esac; done
sleep 0.2; `+list)
	before := res.Stdout
	// (The deadline's own sleep, under its shell, is listed too.)
	if strings.Count(before, " T 0") != 2 || strings.Count(before, " T 1") != 1 || strings.Count(before, " S 0") != 1 {
		t.Fatalf("sleeps before: %q, want two attached stopped, one attached running and one of the sandbox's stopped", before)
	}
	var stopped []int
	running := 0
	for _, l := range strings.Split(strings.TrimSpace(before), "\n") {
		var pid, ppid int
		var state string
		if _, err := fmt.Sscanf(l, "%d %s %d", &pid, &state, &ppid); err != nil {
			t.Fatalf("sleeps before: %q: %v", before, err)
		}
		switch {
		case state == "T" && ppid == 0:
			stopped = append(stopped, pid)
		case state == "S" && ppid == 0:
			running = pid
		}
	}
	agent, decoy := stopped[0], stopped[1]
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
		t.Fatalf("KillStopped of every stopped one: %d %v, want the decoy killed", n, err)
	}
	if n, err := h.KillStopped(ctx, ex.ExecutionID, "agent-of-a-very-long-name", 0); err != nil || n != 0 {
		t.Fatalf("KillStopped of a name nothing has: %d %v", n, err)
	}
	if _, err := h.KillStopped(ctx, ex.ExecutionID, "sleep", -1); err == nil {
		t.Fatal("KillStopped of pid -1: no error")
	}
}
