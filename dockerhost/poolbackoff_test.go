package dockerhost

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a log's buffer that the fills' logging and the test's
// reading may share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestPoolFillBackoff: a key whose fills keep failing (a pre-warmed image
// the registry refuses) is tried again after 30 s, then twice as long
// each time up to 10 minutes, and its one error is logged once; a fill
// that succeeds starts both over. The pool retried every 30 s for as long
// as the gateway ran (a pinned key is never forgotten), logging an error
// line each time: 120 lines an hour.
func TestPoolFillBackoff(t *testing.T) {
	// The host's clock; its checkpoint sweeper reads it too.
	var clockMu sync.Mutex
	clock := time.Unix(1_800_000_000, 0)
	now := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return clock }
	set := func(t time.Time) { clockMu.Lock(); defer clockMu.Unlock(); clock = t }
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	// Every create fails alike: "fake: no more creates".
	h, err := NewDocker(testCtx(t, time.Minute), log, &fakeDocker{}, &Config{Owner: "gw", CheckpointDir: t.TempDir(), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	// Not started: the test runs its loop's plan and fills by hand, on
	// the host's clock. The TTL is past the backoff's cap, so that the
	// next plan is the backoff's.
	p, err := newPool(h, PoolConfig{Size: 1, TTL: time.Hour, Keys: []ProvisionRequest{validReq()}})
	if err != nil {
		t.Fatal(err)
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	defer p.cancel()
	k := keyOf(validReq())
	plan := func() ([]poolKey, time.Time) {
		p.mu.Lock()
		defer p.mu.Unlock()
		_, starts, next := p.planLocked(now())
		return starts, next
	}
	failOnce := func(want time.Duration) {
		t.Helper()
		starts, _ := plan()
		if len(starts) != 1 || starts[0] != k {
			t.Fatalf("at %v: starts %v, want one fill of the key", now(), starts)
		}
		p.fillWG.Add(1)
		p.fill(k)
		starts, next := plan()
		if len(starts) != 0 || next.Sub(now()) != want {
			t.Fatalf("after failed fill: starts %v, next in %v, want none and the next in %v", starts, next.Sub(now()), want)
		}
		set(next)
	}
	errorLines := func() int { return strings.Count(logs.String(), `level=ERROR msg="fill pool"`) }

	for _, want := range []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 10 * time.Minute, 10 * time.Minute} {
		failOnce(want)
	}
	if n := errorLines(); n != 1 {
		t.Fatalf("7 fills failing with one error logged %d error lines, want 1:\n%s", n, logs.String())
	}
	if s := p.stats(); s.FillErrors != 7 {
		t.Fatalf("FillErrors %d, want 7 (each counted, logged or not)", s.FillErrors)
	}

	// A fill that made its container (standing for one the fake engine
	// cannot make) starts the backoff over, and says so.
	if starts, _ := plan(); len(starts) != 1 {
		t.Fatalf("starts %v, want one fill", starts)
	}
	p.fillEnded(k, &pooled{cid: "c-warm", name: "hostgate-pool-warm", expires: now().Add(time.Hour)}, nil)
	if !strings.Contains(logs.String(), "pool fills succeed again") {
		t.Fatalf("no line says fills succeed again:\n%s", logs.String())
	}
	if pc := p.take(k); pc == nil || pc.cid != "c-warm" {
		t.Fatalf("take = %+v, want the warm container", pc)
	}
	set(now().Add(p.cfg.RefillDelay))
	failOnce(30 * time.Second)
	if n := errorLines(); n != 2 {
		t.Fatalf("the error after a success logged %d error lines in all, want 2 (logged again)", n)
	}
}

func TestFillErrorKeyIgnoresIDs(t *testing.T) {
	a := fillErrorKey(errString("dockerhost: create container hostgate-pool-0123456789abcdef: Conflict. The container name is in use by 4f1e5a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f"))
	b := fillErrorKey(errString("dockerhost: create container hostgate-pool-fedcba9876543210: Conflict. The container name is in use by 0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4f1e5a3b2c1d"))
	if a != b {
		t.Fatalf("two fills' same error with their own names and ids compare unequal:\n%s\n%s", a, b)
	}
}

type errString string

func (e errString) Error() string { return string(e) }
