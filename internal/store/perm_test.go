package store

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// The database holds token hashes, pinned host keys and the audit log:
// Open creates it 0600 (SQLite made it 0644 under a 022 umask, and its WAL
// and index files likewise), and makes one found open to group or others
// its owner's alone, saying so.
func TestOpenProtectsTheDatabase(t *testing.T) {
	ctx := testCtx(t)
	path := filepath.Join(t.TempDir(), "gateway.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateToken(ctx, TokenSpec{Role: RoleAdmin}); err != nil {
		t.Fatal(err)
	}
	if len(s.Tightened()) != 0 {
		t.Errorf("a new database reports tightened files: %v", s.Tightened())
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600", filepath.Base(p), st.Mode().Perm(), err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// An older gateway's database, 0644 (and a WAL left by a crash, 0664).
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+"-wal", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path+"-wal", 0o664); err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := []TightenedFile{{Path: path, Was: 0o644, Now: 0o600}, {Path: path + "-wal", Was: 0o664, Now: 0o600}}
	got := s.Tightened()
	if len(got) != len(want) {
		t.Fatalf("Tightened %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("Tightened[%d] %v, want %v", i, got[i], want[i])
		}
	}
	for _, p := range []string{path, path + "-wal"} {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != fs.FileMode(0o600) {
			t.Errorf("%s after Open: %v %v, want mode 0600", filepath.Base(p), st.Mode().Perm(), err)
		}
	}
	if _, err := s.Tokens(ctx); err != nil {
		t.Errorf("the reopened database: %v", err)
	}
}
