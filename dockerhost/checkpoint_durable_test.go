package dockerhost

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/durable"
)

// TestCheckpointIsDurable: a committed checkpoint's names are synced to
// disk, the tar's before the manifest is put in place, the manifest's
// after. The files were synced, their directory was not: after a power
// loss a checkpoint answered as saved could be gone, or be a manifest
// whose tar is missing. A power loss cannot be simulated here:
// durable.Synced says when the directory was synced.
func TestCheckpointIsDurable(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	s, err := NewLocalStore(filepath.Join(t.TempDir(), "cp"))
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("tar!"), 1000)
	m := validManifest(data)
	exists := func(name string) bool { _, err := os.Stat(filepath.Join(s.Dir, name)); return err == nil }
	var tarSynced, manifestSynced bool
	durable.Synced = func(d string) {
		if d != s.Dir {
			return
		}
		tarSynced = tarSynced || exists(m.CheckpointID+".tar") && !exists(m.CheckpointID+".json")
		manifestSynced = manifestSynced || exists(m.CheckpointID+".json")
	}
	defer func() { durable.Synced = nil }()
	w, err := s.Create(ctx, m.CheckpointID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(m); err != nil {
		t.Fatal(err)
	}
	if !tarSynced {
		t.Errorf("%s was not synced once the tar was renamed into it, before its manifest: a power loss can leave a manifest without its tar", s.Dir)
	}
	if !manifestSynced {
		t.Errorf("%s was not synced once the manifest was renamed into it: a power loss can lose the checkpoint", s.Dir)
	}
}

// TestCheckpointDeleteIsDurable: a deleted checkpoint's removal is synced
// to disk before Delete returns, and before its tar goes. The names were
// removed and the directory left unsynced: after a power loss a
// checkpoint answered as deleted could be back, or be a manifest whose
// tar is missing.
func TestCheckpointDeleteIsDurable(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	s, err := NewLocalStore(filepath.Join(t.TempDir(), "cp"))
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("tar!"), 1000)
	m := validManifest(data)
	w, err := s.Create(ctx, m.CheckpointID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(m); err != nil {
		t.Fatal(err)
	}
	exists := func(name string) bool { _, err := os.Stat(filepath.Join(s.Dir, name)); return err == nil }
	var goneSynced, tarFirst bool
	durable.Synced = func(d string) {
		if d == s.Dir && !exists(m.CheckpointID+".json") {
			goneSynced = true
			tarFirst = tarFirst || exists(m.CheckpointID+".tar")
		}
	}
	defer func() { durable.Synced = nil }()
	if err := s.Delete(ctx, m.CheckpointID); err != nil {
		t.Fatal(err)
	}
	if exists(m.CheckpointID+".json") || exists(m.CheckpointID+".tar") {
		t.Fatalf("%s still holds the deleted checkpoint's files", s.Dir)
	}
	if !goneSynced {
		t.Errorf("%s was not synced once the manifest was removed: the deleted checkpoint can come back after a power loss", s.Dir)
	} else if !tarFirst {
		t.Errorf("%s was synced only after the tar was removed too: a power loss can leave the manifest without its tar", s.Dir)
	}
}
