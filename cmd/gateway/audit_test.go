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
