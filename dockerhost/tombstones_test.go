package dockerhost

import (
	"context"
	"sync"
	"testing"
	"time"
)

// memTombs is a Tombstones in memory, shared by two hosts as by a gateway
// and the one that replaces it.
type memTombs struct {
	mu sync.Mutex
	m  map[string]time.Time
}

func (s *memTombs) AddTombstone(_ context.Context, id string, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[id] = at
	return nil
}

func (s *memTombs) RemoveTombstone(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
	return nil
}

func (s *memTombs) HasTombstone(_ context.Context, id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[id]
	return ok, nil
}

// testTombstones: with Config.Tombstones an ended execution answers gone
// to a host that never saw it live (a restarted gateway), an id never used
// stays not_found, and a provision that names an ended id again makes it
// live (and forgets its tombstone).
func testTombstones(t *testing.T) {
	cli, img := engine(t)
	tombs := &memTombs{m: map[string]time.Time{}}
	ctx := testCtx(t, 2*time.Minute)
	h := newTestHost(t, cli, &Config{Tombstones: tombs})
	req := emptyReq(img, small())
	req.ExecutionID = "tomb-" + uniqueOwner()
	ex := provision(t, h, req)
	if err := h.Terminate(ctx, ex.ExecutionID); err != nil {
		t.Fatal(err)
	}

	h2 := newTestHost(t, cli, &Config{Tombstones: tombs})
	if _, err := h2.Get(ctx, ex.ExecutionID); ErrorCode(err) != CodeGone {
		t.Fatalf("an execution another host ended: %v, want gone", err)
	}
	if _, err := h2.Get(ctx, "never-seen"); ErrorCode(err) != CodeNotFound {
		t.Fatalf("an id never used: %v, want not_found", err)
	}
	again := provision(t, h2, req)
	if again.ExecutionID != ex.ExecutionID {
		t.Fatalf("provision named %q, got %q", ex.ExecutionID, again.ExecutionID)
	}
	if ok, _ := tombs.HasTombstone(ctx, ex.ExecutionID); ok {
		t.Fatal("a live execution's id is still a tombstone")
	}
	if _, err := newTestHost(t, cli, &Config{Tombstones: tombs}).Get(ctx, ex.ExecutionID); ErrorCode(err) != CodeNotFound {
		t.Fatalf("a live execution of another host: %v, want not_found here (not gone)", err)
	}
}
