package main

import (
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hostgate/hostgate/internal/store"
)

// token list and audit, run by a newly installed binary before the
// gateway's restart, leave the schema the older gateway made as it was,
// and say to restart the gateway first: they upgraded it, under the older
// gateway still serving, which then refused to start again (a rollback).
func TestReadCommandsLeaveOlderSchema(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	if _, err := cli(t, ctx, "token", "create", "--state-dir", dir, "--role", "admin", "--name", "ops"); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, dbFile))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	version := func() int {
		var v int
		if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	cur := version()
	// The schema before the last migration (gone_executions' reason).
	for _, stmt := range []string{`ALTER TABLE gone_executions DROP COLUMN reason`, fmt.Sprintf("PRAGMA user_version = %d", cur-1)} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	for _, args := range [][]string{{"token", "list"}, {"audit"}} {
		_, err := cli(t, ctx, append(args, "--state-dir", dir)...)
		var oe *store.OlderSchemaError
		if !errors.As(err, &oe) || oe.Have != cur-1 || oe.Want != cur || !strings.Contains(err.Error(), "Restart the gateway with this binary first") {
			t.Errorf("%v on a schema %d database: %v, want a refusal naming versions %d and %d and saying to restart the gateway first", args, cur-1, err, cur-1, cur)
		}
		if v := version(); v != cur-1 {
			t.Errorf("%v left the schema at version %d, want %d (the running gateway's)", args, v, cur-1)
		}
	}
}
