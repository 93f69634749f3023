package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestKnownHostLine: what `gateway cert --known-hosts` and `gateway proxy
// --known-hosts` both decide a rewrite on. The file is current only when
// its one line for the host gives the key; a line for another host, a
// second line for the host or another key is not.
func TestKnownHostLine(t *testing.T) {
	const (
		key   = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
		other = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBxd0LxX2Zxcj1CXxzhKZqvSZ0IW+hJmTg4nDvtB3d7w"
	)
	dir := t.TempDir()
	for _, tc := range []struct {
		name, file     string
		named, current bool
	}{
		{"missing file", "", false, false},
		{"another host only", "box2 " + key + "\n", false, false},
		{"the key", "other " + other + "\nbox " + key + "\n", true, true},
		{"the key with a comment", "box " + key + " hostgate\n", true, true},
		{"another key", "box " + other + "\n", true, false},
		{"the key twice", "box " + key + "\nbox " + key + "\n", true, false},
		{"the key and another", "box " + key + "\nbox " + other + "\n", true, false},
	} {
		path := filepath.Join(dir, "missing")
		if tc.file != "" {
			path = filepath.Join(dir, tc.name)
			if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		named, current, err := knownHostLine(path, "box", key+"\n")
		if err != nil || named != tc.named || current != tc.current {
			t.Errorf("%s: named %v, current %v (%v); want %v, %v", tc.name, named, current, err, tc.named, tc.current)
		}
	}
	if _, _, err := knownHostLine(dir, "box", key); err == nil {
		t.Error("a directory as the known_hosts file: no error")
	}
}
