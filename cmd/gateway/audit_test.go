package main

import (
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/store"
)

// gateway audit lists the audit log newest first, which nothing read
// back before: the README's --audit-required makes sessions wait on a
// record an operator could only read with sqlite3 and the schema.
func TestAuditListsTheLog(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	if _, err := cli(t, ctx, "audit", "--state-dir", dir); err == nil || !strings.Contains(err.Error(), "no gateway state in "+dir) {
		t.Errorf("audit of a dir with no state: %v", err)
	}
	st, _, err := openState(ctx, dir, func(store.TightenedFile) {})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 4, 9, 30, 0, 0, time.UTC)
	for i, e := range []store.Session{
		{Time: at, TokenName: "client-1", HostID: "build-01", Kind: "ssh", RemoteAddr: "203.0.113.7:51234"},
		{Time: at.Add(time.Second), TokenName: "admin-1", HostID: "build-02", Kind: "certificate", RemoteAddr: "203.0.113.8:40000"},
	} {
		if err := st.RecordSession(ctx, e); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := cli(t, ctx, "audit", "--state-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "TIME") ||
		strings.Join(strings.Fields(lines[1]), " ") != "2026-12-04T09:30:01Z certificate build-02 admin-1 203.0.113.8:40000" ||
		strings.Join(strings.Fields(lines[2]), " ") != "2026-12-04T09:30:00Z ssh build-01 client-1 203.0.113.7:51234" {
		t.Errorf("audit listed:\n%s\nwant a header and both entries, newest first", out)
	}
	if out, err := cli(t, ctx, "audit", "--state-dir", dir, "--limit", "1"); err != nil || strings.Count(out, "\n") != 2 {
		t.Errorf("audit --limit 1: %v\n%s", err, out)
	}
}

// gateway audit prints one line per entry, whatever its fields hold: a
// direct session's address is its agent's word, and an entry a hostile
// agent had an older gateway write, with newlines, tabs and a terminal's
// escapes in it, printed as rows of its own (another host, another token)
// and as commands to the admin's terminal.
func TestAuditEntryIsOneLine(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	st, _, err := openState(ctx, dir, func(store.TightenedFile) {})
	if err != nil {
		t.Fatal(err)
	}
	forged := "192.0.2.9:50000\n2026-01-01T00:00:00Z\tssh\tprod\tadmin\t10.0.0.1\x1b]0;owned\x07\x1b[2J"
	if err := st.RecordSession(ctx, store.Session{Time: time.Date(2026, 12, 4, 9, 30, 0, 0, time.UTC), TokenName: "client-1", HostID: "h", Kind: "ssh-direct", RemoteAddr: forged}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := cli(t, ctx, "audit", "--state-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 2 || strings.ContainsAny(out, "\x1b\x07") || !strings.Contains(lines[1], "192.0.2.9:50000") || !strings.HasPrefix(lines[1], "2026-12-04T09:30:00Z") {
		t.Errorf("audit listed:\n%q\nwant a header and the entry on one line, without control characters", out)
	}
}
