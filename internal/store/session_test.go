package store

import (
	"database/sql"
	"errors"
	"net/url"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestSessionOfToken: a login session is a token of its own, with its
// parent's role and hosts, expiring at the sooner of its TTL and the
// parent's expiry; its secret is not the parent's.
func TestSessionOfToken(t *testing.T) {
	ctx := testCtx(t)
	s, _ := openTemp(t)
	now := time.Now().Truncate(time.Millisecond)
	s.now = func() time.Time { return now }
	client, ct, err := s.CreateToken(ctx, TokenSpec{Role: RoleClient, Hosts: []string{"a", "b"}, Name: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	sec, sess, err := s.CreateSession(ctx, ct.ID, 12*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if sec == client || sess.ID == ct.ID {
		t.Fatal("the session is the parent token")
	}
	got, err := s.LookupToken(ctx, sec)
	if err != nil {
		t.Fatal(err)
	}
	if got.Parent != ct.ID || got.Role != RoleClient || !slices.Equal(got.Hosts, []string{"a", "b"}) ||
		!got.ExpiresAt.Equal(now.Add(12*time.Hour)) || got.Name != "alice/session-"+sess.ID {
		t.Fatalf("session %+v of %+v", got, ct)
	}
	if p, _ := s.LookupToken(ctx, client); p.Parent != "" {
		t.Fatalf("the parent has a parent: %+v", p)
	}

	// A parent that expires sooner bounds the session.
	_, short, err := s.CreateToken(ctx, TokenSpec{Role: RoleAdmin, ExpiresAt: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, sess, err := s.CreateSession(ctx, short.ID, 12*time.Hour); err != nil || !sess.ExpiresAt.Equal(now.Add(time.Hour)) {
		t.Fatalf("session of a token expiring in 1h: expires %v, %v", sess.ExpiresAt, err)
	}

	// No session of a session, an agent, an expired or an unknown token.
	if _, _, err := s.CreateSession(ctx, sess.ID, time.Hour); !errors.Is(err, ErrSessionParent) {
		t.Errorf("session of a session: %v, want ErrSessionParent", err)
	}
	_, agent, _ := s.CreateToken(ctx, TokenSpec{Role: RoleAgent, Hosts: []string{"h"}})
	if _, _, err := s.CreateSession(ctx, agent.ID, time.Hour); err == nil {
		t.Error("session of an agent token")
	}
	s.now = func() time.Time { return now.Add(2 * time.Hour) }
	if _, _, err := s.CreateSession(ctx, short.ID, time.Hour); !errors.Is(err, ErrExpired) {
		t.Errorf("session of an expired token: %v, want ErrExpired", err)
	}
	if _, _, err := s.CreateSession(ctx, "nosuch", time.Hour); !errors.Is(err, ErrNotFound) {
		t.Errorf("session of an unknown token: %v, want ErrNotFound", err)
	}
}

// TestDeleteTokenRevokesSessions: revoking a token (`gateway token
// revoke`) revokes the browser sessions minted from it; ending a session
// (a logout) leaves its parent and its sibling sessions alone.
func TestDeleteTokenRevokesSessions(t *testing.T) {
	ctx := testCtx(t)
	s, _ := openTemp(t)
	parent, pt, _ := s.CreateToken(ctx, TokenSpec{Role: RoleAdmin})
	_, other, _ := s.CreateToken(ctx, TokenSpec{Role: RoleAdmin})
	s1, t1, err := s.CreateSession(ctx, pt.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	s2, _, _ := s.CreateSession(ctx, pt.ID, time.Hour)
	kept, _, _ := s.CreateSession(ctx, other.ID, time.Hour)

	if err := s.DeleteToken(ctx, t1.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LookupToken(ctx, s1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a logged-out session: %v, want ErrNotFound", err)
	}
	for _, sec := range []string{parent, s2} {
		if _, err := s.LookupToken(ctx, sec); err != nil {
			t.Fatalf("ending one session revoked more: %v", err)
		}
	}

	if err := s.DeleteToken(ctx, pt.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LookupToken(ctx, s2); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a session of a revoked token: %v, want ErrNotFound", err)
	}
	if _, err := s.LookupToken(ctx, kept); err != nil {
		t.Fatalf("another token's session: %v", err)
	}
	toks, _ := s.Tokens(ctx)
	if len(toks) != 2 {
		t.Fatalf("tokens after revoking one with sessions: %+v, want the other and its session", toks)
	}
}

// TestSessionsPrunedAndCapped: the tokens table does not grow with every
// login. Expired sessions go at the next login (and at Open), and a token
// keeps its newest MaxSessionsPerToken sessions; other tokens' sessions
// stay.
func TestSessionsPrunedAndCapped(t *testing.T) {
	ctx := testCtx(t)
	s, path := openTemp(t)
	now := time.Now()
	clock := now
	s.now = func() time.Time { return clock }
	_, a, _ := s.CreateToken(ctx, TokenSpec{Role: RoleAdmin})
	_, b, _ := s.CreateToken(ctx, TokenSpec{Role: RoleAdmin})
	var err error
	count := func() int {
		t.Helper()
		var n int
		if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM tokens WHERE parent_id IS NOT NULL`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for range 3 {
		if _, _, err := s.CreateSession(ctx, a.ID, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	bSecret, _, _ := s.CreateSession(ctx, b.ID, 24*time.Hour)
	clock = now.Add(2 * time.Hour)
	if _, _, err := s.CreateSession(ctx, a.ID, time.Hour); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 2 {
		t.Fatalf("%d sessions after the first three expired, want 2 (a's new one, b's)", n)
	}

	var secrets []string
	for i := range MaxSessionsPerToken + 5 {
		clock = now.Add(2*time.Hour + time.Duration(i)*time.Millisecond)
		sec, _, err := s.CreateSession(ctx, a.ID, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		secrets = append(secrets, sec)
	}
	if n := count(); n != MaxSessionsPerToken+1 {
		t.Fatalf("%d sessions, want a's %d and b's one", n, MaxSessionsPerToken)
	}
	for i, sec := range secrets {
		_, err := s.LookupToken(ctx, sec)
		if dropped := i < len(secrets)-MaxSessionsPerToken; dropped != errors.Is(err, ErrNotFound) {
			t.Errorf("session %d of %d: %v; want only the oldest dropped", i, len(secrets), err)
		}
	}
	if _, err := s.LookupToken(ctx, bSecret); err != nil {
		t.Fatalf("another token's session: %v", err)
	}

	// Open prunes what expired while nobody logged in: a session made
	// three hours ago that lasted one.
	clock = now.Add(-3 * time.Hour)
	if _, _, err := s.CreateSession(ctx, b.ID, time.Hour); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != MaxSessionsPerToken+2 {
		t.Fatalf("%d sessions before reopening, want %d", n, MaxSessionsPerToken+2)
	}
	_ = s.Close()
	if s, err = Open(ctx, path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if n := count(); n != MaxSessionsPerToken+1 {
		t.Fatalf("%d sessions after reopening, want the expired one gone", n)
	}
}

// TestMigrateSchema2: a state database written before sessions (schema 2)
// opens: its tokens keep working, have no parent, and get sessions that
// go with them.
func TestMigrateSchema2(t *testing.T) {
	ctx := testCtx(t)
	path := filepath.Join(t.TempDir(), "state.db")
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	old, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	// Schema 2 as the binary before sessions made it, and a token as its
	// CreateToken wrote it.
	for _, stmt := range []string{schema2[0], schema2[1], `PRAGMA user_version = 2`,
		`INSERT INTO tokens (id, name, hash, role, hosts, created_ms, expires_ms) VALUES ('0123456789ab', 'ops', '` +
			HashToken("hg_old-secret") + `', 'client', '["h1"]', 1764000000000, 0)`} {
		if _, err := old.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("open a schema 2 database: %v", err)
	}
	defer s.Close()
	tok, err := s.LookupToken(ctx, "hg_old-secret")
	if err != nil || tok.ID != "0123456789ab" || tok.Parent != "" || !tok.Allows("h1") {
		t.Fatalf("the old token: %+v, %v", tok, err)
	}
	sec, _, err := s.CreateSession(ctx, tok.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteToken(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LookupToken(ctx, sec); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the session of a revoked, migrated token: %v, want ErrNotFound", err)
	}
}

// schema2 is the schema before browser sessions, verbatim, so the test
// does not follow later edits to migrations.
var schema2 = []string{
	`CREATE TABLE hosts (
		id TEXT PRIMARY KEY,
		kind TEXT NOT NULL DEFAULT '',
		info TEXT NOT NULL DEFAULT '{}',
		host_key TEXT NOT NULL DEFAULT '',
		created_ms INTEGER NOT NULL,
		last_seen_ms INTEGER NOT NULL DEFAULT 0
	);
	CREATE TABLE tokens (
		id TEXT PRIMARY KEY,
		name TEXT NOT NULL,
		hash TEXT NOT NULL UNIQUE,
		role TEXT NOT NULL CHECK (role IN ('admin','client','agent')),
		hosts TEXT NOT NULL DEFAULT '[]',
		created_ms INTEGER NOT NULL,
		expires_ms INTEGER NOT NULL DEFAULT 0
	);
	CREATE TABLE sessions (
		id INTEGER PRIMARY KEY AUTOINCREMENT,
		time_ms INTEGER NOT NULL,
		token_name TEXT NOT NULL,
		host_id TEXT NOT NULL,
		kind TEXT NOT NULL,
		remote_addr TEXT NOT NULL
	);
	CREATE TABLE key_resets (
		id INTEGER PRIMARY KEY AUTOINCREMENT,
		time_ms INTEGER NOT NULL,
		host_id TEXT NOT NULL,
		old_key TEXT NOT NULL,
		by TEXT NOT NULL
	);`,
	`CREATE TABLE gone_executions (
		id TEXT PRIMARY KEY,
		at_ms INTEGER NOT NULL
	);
	CREATE INDEX gone_executions_at ON gone_executions (at_ms);`,
}

// TestSessionCapAfterClockStepBack: the cap on a token's sessions drops
// the oldest made, whatever the clock said when each was made. It went
// by creation time, so after the clock stepped back (an NTP correction)
// the login made since was the "oldest", and the next login of the same
// token logged it out.
func TestSessionCapAfterClockStepBack(t *testing.T) {
	ctx := testCtx(t)
	s, _ := openTemp(t)
	now := time.Now()
	clock := now
	s.now = func() time.Time { return clock }
	_, a, err := s.CreateToken(ctx, TokenSpec{Role: RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}
	for i := range MaxSessionsPerToken {
		clock = now.Add(time.Duration(i) * time.Millisecond)
		if _, _, err := s.CreateSession(ctx, a.ID, 12*time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	clock = now.Add(-time.Hour) // the clock steps back
	stepped, _, err := s.CreateSession(ctx, a.ID, 12*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(time.Millisecond)
	if _, _, err := s.CreateSession(ctx, a.ID, 12*time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LookupToken(ctx, stepped); err != nil {
		t.Errorf("the login made after the clock stepped back, after one more login: %v; want it kept (the oldest made goes)", err)
	}
}
