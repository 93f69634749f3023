package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hostgate/hostgate/internal/durable"
)

// TestStateWritesAreDurable: a file the gateway (or gateway cert, or dev)
// writes aside and renames or links into place has its directory synced
// once the new name is there. Without it a power loss could lose the
// previews' new cookie key (every open preview logged out) or a
// certificate or known_hosts just written, though the write had
// succeeded; writeAtomic did not sync the file either, which could leave
// it empty under its new name. A power loss cannot be simulated here:
// durable.Synced says that the directory was synced, and after the
// rename.
func TestStateWritesAreDurable(t *testing.T) {
	for _, tc := range []struct {
		name  string
		file  string
		write func(path string) error
	}{
		{"writeAtomic", "known_hosts", func(path string) error { return writeAtomic(path, []byte("x\n"), 0o600) }},
		{"session key", "hostgate_ed25519", func(path string) error { _, err := sessionKey(path); return err }},
		{"preview key", previewKeyFile, func(path string) error { _, err := loadOrCreatePreviewKey(path); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, tc.file)
			var synced []string
			durable.Synced = func(d string) {
				if _, err := os.Stat(path); err == nil {
					synced = append(synced, d)
				}
			}
			defer func() { durable.Synced = nil }()
			if err := tc.write(path); err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(synced, dir) {
				t.Fatalf("%s was not synced once %s was put in it: a power loss can lose it", dir, tc.file)
			}
		})
	}
}
