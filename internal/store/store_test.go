package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// As a child process: write tokens into the database named by the
	// environment and print their secrets (TestTwoProcesses).
	if path := os.Getenv("HOSTGATE_STORE_CHILD_DB"); path != "" {
		os.Exit(childWriter(path))
	}
	goleak.VerifyTestMain(m)
}

func childWriter(path string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := Open(ctx, path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s.Close()
	for i := range 50 {
		sec, _, err := s.CreateToken(ctx, TokenSpec{Role: RoleAgent, Hosts: []string{fmt.Sprint("child", i)}})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println(sec)
	}
	return 0
}

// TestTwoProcesses is `gateway token create` while `gateway serve` runs:
// another process writes to the same database file while this one writes
// too; neither fails with SQLITE_BUSY and this one sees every token.
func TestTwoProcesses(t *testing.T) {
	ctx := testCtx(t)
	s, path := openTemp(t)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "HOSTGATE_STORE_CHILD_DB="+path)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if _, err := s.Enroll(ctx, Enrollment{HostID: fmt.Sprint("parent", i), HostKey: "ssh-ed25519 K"}); err != nil {
			t.Fatal(err)
		}
	}
	out, err := io.ReadAll(stdout)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v\n%s", err, stderr.String())
	}
	secrets := strings.Fields(string(out))
	if len(secrets) != 50 {
		t.Fatalf("child printed %d tokens", len(secrets))
	}
	for _, sec := range secrets {
		if _, err := s.LookupToken(ctx, sec); err != nil {
			t.Fatalf("child's token not visible here: %v", err)
		}
	}
	if hosts, _ := s.Hosts(ctx); len(hosts) != 50 {
		t.Fatalf("%d hosts", len(hosts))
	}
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func openTemp(t testing.TB) (*SQLite, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(testCtx(t), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, path
}

func TestTokenHashedAndScoped(t *testing.T) {
	ctx := testCtx(t)
	s, _ := openTemp(t)
	secret, tok, err := s.CreateToken(ctx, TokenSpec{Role: RoleClient, Hosts: []string{"a"}, Name: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.LookupToken(ctx, secret)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != tok.ID || got.Name != "ci" || got.Role != RoleClient || !got.Allows("a") || got.Allows("b") {
		t.Fatalf("lookup: %+v", got)
	}
	// Only the hash is stored: the secret is nowhere in the database.
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM tokens WHERE hash = ? OR hash = ?`, secret, HashToken(secret)).Scan(&n); err != nil || n != 1 {
		t.Fatalf("count = %d, %v", n, err)
	}
	var stored string
	_ = s.db.QueryRowContext(ctx, `SELECT hash FROM tokens`).Scan(&stored)
	if stored == secret || stored != HashToken(secret) {
		t.Fatalf("stored %q", stored)
	}
	for _, bad := range []string{"", "hg_", "nope", secret + "x", "hg_" + string(make([]byte, 300))} {
		if _, err := s.LookupToken(ctx, bad); !errors.Is(err, ErrNotFound) {
			t.Errorf("lookup %q: %v", bad, err)
		}
	}
}

// TestTokenByID: Token finds a token by id, says a missing one is
// ErrNotFound, and an expired one ErrExpired with the token.
func TestTokenByID(t *testing.T) {
	ctx := testCtx(t)
	s, _ := openTemp(t)
	_, tok, err := s.CreateToken(ctx, TokenSpec{Role: RoleClient, Hosts: []string{"a"}, Name: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Token(ctx, tok.ID); err != nil || got.ID != tok.ID || got.Name != "ci" || !got.Allows("a") {
		t.Fatalf("Token(%s) = %+v, %v", tok.ID, got, err)
	}
	if _, err := s.Token(ctx, "nosuch"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Token(nosuch): %v, want ErrNotFound", err)
	}
	_, old, err := s.CreateToken(ctx, TokenSpec{Role: RoleClient, ExpiresAt: time.Now().Add(time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	s.now = func() time.Time { return time.Now().Add(time.Hour) }
	if got, err := s.Token(ctx, old.ID); !errors.Is(err, ErrExpired) || got.ID != old.ID {
		t.Fatalf("Token of an expired token: %+v, %v, want it with ErrExpired", got, err)
	}
	if err := s.DeleteToken(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Token(ctx, tok.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Token of a deleted token: %v, want ErrNotFound", err)
	}
}

func TestTokenRules(t *testing.T) {
	ctx := testCtx(t)
	s, _ := openTemp(t)
	if _, _, err := s.CreateToken(ctx, TokenSpec{Role: "root"}); err == nil {
		t.Error("unknown role accepted")
	}
	if _, _, err := s.CreateToken(ctx, TokenSpec{Role: RoleAgent}); err == nil {
		t.Error("agent token without host accepted")
	}
	if _, _, err := s.CreateToken(ctx, TokenSpec{Role: RoleClient, Hosts: []string{"Bad/Id"}}); err == nil {
		t.Error("bad host id accepted")
	}
	admin, _, err := s.CreateToken(ctx, TokenSpec{Role: RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}
	at, _ := s.LookupToken(ctx, admin)
	if !at.Allows("anything") || at.Name == "" {
		t.Errorf("admin: %+v", at)
	}
	agent, _, _ := s.CreateToken(ctx, TokenSpec{Role: RoleAgent, Hosts: []string{"h1"}})
	ag, _ := s.LookupToken(ctx, agent)
	if ag.Allows("h1") {
		t.Error("an agent token must not reach hosts as a caller")
	}
	// Expiry.
	now := time.Now()
	exp, _, err := s.CreateToken(ctx, TokenSpec{Role: RoleClient, Hosts: []string{"h1"}, ExpiresAt: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	s.now = func() time.Time { return now.Add(2 * time.Hour) }
	if _, err := s.LookupToken(ctx, exp); !errors.Is(err, ErrExpired) {
		t.Errorf("expired token: %v", err)
	}
	s.now = time.Now
	toks, err := s.Tokens(ctx)
	if err != nil || len(toks) != 3 {
		t.Fatalf("tokens: %d %v", len(toks), err)
	}
	if err := s.DeleteToken(ctx, at.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LookupToken(ctx, admin); !errors.Is(err, ErrNotFound) {
		t.Errorf("revoked token: %v", err)
	}
	if err := s.DeleteToken(ctx, at.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("delete twice: %v", err)
	}
}

func TestEnrollPinRefuseReset(t *testing.T) {
	ctx := testCtx(t)
	s, _ := openTemp(t)
	if _, err := s.Host(ctx, "h1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown host: %v", err)
	}
	h, err := s.Enroll(ctx, Enrollment{HostID: "h1", Kind: "machine", Info: []byte(`{"os":"linux"}`), HostKey: "ssh-ed25519 KEY1"})
	if err != nil {
		t.Fatal(err)
	}
	if h.HostKey != "ssh-ed25519 KEY1" || h.Kind != "machine" || string(h.Info) != `{"os":"linux"}` || h.LastSeen.IsZero() {
		t.Fatalf("enrolled: %+v", h)
	}
	// Same key again: fine, info updated.
	if h, err = s.Enroll(ctx, Enrollment{HostID: "h1", Kind: "machine", Info: []byte(`{"os":"darwin"}`), HostKey: "ssh-ed25519 KEY1"}); err != nil || string(h.Info) != `{"os":"darwin"}` {
		t.Fatalf("re-enroll: %+v %v", h, err)
	}
	// Without info: the stored info and kind stay.
	if h, err = s.Enroll(ctx, Enrollment{HostID: "h1", Kind: "other", HostKey: "ssh-ed25519 KEY1"}); err != nil || string(h.Info) != `{"os":"darwin"}` || h.Kind != "machine" {
		t.Fatalf("re-enroll without info: %+v %v", h, err)
	}
	// Another key: refused, nothing changed.
	if _, err := s.Enroll(ctx, Enrollment{HostID: "h1", Kind: "evil", Info: []byte(`{}`), HostKey: "ssh-ed25519 KEY2"}); !errors.Is(err, ErrKeyMismatch) {
		t.Fatalf("impostor: %v", err)
	}
	h, _ = s.Host(ctx, "h1")
	if h.HostKey != "ssh-ed25519 KEY1" || h.Kind != "machine" {
		t.Fatalf("impostor changed the host: %+v", h)
	}
	if err := s.ResetHostKey(ctx, "nope", "admin"); !errors.Is(err, ErrNotFound) {
		t.Errorf("reset unknown: %v", err)
	}
	if err := s.ResetHostKey(ctx, "h1", "admin"); err != nil {
		t.Fatal(err)
	}
	if h, _ = s.Host(ctx, "h1"); h.HostKey != "" {
		t.Fatalf("after reset: %+v", h)
	}
	if h, err = s.Enroll(ctx, Enrollment{HostID: "h1", HostKey: "ssh-ed25519 KEY2"}); err != nil || h.HostKey != "ssh-ed25519 KEY2" {
		t.Fatalf("enroll after reset: %+v %v", h, err)
	}
	var resets int
	_ = s.db.QueryRowContext(ctx, `SELECT count(*) FROM key_resets WHERE host_id = 'h1' AND old_key = 'ssh-ed25519 KEY1'`).Scan(&resets)
	if resets != 1 {
		t.Errorf("key_resets rows = %d", resets)
	}
	for _, bad := range []Enrollment{{HostID: "", HostKey: "k"}, {HostID: "h2"}, {HostID: "h2", HostKey: "k", Info: []byte("{")}} {
		if _, err := s.Enroll(ctx, bad); err == nil {
			t.Errorf("enroll %+v accepted", bad)
		}
	}
	hosts, err := s.Hosts(ctx)
	if err != nil || len(hosts) != 1 {
		t.Fatalf("hosts: %v %v", hosts, err)
	}
}

func TestSessionsAudit(t *testing.T) {
	ctx := testCtx(t)
	s, _ := openTemp(t)
	for i := range 3 {
		if err := s.RecordSession(ctx, Session{TokenName: "ci", HostID: fmt.Sprint("h", i), Kind: "ssh", RemoteAddr: "127.0.0.1:1"}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Sessions(ctx, 2)
	if err != nil || len(got) != 2 || got[0].HostID != "h2" || got[0].Time.IsZero() {
		t.Fatalf("sessions: %+v %v", got, err)
	}
}

// The audit log keeps its newest rows: every thousandth record, and an
// open, trim it. Nothing ever removed a row, and an agent reconnecting in
// a loop wrote 520 a second.
func TestAuditLogBounded(t *testing.T) {
	ctx := testCtx(t)
	s, path := openTemp(t)
	s.auditKeep = 300
	count := func(s *SQLite) int {
		var n int
		if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sessions`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	record := func(i int) {
		t.Helper()
		if err := s.RecordSession(ctx, Session{TokenName: "storm", HostID: "h", Kind: "tunnel", RemoteAddr: fmt.Sprint("10.0.0.1:", i)}); err != nil {
			t.Fatal(err)
		}
	}
	// 1,200 older rows in one statement, and the 998 records before them
	// counted: 2,500 records one by one took up to 30 s under -race on a
	// loaded machine, past the test's deadline.
	if _, err := s.db.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 1200)
		INSERT INTO sessions (time_ms, token_name, host_id, kind, remote_addr) SELECT i, 'storm', 'h', 'tunnel', i FROM n`); err != nil {
		t.Fatal(err)
	}
	s.audits.Store(998)
	record(998)
	if n := count(s); n != 1201 {
		t.Fatalf("%d audit rows after the 999th record, want 1201 (no trim)", n)
	}
	// Trimmed at the 1000th: 300 kept, and 5 since.
	for i := 999; i < 1005; i++ {
		record(i)
	}
	if n := count(s); n != 305 {
		t.Fatalf("%d audit rows after the 1000th record and 5 more, want 305", n)
	}
	if got, _ := s.Sessions(ctx, 1); len(got) != 1 || got[0].RemoteAddr != "10.0.0.1:1004" {
		t.Fatalf("newest row %+v, want the last recorded", got)
	}
	// An open trims to MaxAuditRows; one with a smaller bound, to it.
	b, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	b.auditKeep = 300
	if err := b.trimAudit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(b); n != 300 {
		t.Fatalf("%d audit rows after a trim, want 300", n)
	}
	if got, _ := b.Sessions(ctx, 1); len(got) != 1 || got[0].RemoteAddr != "10.0.0.1:1004" {
		t.Fatalf("newest row after a trim %+v, want the last recorded", got)
	}
	if err := b.trimAudit(ctx); err != nil || count(b) != 300 {
		t.Fatalf("a second trim: %v, %d rows", err, count(b))
	}
}

// A trim of a long log deletes in batches, each its own transaction, and
// keeps exactly the newest rows whatever the batch boundaries.
func TestAuditTrimBatches(t *testing.T) {
	ctx := testCtx(t)
	s, _ := openTemp(t)
	// Batches of 1,000, not 50,000: the rows of the real size took 25 s
	// of the test's 30 under -race on a loaded machine.
	s.auditBatch = 1000
	const rows = 2*1000 + 1234
	if _, err := s.db.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < ?)
		INSERT INTO sessions (time_ms, token_name, host_id, kind, remote_addr) SELECT i, 'storm', 'h', 'tunnel', i FROM n`, rows); err != nil {
		t.Fatal(err)
	}
	s.auditKeep = 1000
	if err := s.trimAudit(ctx); err != nil {
		t.Fatal(err)
	}
	var n, lo int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*), MIN(CAST(remote_addr AS INTEGER)) FROM sessions`).Scan(&n, &lo); err != nil {
		t.Fatal(err)
	}
	if n != 1000 || lo != rows-999 {
		t.Fatalf("%d rows from %d after the trim, want 1000 from %d", n, lo, rows-999)
	}
}

// TestConcurrentHandles is `gateway token create` writing while the gateway
// serves: two handles on one file, both writing at once, none failing with
// SQLITE_BUSY, each seeing the other's rows.
func TestConcurrentHandles(t *testing.T) {
	ctx := testCtx(t)
	a, path := openTemp(t)
	b, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const n = 40
	secrets := make(chan string, 2*n)
	var wg sync.WaitGroup
	for _, s := range []*SQLite{a, b} {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range n {
				sec, _, err := s.CreateToken(ctx, TokenSpec{Role: RoleAdmin})
				if err != nil {
					t.Error(err)
					return
				}
				secrets <- sec
			}
		}()
		go func() {
			defer wg.Done()
			for i := range n {
				if _, err := s.Enroll(ctx, Enrollment{HostID: fmt.Sprint("h", i%5), HostKey: "ssh-ed25519 K"}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(secrets)
	for sec := range secrets {
		if _, err := a.LookupToken(ctx, sec); err != nil {
			t.Fatalf("handle a misses a token: %v", err)
		}
		if _, err := b.LookupToken(ctx, sec); err != nil {
			t.Fatalf("handle b misses a token: %v", err)
		}
	}
}

func TestReopenKeepsStateAndSchema(t *testing.T) {
	ctx := testCtx(t)
	s, path := openTemp(t)
	sec, _, _ := s.CreateToken(ctx, TokenSpec{Role: RoleAdmin})
	_ = s.Close()
	s2, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if _, err := s2.LookupToken(ctx, sec); err != nil {
		t.Fatal(err)
	}
	var v int
	_ = s2.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v)
	if v != len(migrations) {
		t.Fatalf("user_version %d", v)
	}
	// A database from a newer binary is refused, not silently used.
	if _, err := s2.db.ExecContext(ctx, "PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	if s3, err := Open(ctx, path); err == nil {
		s3.Close()
		t.Fatal("newer schema accepted")
	}
}

func TestValidHostID(t *testing.T) {
	for id, want := range map[string]bool{
		"a": true, "local": true, "exec-1f2e": true, "H1": true, "a_b.c-d": true, "a--b": true,
		"": false, "-a": false, ".a": false, "_a": false, "a/b": false, "a b": false, "a:b": false, "ä": false,
		"0123456789012345678901234567890123456789012345678901234567890123":  true,
		"01234567890123456789012345678901234567890123456789012345678901234": false,
	} {
		if got := ValidHostID(id); got != want {
			t.Errorf("ValidHostID(%q) = %v", id, got)
		}
	}
}

func FuzzValidHostID(f *testing.F) {
	f.Add("local")
	f.Add("a/../b")
	f.Fuzz(func(t *testing.T, id string) {
		if !ValidHostID(id) {
			return
		}
		// Accepted ids must be safe as one URL path segment and one file name.
		if id == "." || id == ".." || strings.ContainsAny(id, "/\\%?#: \x00") || url.PathEscape(id) != id {
			t.Fatalf("%q accepted", id)
		}
	})
}

func TestDeleteHostOnlyOfItsKind(t *testing.T) {
	ctx := context.Background()
	st, err := Open(ctx, filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, e := range []Enrollment{{HostID: "machine-1", Kind: "machine", HostKey: "ssh-ed25519 K1"}, {HostID: "exec-1", Kind: "docker", HostKey: "ssh-ed25519 K2"}} {
		if _, err := st.Enroll(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.DeleteHost(ctx, "machine-1", "docker"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Host(ctx, "machine-1"); err != nil {
		t.Fatalf("a machine was deleted as a docker host: %v", err)
	}
	if err := st.DeleteHost(ctx, "exec-1", "docker"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Host(ctx, "exec-1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted host: %v, want ErrNotFound", err)
	}
	if err := st.DeleteHost(ctx, "exec-1", "docker"); err != nil {
		t.Errorf("deleting a missing host: %v", err)
	}
}

// TestDeleteHostDeletesItsShares: forgetting a host (gateway host remove,
// an execution's end) deletes its shares' rows with it, in the same
// transaction; a host of another kind under the id keeps its own. The rows
// stayed until a lookup or a listing found their host gone, up to their 7
// days.
func TestDeleteHostDeletesItsShares(t *testing.T) {
	ctx := testCtx(t)
	s, _ := openTemp(t)
	now := time.Now().Truncate(time.Millisecond)
	for _, e := range []Enrollment{{HostID: "machine-1", Kind: "machine", HostKey: "ssh-ed25519 K1"}, {HostID: "exec-1", Kind: "docker", HostKey: "ssh-ed25519 K2"}, {HostID: "other", Kind: "machine", HostKey: "ssh-ed25519 K3"}} {
		if _, err := s.Enroll(ctx, e); err != nil {
			t.Fatal(err)
		}
		for _, port := range []int{80, 3000} {
			if err := s.PutShare(ctx, Share{HostID: e.HostID, Port: port, By: "t", Created: now, Expires: now.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	rows := func(host string) int {
		t.Helper()
		var n int
		if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM shares WHERE host_id = ?", host).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := s.DeleteHost(ctx, "machine-1", "docker"); err != nil {
		t.Fatal(err)
	}
	if n := rows("machine-1"); n != 2 {
		t.Fatalf("a machine's shares after a DeleteHost of a docker host of its id: %d rows, want its 2", n)
	}
	for _, h := range []struct{ id, kind string }{{"machine-1", "machine"}, {"exec-1", "docker"}} {
		if err := s.DeleteHost(ctx, h.id, h.kind); err != nil {
			t.Fatal(err)
		}
		if n := rows(h.id); n != 0 {
			t.Errorf("%s forgotten: %d rows of its shares left, want none", h.id, n)
		}
	}
	if got, err := s.Shares(ctx); err != nil || len(got) != 2 || got[0].HostID != "other" || got[1].HostID != "other" {
		t.Fatalf("shares after the deletes: %+v (%v), want other's two", got, err)
	}
}

// BenchmarkLookupToken is the lookup every authenticated request makes (API
// calls, relays, each request of a preview page).
func BenchmarkLookupToken(b *testing.B) {
	s, _ := openTemp(b)
	ctx := context.Background()
	secret, _, err := s.CreateToken(ctx, TokenSpec{Role: RoleAdmin, Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.LookupToken(ctx, secret); err != nil {
			b.Fatal(err)
		}
	}
}

// TestTombstones: ended executions survive a reopen, with when and why
// they ended, an id used again is forgotten, and the record keeps only the
// newest.
func TestTombstones(t *testing.T) {
	ctx := testCtx(t)
	s, path := openTemp(t)
	t0 := time.UnixMilli(1_700_000_000_000)
	for i := range 5 {
		if err := s.AddTombstone(ctx, fmt.Sprint("e", i), t0.Add(time.Duration(i)*time.Second), fmt.Sprint("why", i)); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.Close()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	has := func(id string) bool {
		t.Helper()
		_, _, ok, err := s.LookupTombstone(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !has("e0") || !has("e4") || has("e5") {
		t.Fatal("tombstones after a reopen: want e0..e4 and not e5")
	}
	if at, why, _, err := s.LookupTombstone(ctx, "e3"); err != nil || !at.Equal(t0.Add(3*time.Second)) || why != "why3" {
		t.Fatalf("e3 after a reopen: ended %v for %q (%v), want %v for why3", at, why, err, t0.Add(3*time.Second))
	}
	if err := s.RemoveTombstone(ctx, "e4"); err != nil || has("e4") {
		t.Fatalf("removed tombstone still there (%v)", err)
	}
	if err := s.trimTombstones(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if has("e0") || has("e1") || !has("e2") || !has("e3") {
		t.Fatal("trim kept other than the two newest")
	}
}

// TestSharesPersist: a share outlives a reopen (a gateway restart) until
// its expiry, a second share of the same port replaces the first, and
// expired shares are gone from the list and the table.
func TestSharesPersist(t *testing.T) {
	ctx := testCtx(t)
	s, path := openTemp(t)
	now := time.Now().Truncate(time.Millisecond)
	var ids []string
	for range 4 {
		_, tok, err := s.CreateToken(ctx, TokenSpec{Role: RoleClient, Hosts: []string{"a", "b"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, tok.ID)
	}
	for _, sh := range []Share{
		{HostID: "b", Port: 80, TokenID: ids[0], By: "one", Created: now, Expires: now.Add(time.Hour)},
		{HostID: "a", Port: 3000, TokenID: ids[1], By: "two", Created: now, Expires: now.Add(time.Hour)},
		{HostID: "a", Port: 3000, TokenID: ids[2], By: "three", Created: now, Expires: now.Add(2 * time.Hour)},
		{HostID: "a", Port: 22, TokenID: ids[3], By: "old", Created: now, Expires: now.Add(-time.Second)},
	} {
		if err := s.PutShare(ctx, sh); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutShare(ctx, Share{HostID: "a/../b", Port: 1, Expires: now.Add(time.Hour)}); err == nil {
		t.Error("a share of an invalid host id was stored")
	}
	_ = s.Close()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Shares(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []Share{
		{HostID: "a", Port: 3000, TokenID: ids[2], By: "three", Created: now, Expires: now.Add(2 * time.Hour)},
		{HostID: "b", Port: 80, TokenID: ids[0], By: "one", Created: now, Expires: now.Add(time.Hour)},
	}
	if len(got) != len(want) {
		t.Fatalf("shares after a reopen: %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].HostID != want[i].HostID || got[i].Port != want[i].Port || got[i].TokenID != want[i].TokenID ||
			got[i].By != want[i].By || !got[i].Created.Equal(want[i].Created) || !got[i].Expires.Equal(want[i].Expires) {
			t.Errorf("share %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	var rows int
	_ = s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM shares").Scan(&rows)
	if rows != 2 {
		t.Errorf("%d rows in the shares table, want the expired one gone", rows)
	}
	if err := s.DeleteShare(ctx, "a", 3000); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteShare(ctx, "a", 3000); err != nil {
		t.Fatalf("deleting a missing share: %v", err)
	}
	if got, _ := s.Shares(ctx); len(got) != 1 || got[0].HostID != "b" {
		t.Fatalf("after delete: %+v", got)
	}
}

// TestSharesOfDeadTokensPruned: the shares of a token deleted (revoked,
// also by `gateway token revoke` in another process) or expired are gone
// from the list and the table; they stayed until their own expiry, up to
// 7 days, and a gateway loaded them at every start. Shares that name no
// token (made before shares carried one) last until their expiry.
func TestSharesOfDeadTokensPruned(t *testing.T) {
	ctx := testCtx(t)
	s, _ := openTemp(t)
	now := time.Now().Truncate(time.Millisecond)
	spec := TokenSpec{Role: RoleClient, Hosts: []string{"h"}}
	_, live, err := s.CreateToken(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	_, revoked, err := s.CreateToken(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	spec.ExpiresAt = now.Add(time.Minute)
	_, expiring, err := s.CreateToken(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{live.ID, revoked.ID, expiring.ID, "", "gone"} {
		if err := s.PutShare(ctx, Share{HostID: "h", Port: 1000 + i, TokenID: id, Created: now, Expires: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteToken(ctx, revoked.ID); err != nil {
		t.Fatal(err)
	}
	s.now = func() time.Time { return now.Add(2 * time.Minute) } // past expiring's expiry, not the shares'
	got, err := s.Shares(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ports []int
	for _, sh := range got {
		ports = append(ports, sh.Port)
	}
	if !slices.Equal(ports, []int{1000, 1003}) {
		t.Fatalf("shares listed: ports %v, want 1000 (live token) and 1003 (no token)", ports)
	}
	var rows int
	_ = s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM shares").Scan(&rows)
	if rows != 2 {
		t.Errorf("%d rows in the shares table, want the dead tokens' shares gone", rows)
	}
}

// TestHostIDsFold: the hosts whose ids equal a preview subdomain's
// lower-cased label in any case, through the index made for it, and
// without raising the schema version (an older gateway must still open
// the database).
func TestHostIDsFold(t *testing.T) {
	ctx := testCtx(t)
	s, _ := openTemp(t)
	for _, id := range []string{"MyHost", "myhost", "other", "myhost2"} {
		if _, err := s.Enroll(ctx, Enrollment{HostID: id, HostKey: "ssh-ed25519 K"}); err != nil {
			t.Fatal(err)
		}
	}
	for label, want := range map[string][]string{"myhost": {"MyHost", "myhost"}, "OTHER": {"other"}, "nobody": nil} {
		got, err := s.HostIDsFold(ctx, label)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("HostIDsFold(%q) = %q, %v; want %q", label, got, err, want)
		}
	}
	var plan string
	rows, err := s.db.QueryContext(ctx, `EXPLAIN QUERY PLAN SELECT id FROM hosts WHERE id = ? COLLATE NOCASE ORDER BY id`, "x")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan += detail + "; "
	}
	rows.Close()
	if !strings.Contains(plan, "hosts_id_nocase") {
		t.Errorf("query plan %q does not use hosts_id_nocase", plan)
	}
	var v int
	_ = s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v)
	if v != len(migrations) {
		t.Errorf("user_version %d, want %d: the index is no migration, and older gateways refuse a newer schema", v, len(migrations))
	}
}

// A token row the store cannot read (a damaged or hand-edited database)
// does not hide the others: Tokens returns every token it can read and
// names the rest, and the bad row can still be revoked. One such row made
// every listing fail, so revocations stopped reaching live sessions and
// `gateway token list` and `revoke` could not run at all.
func TestTokensSkipUnreadableRows(t *testing.T) {
	ctx := testCtx(t)
	s, _ := openTemp(t)
	_, good, err := s.CreateToken(ctx, TokenSpec{Role: RoleClient, Hosts: []string{"a"}, Name: "good"})
	if err != nil {
		t.Fatal(err)
	}
	_, bad, err := s.CreateToken(ctx, TokenSpec{Role: RoleClient, Hosts: []string{"a"}, Name: "bad"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE tokens SET hosts = 'not json' WHERE id = ?`, bad.ID); err != nil {
		t.Fatal(err)
	}
	_, worse, err := s.CreateToken(ctx, TokenSpec{Role: RoleAdmin, Name: "worse"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE tokens SET created_ms = 'yesterday' WHERE id = ?`, worse.ID); err != nil {
		t.Fatal(err)
	}
	toks, err := s.Tokens(ctx)
	var ue *UnreadableTokensError
	if !errors.As(err, &ue) {
		t.Fatalf("tokens with unreadable rows: %v, want an *UnreadableTokensError", err)
	}
	if len(toks) != 1 || toks[0].ID != good.ID {
		t.Fatalf("tokens: %+v, want only %s", toks, good.ID)
	}
	if fmt.Sprint(ue.IDs) != fmt.Sprint([]string{bad.ID, worse.ID}) && fmt.Sprint(ue.IDs) != fmt.Sprint([]string{worse.ID, bad.ID}) {
		t.Errorf("unreadable ids %v, want %s and %s", ue.IDs, bad.ID, worse.ID)
	}
	if !strings.Contains(err.Error(), "gateway token revoke") {
		t.Errorf("error %q does not name the fix", err)
	}
	for _, id := range []string{bad.ID, worse.ID} {
		if err := s.DeleteToken(ctx, id); err != nil {
			t.Fatalf("revoke unreadable %s: %v", id, err)
		}
	}
	if toks, err := s.Tokens(ctx); err != nil || len(toks) != 1 {
		t.Fatalf("tokens after revoking the bad rows: %d %v", len(toks), err)
	}
}

// TestSessionSharesEndWithTheirSession: a share made from a browser login
// session comes back from a reopen naming its token and its session, and
// is gone from the list and the table once that session is deleted (a
// logout) or expires, while the token's own share stays. Such shares
// named the session's parent token, so only revoking the whole token
// ended them.
func TestSessionSharesEndWithTheirSession(t *testing.T) {
	ctx := testCtx(t)
	s, path := openTemp(t)
	now := time.Now().Truncate(time.Millisecond)
	_, tok, err := s.CreateToken(ctx, TokenSpec{Role: RoleClient, Hosts: []string{"h"}})
	if err != nil {
		t.Fatal(err)
	}
	_, loggedOut, err := s.CreateSession(ctx, tok.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	_, expiring, err := s.CreateSession(ctx, tok.ID, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range []Share{
		{HostID: "h", Port: 1, TokenID: tok.ID},
		{HostID: "h", Port: 2, TokenID: tok.ID, Session: loggedOut.ID},
		{HostID: "h", Port: 3, TokenID: tok.ID, Session: expiring.ID},
	} {
		sh.Created, sh.Expires = now, now.Add(24*time.Hour)
		if err := s.PutShare(ctx, sh); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.Close()
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Shares(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].TokenID != tok.ID || got[0].Session != "" ||
		got[1].TokenID != tok.ID || got[1].Session != loggedOut.ID || got[2].TokenID != tok.ID || got[2].Session != expiring.ID {
		t.Fatalf("shares after a reopen: %+v, want port 1 by token %s, 2 and 3 by its sessions %s and %s", got, tok.ID, loggedOut.ID, expiring.ID)
	}
	if err := s.DeleteToken(ctx, loggedOut.ID); err != nil {
		t.Fatal(err)
	}
	s.now = func() time.Time { return now.Add(2 * time.Minute) } // past the second session's expiry
	got, err = s.Shares(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Port != 1 {
		t.Fatalf("shares after a logout and a session's expiry: %+v, want only the token's port 1", got)
	}
	var rows int
	_ = s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM shares").Scan(&rows)
	if rows != 1 {
		t.Errorf("%d rows in the shares table, want the sessions' shares gone", rows)
	}
}

// TestEnrollChecksItsToken: an enrollment that names its agent token is
// refused with ErrTokenGone, and changes nothing, once that token is
// revoked or expired; a live one enrolls.
func TestEnrollChecksItsToken(t *testing.T) {
	ctx := testCtx(t)
	s, _ := openTemp(t)
	now := time.Now()
	_, live, err := s.CreateToken(ctx, TokenSpec{Role: RoleAgent, Hosts: []string{"h1"}})
	if err != nil {
		t.Fatal(err)
	}
	_, gone, err := s.CreateToken(ctx, TokenSpec{Role: RoleAgent, Hosts: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteToken(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	_, expired, err := s.CreateToken(ctx, TokenSpec{Role: RoleAgent, Hosts: []string{"h3"}, ExpiresAt: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	s.now = func() time.Time { return now.Add(2 * time.Hour) }
	for id, tok := range map[string]Token{"h2": gone, "h3": expired} {
		if _, err := s.Enroll(ctx, Enrollment{HostID: id, HostKey: "ssh-ed25519 AAAA", Token: tok.ID}); !errors.Is(err, ErrTokenGone) {
			t.Errorf("enroll %s with a token revoked or expired: %v, want ErrTokenGone", id, err)
		}
		if _, err := s.Host(ctx, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("host %s after a refused enrollment: %v, want none", id, err)
		}
	}
	if _, err := s.Enroll(ctx, Enrollment{HostID: "h1", HostKey: "ssh-ed25519 AAAA", Token: live.ID}); err != nil {
		t.Errorf("enroll with a live token: %v", err)
	}
}

// TestTokenNameIsOneLine: a token's name is one line of printable text,
// at most 128 bytes; a name with a newline, tab, escape or
// invalid UTF-8 is refused and no token made.
func TestTokenNameIsOneLine(t *testing.T) {
	ctx := testCtx(t)
	s, _ := openTemp(t)
	for _, bad := range []string{"ci\nabc123  root  admin", "a\tb", "\x1b[2Jops", "\xff", strings.Repeat("n", 129)} {
		if _, _, err := s.CreateToken(ctx, TokenSpec{Role: RoleAdmin, Name: bad}); err == nil || !strings.Contains(err.Error(), "token name") {
			t.Errorf("name %q: %v, want a refusal naming the token name", bad, err)
		}
	}
	for _, good := range []string{"", "ci", "Ops team (laptop)", "équipe-nuit", strings.Repeat("n", 128)} {
		if _, _, err := s.CreateToken(ctx, TokenSpec{Role: RoleAdmin, Name: good}); err != nil {
			t.Errorf("name %q: %v", good, err)
		}
	}
	if toks, err := s.Tokens(ctx); err != nil || len(toks) != 5 {
		t.Errorf("tokens: %d, %v; want the 5 good ones", len(toks), err)
	}
}
