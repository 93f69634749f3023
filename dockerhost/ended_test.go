package dockerhost

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
)

// clock is a Config.Now a test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestEndedSaysWhy: an ended execution answers gone saying when and why
// it ended, in words and in Reason and EndedAt, from this host and from
// the next one over the same Tombstones; a provision naming it is refused
// (audit31: it answered "has ended" alone, and a provision under the id
// made a new sandbox); and Get of one a command's end is destroying
// answers gone, not the live execution (audit31: 200 for 0.35 s).
func TestEndedSaysWhy(t *testing.T) {
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	spec, _ := json.Marshal(redact(validReq()))
	labels := func(id string, expires time.Time) map[string]string {
		return map[string]string{LabelExecution: id, LabelExpires: fmtUnix(expires), LabelSpec: string(spec), LabelOwner: "gw"}
	}
	f := &fakeDocker{list: []container.Summary{
		{ID: "c-live", State: "running", Labels: labels("live", clk.now().Add(time.Hour))},
		{ID: "c-ending", State: "running", Labels: labels("ending", clk.now().Add(time.Hour))},
		{ID: "c-expired", State: "running", Labels: labels("expired", clk.now().Add(-time.Second))},
		{ID: "c-exited", State: "exited", Labels: labels("exited", clk.now().Add(time.Hour))},
	}}
	tombs := newMemTombs()
	newHost := func() *Docker {
		h, err := NewDocker(testCtx(t, time.Minute), nil, f, &Config{Owner: "gw", CheckpointDir: t.TempDir(), Now: clk.now, Tombstones: tombs})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Close() })
		return h
	}
	h := newHost()
	ctx := testCtx(t, time.Minute)
	start := clk.now()

	// A command's abort is destroying "ending": it is gone already.
	h.mu.Lock()
	e := h.execs["ending"]
	h.mu.Unlock()
	e.ending.Store(&ended{at: start, reason: EndAborted})
	_, err := h.Get(ctx, "ending")
	wantEnded(t, err, EndAborted, start)
	_, err = h.Exec(ctx, "ending", ExecRequest{Command: "true", TimeoutMs: 1000})
	wantEnded(t, err, EndAborted, start)
	req := validReq()
	req.ExecutionID = "ending"
	_, err = h.Provision(ctx, req)
	wantReuseRefused(t, err, EndAborted)
	// A Terminate racing the destroy forgets it first; the abort is
	// still why it ended.
	if err := h.Terminate(ctx, "ending"); err != nil {
		t.Fatal(err)
	}
	_, err = h.Get(ctx, "ending")
	wantEnded(t, err, EndAborted, start)

	clk.add(2 * time.Second)
	if err := h.Terminate(ctx, "live"); err != nil {
		t.Fatal(err)
	}
	terminated := clk.now()
	clk.add(12 * time.Second)
	_, err = h.Get(ctx, "live")
	wantEnded(t, err, EndTerminated, terminated)
	if msg, want := err.(*Error).Message, `execution "live" ended 12s ago (reason terminated, at 2027-01-15T08:00:02Z): it was terminated by a DELETE of it (or a Terminate)`; msg != want {
		t.Fatalf("message %q, want %q: when and why in words, as one sentence", msg, want)
	}
	_, err = h.Exec(ctx, "live", ExecRequest{Command: "true", TimeoutMs: 1000})
	wantEnded(t, err, EndTerminated, terminated)
	_, err = h.Get(ctx, "expired")
	wantEnded(t, err, EndRuntime, start)
	// audit42: "…(resources.runtimeMs) (reason runtime, at …)".
	if msg, want := err.(*Error).Message, `execution "expired" ended 14s ago (reason runtime, at 2027-01-15T08:00:00Z): it reached the end of its resources.runtimeMs`; msg != want {
		t.Fatalf("message %q, want %q", msg, want)
	}
	_, err = h.Get(ctx, "exited")
	wantEnded(t, err, EndContainerGone, start)

	req.ExecutionID = "live"
	_, err = h.Provision(ctx, req)
	wantReuseRefused(t, err, EndTerminated)
	if msg := err.Error(); !strings.Contains(msg, `execution "live" ended 12s ago (terminated), and execution ids are not reused`) {
		t.Fatalf("refusal %q, want it to name the id and say ids are not reused", msg)
	}

	// The next host, over the same record; the containers are gone
	// (the fake's list does not follow its removals).
	f.list = nil
	h2 := newHost()
	_, err = h2.Get(ctx, "live")
	wantEnded(t, err, EndTerminated, terminated)
	_, err = h2.Provision(ctx, req)
	wantReuseRefused(t, err, EndTerminated)
	req.ExecutionID = "expired"
	_, err = h2.Provision(ctx, req)
	wantReuseRefused(t, err, EndRuntime)
	// An end recorded without its reason (by an older gateway).
	_ = tombs.AddTombstone(ctx, "old", start, "")
	_, err = h2.Get(ctx, "old")
	wantEnded(t, err, EndUnknown, start)
}
