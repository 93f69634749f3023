package agent

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/hostgate/hostgate/internal/durable"
)

// A pin appears whole or not at all, 0600, and the first writer wins: a
// reader never finds it empty or cut short, as one would after a crash
// between its creation and its write.
func TestWriteNewWholeOrNothing(t *testing.T) {
	dir := t.TempDir()
	for i := range 20 {
		path := filepath.Join(dir, "pin")
		a, b := bytes.Repeat([]byte("a"), 1<<20), bytes.Repeat([]byte("b"), 1<<20)
		var seen []int
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if data, err := os.ReadFile(path); err == nil && len(data) != len(a) {
					seen = append(seen, len(data))
				}
			}
		})
		var writers sync.WaitGroup
		for _, data := range [][]byte{a, b} {
			writers.Go(func() {
				if err := writeNew(path, data); err != nil {
					t.Error(err)
				}
			})
		}
		writers.Wait()
		close(stop)
		wg.Wait()
		if len(seen) > 0 {
			t.Fatalf("round %d: the pin was read with %d bytes of %d", i, seen[0], len(a))
		}
		got, err := os.ReadFile(path)
		if err != nil || !(bytes.Equal(got, a) || bytes.Equal(got, b)) {
			t.Fatalf("round %d: the pin holds %d bytes (%v), not one writer's whole", i, len(got), err)
		}
		if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
			t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 1 {
			t.Fatalf("round %d: %d entries in the state dir, want the pin alone", i, len(ents))
		}
		_ = os.Remove(path)
	}
}

// TestWriteNewIsDurable: a new pin's name is synced to disk once it is in
// place. The pin was synced, its directory was not, so a power loss could
// lose a pin the agent had logged as made, and the agent would then trust
// whatever gateway it reached next. A power loss cannot be simulated
// here: durable.Synced says that the directory was synced, and after the
// link.
func TestWriteNewIsDurable(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, GatewayCAFile)
	var synced []string
	durable.Synced = func(d string) {
		if _, err := os.Stat(path); err == nil {
			synced = append(synced, d)
		}
	}
	defer func() { durable.Synced = nil }()
	if err := writeNew(path, []byte("pin\n")); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(synced, dir) {
		t.Fatalf("%s was not synced once the pin was linked into it: a power loss can lose the pin", dir)
	}
}
