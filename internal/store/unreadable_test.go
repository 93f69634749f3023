package store

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A database Open cannot take says what to do, beside SQLite's word and
// the file: one cut short or not a database at all (a restore's copy gone
// wrong) said only "database disk image is malformed (11)" or "file is not
// a database (26)", and one a newer gateway made only that its schema was
// newer, where the fix for each is the backup (or the newer binary). Each
// is left as it was.
func TestOpenUnreadableNamesFix(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	whole := filepath.Join(t.TempDir(), "whole.db")
	s, err := Open(ctx, whole)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if _, _, err := s.CreateToken(ctx, TokenSpec{Name: strings.Repeat("n", 100) + string(rune('a'+i%26)), Role: RoleAdmin}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(whole)
	if err != nil {
		t.Fatal(err)
	}
	newer := filepath.Join(t.TempDir(), "newer.db")
	if err := os.WriteFile(newer, b, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", fileURI(newer))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "PRAGMA user_version = 999"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		data []byte
		want []string
	}{
		{"cut.db", b[:len(b)/3], []string{"damaged", "backup"}},
		{"other.db", []byte(strings.Repeat("not a database\n", 400)), []string{"damaged", "backup"}},
		{"newer.db", nil, []string{"newer", "gateway version", "backup"}},
	} {
		p := filepath.Join(t.TempDir(), tc.name)
		if tc.data == nil {
			p = newer
		} else if err := os.WriteFile(p, tc.data, 0o600); err != nil {
			t.Fatal(err)
		}
		before, _ := os.ReadFile(p)
		s, err := Open(ctx, p)
		if err == nil {
			_ = s.Close()
			t.Errorf("%s: opened", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) || !strings.Contains(err.Error(), p) {
				t.Errorf("%s: %v; want it to name the file and say %q", tc.name, err, w)
			}
		}
		if after, _ := os.ReadFile(p); string(after) != string(before) {
			t.Errorf("%s: Open changed the file", tc.name)
		}
	}
}
