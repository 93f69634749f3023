package execapi

import (
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hostgate/hostgate/internal/durable"
)

// TestKeptKeyIsDurable: an execution's kept host key has its directory
// synced once it is renamed into place (and the file is synced before).
// Neither was: after a power loss a gateway resuming the execution could
// find the key gone, or its file empty, and pin a fresh one, which every
// caller that pinned the first refuses. A power loss cannot be simulated
// here: durable.Synced says that the directory was synced, and after the
// rename.
func TestKeptKeyIsDurable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	a := &Agents{cfg: AgentsConfig{KeyDir: dir}}
	path := a.keyPath("ex-1")
	var synced []string
	durable.Synced = func(d string) {
		if _, err := os.Stat(path); err == nil {
			synced = append(synced, d)
		}
	}
	defer func() { durable.Synced = nil }()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.keepKey("ex-1", priv); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(synced, dir) {
		t.Fatalf("%s was not synced once the key was renamed into it: a power loss can lose it", dir)
	}
}
