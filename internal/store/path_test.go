package store

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// A state dir's name may hold what a URI gives meaning to ('#', '?',
// '%'): the database must still be the file at path, not one SQLite made
// of the name cut short (outside the state dir, 0644).
func TestOpenPathWithURICharacters(t *testing.T) {
	// Subtests by number: t.TempDir's name comes from the test's, and
	// a '#' in it sent the database out of it.
	for i, name := range []string{"a#b", "a?b", "a%41b", "a%b", "a b", "a&_txlock=deferred"} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			ctx := testCtx(t)
			parent := t.TempDir()
			dir := filepath.Join(parent, name)
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "gateway.db")
			s, err := Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.CreateToken(ctx, TokenSpec{Role: RoleAdmin}); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			ents, _ := os.ReadDir(parent)
			if len(ents) != 1 {
				var names []string
				for _, e := range ents {
					names = append(names, e.Name())
				}
				t.Errorf("files beside the state dir: %q, want only %q", names, name)
			}
			if st, err := os.Stat(path); err != nil || st.Size() == 0 {
				t.Fatalf("the database at %s is empty or missing: %v", path, err)
			}
			s, err = Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			toks, err := s.Tokens(ctx)
			if err != nil || len(toks) != 1 {
				t.Errorf("reopened: %d tokens, %v; want 1", len(toks), err)
			}
			if err := Backup(ctx, path, filepath.Join(dir, "copy.db")); err != nil {
				t.Errorf("Backup: %v", err)
			}
		})
	}
}
