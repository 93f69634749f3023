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
	"time"

	"github.com/hostgate/hostgate/internal/testenv"
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

// A gateway whose database is deleted while it serves says so in its log,
// naming the file: it goes on with the deleted file, and everything it
// writes from then on is lost when it stops. Before, nothing showed it.
func TestServeSaysItsDatabaseWasDeleted(t *testing.T) {
	defer func(d time.Duration) { stateWatchInterval = d }(stateWatchInterval)
	stateWatchInterval = 10 * time.Millisecond
	dir := t.TempDir()
	var logs testenv.LogBuffer
	stop := serveLogged(t, dir, &logs)
	db := filepath.Join(dir, dbFile)
	for _, name := range []string{db, db + "-wal", db + "-shm"} {
		if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
	}
	deadline := time.After(30 * time.Second)
	for !strings.Contains(logs.String(), "state database was deleted or replaced") || !strings.Contains(logs.String(), db) {
		select {
		case <-deadline:
			t.Fatalf("30 s after its database was deleted the gateway has not said so; its log:\n%s", logs.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("serve after the deletion: %v", err)
	}
}
