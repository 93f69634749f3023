package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
)

// OpenRead neither upgrades an older schema nor writes: it refuses it
// naming both versions, and leaves it as the older gateway serving it made
// it. On the current schema it reads, and a write fails.
func TestOpenReadLeavesOlderSchema(t *testing.T) {
	ctx := testCtx(t)
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateToken(ctx, TokenSpec{Name: "ops", Role: RoleAdmin}); err != nil {
		t.Fatal(err)
	}
	r, err := OpenRead(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if toks, err := r.Tokens(ctx); err != nil || len(toks) != 1 {
		t.Errorf("OpenRead's Tokens: %v, %v; want the one token", toks, err)
	}
	if _, _, err := r.CreateToken(ctx, TokenSpec{Name: "x", Role: RoleAdmin}); err == nil {
		t.Error("OpenRead's store wrote a token")
	}
	_ = r.Close()
	// The last migration adds gone_executions' reason.
	prev := len(migrations) - 1
	for _, stmt := range []string{`ALTER TABLE gone_executions DROP COLUMN reason`, fmt.Sprintf("PRAGMA user_version = %d", prev)} {
		if _, err := s.db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	_, err = OpenRead(ctx, path)
	var oe *OlderSchemaError
	if !errors.As(err, &oe) || oe.Have != prev || oe.Want != len(migrations) {
		t.Errorf("OpenRead of a schema %d database: %v, want an OlderSchemaError", prev, err)
	}
	var v int
	if err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil || v != prev {
		t.Errorf("schema version %d (%v) after OpenRead, want %d", v, err, prev)
	}
	_ = s.Close()
}
