package dockerhost

import (
	"strings"
	"testing"
	"time"
)

// testKillStopped: KillStopped kills the stopped processes of the name
// that docker exec started (a stopped agent, attached with AttachStdio),
// and none other: not one running, not a stopped one sandbox code started
// (its parent inside the container), not PID 1.
func testKillStopped(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	ex := provision(t, h, emptyReq(img, small()))
	ctx := testCtx(t, time.Minute)
	for range 2 {
		s, err := h.AttachStdio(ctx, ex.ExecutionID, []string{"sleep", "1000"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
	}
	// Stop one attached sleep; start and stop one of the sandbox's own.
	list := `for d in /proc/[0-9]*; do read -r s < $d/stat; case "$s" in *"(sleep) "*) set -- ${s##*) }; echo "${d#/proc/} $1 $2";; esac; done | sort -n`
	res := sh(t, h, ex.ExecutionID, `(sleep 999 </dev/null >/dev/null 2>&1 &); sleep 0.2
for d in /proc/[0-9]*; do read -r s < $d/stat; case "$s" in *"(sleep) S 1 "*) kill -STOP ${d#/proc/};; esac; done
for d in /proc/[0-9]*; do read -r s < $d/stat; case "$s" in *"(sleep) S 0 "*) kill -STOP ${d#/proc/}; break;; esac; done
sleep 0.2; `+list)
	before := res.Stdout
	// (The deadline's own sleep, under its shell, is listed too.)
	if strings.Count(before, " T 0") != 1 || strings.Count(before, " T 1") != 1 || strings.Count(before, " S 0") != 1 {
		t.Fatalf("sleeps before: %q, want one attached stopped, one attached running and one of the sandbox's stopped", before)
	}
	n, err := h.KillStopped(ctx, ex.ExecutionID, "sleep")
	if err != nil || n != 1 {
		t.Fatalf("KillStopped: %d %v, want 1 killed", n, err)
	}
	after := sh(t, h, ex.ExecutionID, list).Stdout
	if strings.Count(after, " T 0") != 0 || strings.Count(after, " T 1") != 1 || strings.Count(after, " S 0") != 1 {
		t.Fatalf("sleeps after: %q (before %q), want the attached stopped one gone", after, before)
	}
	if n, err := h.KillStopped(ctx, ex.ExecutionID, "agent-of-a-very-long-name"); err != nil || n != 0 {
		t.Fatalf("KillStopped of a name nothing has: %d %v", n, err)
	}
}
