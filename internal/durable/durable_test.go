package durable

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// watchSyncs records, until the test ends, each directory SyncDir syncs
// and whether name was in it by then.
func watchSyncs(t *testing.T, name string) *[]string {
	t.Helper()
	var synced []string
	Synced = func(dir string) {
		if _, err := os.Stat(name); err != nil {
			t.Errorf("%s synced before %s was in place: %v", dir, name, err)
		}
		synced = append(synced, dir)
	}
	t.Cleanup(func() { Synced = nil })
	return &synced
}

func TestRenameSyncsItsDirectory(t *testing.T) {
	dir := t.TempDir()
	tmp, path := filepath.Join(dir, ".tmp"), filepath.Join(dir, "f")
	if err := os.WriteFile(tmp, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	synced := watchSyncs(t, path)
	if err := Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	if len(*synced) != 1 || (*synced)[0] != dir {
		t.Fatalf("synced %q, want %q", *synced, dir)
	}
}

func TestLinkSyncsItsDirectory(t *testing.T) {
	dir := t.TempDir()
	tmp, path := filepath.Join(dir, ".tmp"), filepath.Join(dir, "f")
	if err := os.WriteFile(tmp, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	synced := watchSyncs(t, path)
	if err := Link(tmp, path); err != nil {
		t.Fatal(err)
	}
	// Taken (a concurrent first writer): the caller reads what is there,
	// whose name must be on disk as well.
	if err := Link(tmp, path); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("link over an existing file: %v, want ErrExist", err)
	}
	if len(*synced) != 2 || (*synced)[0] != dir || (*synced)[1] != dir {
		t.Fatalf("synced %q, want %q twice", *synced, dir)
	}
}

func TestSyncDirNamesAMissingDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gone")
	err := SyncDir(dir)
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Path != dir {
		t.Fatalf("SyncDir(%s): %v, want an error naming it", dir, err)
	}
}
