//go:build unix

package main

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A token created while a gateway serves from a state dir whose database
// was deleted is refused, with the reason: the gateway goes on with the
// deleted file and would refuse the token, and a new database there
// would be all the state it found at its restart. Before, the command
// made that new database and printed a token the gateway answered 401.
func TestTokenCreateRefusesServedDirWithoutDatabase(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	create := func() (string, error) {
		var out, errb bytes.Buffer
		err := run(ctx, stdio{in: strings.NewReader(""), out: &out, err: &errb}, []string{"token", "create", "--state-dir", dir, "--role", "admin"})
		return errb.String(), err
	}
	if _, err := create(); err != nil {
		t.Fatal(err)
	}
	unlock, err := lockStateDir(dir) // as the serving gateway holds it
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	for _, name := range []string{dbFile, dbFile + "-wal", dbFile + "-shm"} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
	}
	stderr, err := create()
	if err == nil || !strings.Contains(err.Error(), "is gone") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("token create in a served dir without its database: %v (stderr %q), want a refusal naming the dir", err, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, dbFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the refused command made a new database: %v", err)
	}
	unlock()
	if _, err := create(); err != nil { // no gateway: new state, as before
		t.Fatalf("token create once the gateway stopped: %v", err)
	}
}
