package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestPinKnownHostKeepsTheMode: a known_hosts file others read (one a
// team shares, 0644) keeps its mode when a host's line is pinned: the
// rewrite made every file 0600, and the other users' ssh, no longer able
// to read it, failed with "Host key verification failed". A new file is
// 0600.
func TestPinKnownHostKeepsTheMode(t *testing.T) {
	const key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
	dir := t.TempDir()
	shared := filepath.Join(dir, "shared")
	if err := os.WriteFile(shared, []byte("mine.example "+key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o644); err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(dir, "fresh")
	for path, want := range map[string]os.FileMode{shared: 0o644, fresh: 0o600} {
		if err := pinKnownHost(path, "box", key); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s pinned: mode %v (%v), want %v", filepath.Base(path), fi.Mode().Perm(), err, want)
		}
	}
}
