package dockerhost

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// memTombs is a Tombstones in memory, shared by two hosts as by a gateway
// and the one that replaces it.
type memTombs struct {
	mu sync.Mutex
	m  map[string]ended
}

func newMemTombs() *memTombs { return &memTombs{m: map[string]ended{}} }

func (s *memTombs) AddTombstone(_ context.Context, id string, at time.Time, reason string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[id] = ended{at: at, reason: reason}
	return nil
}

func (s *memTombs) RemoveTombstone(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
	return nil
}

func (s *memTombs) LookupTombstone(_ context.Context, id string) (time.Time, string, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[id]
	return e.at, e.reason, ok, nil
}

// wantEnded fails t unless err is the gone answer of an execution that
// ended for reason at at (to the second: a store keeps milliseconds).
func wantEnded(t *testing.T, err error, reason string, at time.Time) {
	t.Helper()
	wantEndedBetween(t, err, reason, at.Add(-time.Second), at.Add(time.Second))
}

// wantEndedBetween is wantEnded for an end at some time from first to
// last (a real engine's Terminate takes its time; a store keeps
// milliseconds).
func wantEndedBetween(t *testing.T, err error, reason string, first, last time.Time) {
	t.Helper()
	var de *Error
	if !errors.As(err, &de) {
		t.Fatalf("%v, want gone, reason %q", err, reason)
	}
	if de.Code != CodeGone || de.Reason != reason || de.EndedAt.Before(first.Truncate(time.Millisecond)) || de.EndedAt.After(last) {
		t.Fatalf("%v (reason %q, endedAt %v), want gone, reason %q, endedAt from %v to %v", err, de.Reason, de.EndedAt, reason, first, last)
	}
}

// wantReuseRefused fails t unless err refuses a provision of an ended id.
func wantReuseRefused(t *testing.T, err error, reason string) {
	t.Helper()
	var de *Error
	if !errors.As(err, &de) || de.Code != CodeConflict || de.Field != "executionId" || de.Reason != reason {
		t.Fatalf("provision of an ended id: %v, want a conflict on executionId with reason %q", err, reason)
	}
}

// testTombstones: with Config.Tombstones an ended execution answers gone,
// with when and why it ended, to a host that never saw it live (a
// restarted gateway); an id never used stays not_found; and a provision
// that names an ended id is refused, here and there (audit31 saw it
// answer 201, a new sandbox under an id its old callers still held).
func testTombstones(t *testing.T) {
	cli, img := engine(t)
	tombs := newMemTombs()
	ctx := testCtx(t, 2*time.Minute)
	h := newTestHost(t, cli, &Config{Tombstones: tombs})
	req := emptyReq(img, small())
	req.ExecutionID = "tomb-" + uniqueOwner()
	ex := provision(t, h, req)
	before := time.Now()
	if err := h.Terminate(ctx, ex.ExecutionID); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	_, err := h.Get(ctx, ex.ExecutionID)
	wantEndedBetween(t, err, EndTerminated, before, after)
	_, err = h.Provision(ctx, req)
	wantReuseRefused(t, err, EndTerminated)

	h2 := newTestHost(t, cli, &Config{Tombstones: tombs})
	_, err = h2.Get(ctx, ex.ExecutionID)
	wantEndedBetween(t, err, EndTerminated, before, after)
	if _, err := h2.Get(ctx, "never-seen"); ErrorCode(err) != CodeNotFound {
		t.Fatalf("an id never used: %v, want not_found", err)
	}
	_, err = newTestHost(t, cli, &Config{Tombstones: tombs}).Provision(ctx, req)
	wantReuseRefused(t, err, EndTerminated)
}
