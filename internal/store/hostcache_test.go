package store

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// hostIDsFixture is a store with host MyHost whose clock stands still
// until the test moves it.
func hostIDsFixture(t *testing.T) (*SQLite, func(time.Duration)) {
	t.Helper()
	s, _ := openTemp(t)
	now := time.UnixMilli(1_800_000_000_000)
	s.now = func() time.Time { return now }
	if _, err := s.Enroll(testCtx(t), Enrollment{HostID: "MyHost", HostKey: "ssh-ed25519 K"}); err != nil {
		t.Fatal(err)
	}
	return s, func(d time.Duration) { now = now.Add(d) }
}

func wantIDs(t *testing.T, s *SQLite, label string, want ...string) {
	t.Helper()
	got, err := s.HostIDsFold(testCtx(t), label)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("HostIDsFold(%q) = %q, %v; want %q", label, got, err, want)
	}
}

// TestHostIDsFoldCached: an answer is given again for a second without
// the database (a host another process added meanwhile shows after it),
// and the caller's copy is its own.
func TestHostIDsFoldCached(t *testing.T) {
	ctx := testCtx(t)
	s, advance := hostIDsFixture(t)
	wantIDs(t, s, "myhost", "MyHost")
	got, _ := s.HostIDsFold(ctx, "myhost")
	got[0] = "scribbled"
	// Written behind this store's back, as another process would.
	if _, err := s.db.ExecContext(ctx, `INSERT INTO hosts (id, created_ms) VALUES ('MYHOST', 0)`); err != nil {
		t.Fatal(err)
	}
	advance(hostIDsTTL - time.Millisecond)
	wantIDs(t, s, "myhost", "MyHost")
	advance(time.Millisecond)
	wantIDs(t, s, "myhost", "MYHOST", "MyHost")
}

// TestHostIDsFoldSeesItsOwnWrites: a host this store enrolls is found at
// once by a label just answered "no such host", and one it deletes is
// gone at once.
func TestHostIDsFoldSeesItsOwnWrites(t *testing.T) {
	ctx := testCtx(t)
	s, _ := hostIDsFixture(t)
	wantIDs(t, s, "exec-1")
	if _, err := s.Enroll(ctx, Enrollment{HostID: "Exec-1", Kind: "docker", HostKey: "ssh-ed25519 K"}); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, s, "exec-1", "Exec-1")
	if err := s.DeleteHost(ctx, "Exec-1", "docker"); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, s, "exec-1")
}

// TestHostIDsFoldAnswerOlderThanAWrite: an answer read before an
// enrollment of its label, and stored after it, is not kept (it would
// hide the new host for a second).
func TestHostIDsFoldAnswerOlderThanAWrite(t *testing.T) {
	var c hostIDsCache
	now := time.Now()
	gen := c.generation() // HostIDsFold, before its query
	c.forget("NewHost")   // Enroll, after its commit
	c.put("newhost", nil, gen, now)
	if ids, ok := c.get("newhost", now, hostIDsTTL); ok {
		t.Fatalf("answer from before the enrollment kept: %q", ids)
	}
}

// TestHostIDsFoldBounded: random labels, each an answer of its own, do
// not grow the cache past its bound, and answers go on.
func TestHostIDsFoldBounded(t *testing.T) {
	s, _ := hostIDsFixture(t)
	for i := range hostIDsMax + 100 {
		wantIDs(t, s, fmt.Sprintf("random-%d", i))
	}
	if n := s.hostIDs.len(); n > hostIDsMax {
		t.Fatalf("%d labels held, want at most %d", n, hostIDsMax)
	}
	wantIDs(t, s, "myhost", "MyHost")
}

// TestHostIDsFoldStoreDown: while the database fails, an answer up to
// hostIDsStale old is given; an older one, or none, is the error.
func TestHostIDsFoldStoreDown(t *testing.T) {
	ctx := testCtx(t)
	s, advance := hostIDsFixture(t)
	wantIDs(t, s, "myhost", "MyHost")
	wantIDs(t, s, "nobody")
	_ = s.db.Close()
	advance(hostIDsStale - time.Second)
	wantIDs(t, s, "myhost", "MyHost")
	wantIDs(t, s, "nobody")
	if ids, err := s.HostIDsFold(ctx, "other"); err == nil {
		t.Fatalf("a label never answered, database closed: %q, want an error", ids)
	}
	advance(time.Second)
	if ids, err := s.HostIDsFold(ctx, "myhost"); err == nil {
		t.Fatalf("an answer %v old, database closed: %q, want an error", hostIDsStale, ids)
	}
}

// BenchmarkHostIDsFold is the lookup every subdomain preview request makes
// (web.go's resolveHost), for a label that names one host: "query" is the
// database's answer, what every request paid before the cache.
func BenchmarkHostIDsFold(b *testing.B) {
	s, _ := openTemp(b)
	ctx := context.Background()
	for _, id := range []string{"MyHost", "other", "build-01"} {
		if _, err := s.Enroll(ctx, Enrollment{HostID: id, HostKey: "ssh-ed25519 K"}); err != nil {
			b.Fatal(err)
		}
	}
	for _, bc := range []struct {
		name string
		fold func(context.Context, string) ([]string, error)
	}{{"query", s.queryHostIDsFold}, {"cached", s.HostIDsFold}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ids, err := bc.fold(ctx, "myhost")
				if err != nil || len(ids) != 1 {
					b.Fatal(ids, err)
				}
			}
		})
	}
}
