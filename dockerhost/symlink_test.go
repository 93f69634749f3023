package dockerhost

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// commitCheckpoint stores data as a checkpoint in s and returns its
// manifest.
func commitCheckpoint(t *testing.T, s CheckpointStore, data []byte) *Manifest {
	t.Helper()
	return commitManifest(t, s, validManifest(data), data)
}

// commitManifest stores data as the checkpoint m describes in s and
// returns m.
func commitManifest(t *testing.T, s CheckpointStore, m *Manifest, data []byte) *Manifest {
	t.Helper()
	w, err := s.Create(testCtx(t, time.Minute), m.CheckpointID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(m); err != nil {
		t.Fatal(err)
	}
	return m
}

// plant replaces name with a symbolic link to target.
func plant(t *testing.T, target, name string) {
	t.Helper()
	if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
}

// TestLocalStoreRefusesLinks: a symbolic link planted in place of a
// checkpoint's tar or manifest is not followed (Open followed it, reading
// whatever file it named, and a FIFO hung the open for good); removing
// and sweeping take the link, never its target.
func TestLocalStoreRefusesLinks(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	dir := t.TempDir()
	s, err := NewLocalStore(filepath.Join(dir, "cp"))
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("tar!"), 1000)
	m := commitCheckpoint(t, s, data)
	tarPath := filepath.Join(s.Dir, m.CheckpointID+".tar")
	jsonPath := filepath.Join(s.Dir, m.CheckpointID+".json")

	// The link names a file the gateway can read, here the very tar, so
	// that only the link itself can make Open refuse.
	elsewhere := filepath.Join(dir, "elsewhere")
	if err := os.Mkdir(elsewhere, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{tarPath, jsonPath} {
		target := filepath.Join(elsewhere, filepath.Base(p))
		if err := os.Rename(p, target); err != nil {
			t.Fatal(err)
		}
		plant(t, target, p)
		_, rc, err := s.Open(ctx, m.CheckpointID)
		var nr *notRegularError
		if !errors.As(err, &nr) || nr.Path != p || nr.What != "a symbolic link" {
			if rc != nil {
				_ = rc.Close()
			}
			t.Fatalf("open with %s a link: %v, want it refused naming the path", filepath.Base(p), err)
		}
		if err := os.Rename(target, p); err != nil { // the real file back
			t.Fatal(err)
		}
	}
	if _, rc, err := s.Open(ctx, m.CheckpointID); err != nil {
		t.Fatalf("open of the restored files: %v", err)
	} else {
		_ = rc.Close()
	}

	// A FIFO is refused at once, not waited on.
	if err := os.Rename(tarPath, tarPath+".real"); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(tarPath, 0o600); err != nil {
		t.Fatal(err)
	}
	var nr *notRegularError
	if _, _, err := s.Open(ctx, m.CheckpointID); !errors.As(err, &nr) || nr.What != "a named pipe" {
		t.Fatalf("open with the tar a FIFO: %v, want it refused", err)
	}

	// Delete removes links, never what they name.
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	plant(t, secret, tarPath)
	plant(t, secret, jsonPath)
	if err := s.Delete(ctx, m.CheckpointID); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(secret); err != nil || string(b) != "keep me" {
		t.Fatalf("a linked file after Delete: %q %v", b, err)
	}
	for _, p := range []string{tarPath, jsonPath} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s after Delete: %v, want it gone", p, err)
		}
	}

	// The sweep of a killed run's partial files skips a link named like
	// one, and what it names.
	partial := filepath.Join(s.Dir, m.CheckpointID+".tar.1.partial")
	plant(t, secret, partial)
	long := time.Now().Add(-time.Hour)
	if err := os.Chtimes(secret, long, long); err != nil {
		t.Fatal(err)
	}
	if _, err := NewLocalStore(s.Dir); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(secret); err != nil || string(b) != "keep me" {
		t.Fatalf("a linked file after the sweep: %q %v", b, err)
	}
}

// A restore of a checkpoint whose tar is a link answers
// storage_unavailable naming the field, not the path, and logs the path.
func TestRestoreRefusesLinkedCheckpoint(t *testing.T) {
	var log bytes.Buffer
	h, err := NewDocker(testCtx(t, time.Minute), slog.New(slog.NewTextHandler(&log, nil)), &fakeDocker{}, &Config{Owner: "gw", CheckpointDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	data := bytes.Repeat([]byte("tar!"), 128)
	m := commitCheckpoint(t, h.store, data)
	tarPath := filepath.Join(h.store.(*LocalStore).Dir, m.CheckpointID+".tar")
	target := filepath.Join(t.TempDir(), "target.tar")
	if err := os.WriteFile(target, data, 0o600); err != nil {
		t.Fatal(err)
	}
	plant(t, target, tarPath)
	_, err = h.Restore(testCtx(t, time.Minute), RestoreRequest{CheckpointID: m.CheckpointID})
	var de *Error
	if !errors.As(err, &de) || de.Code != CodeStorageUnavailable || de.Field != "checkpointId" ||
		!strings.Contains(de.Message, "symbolic link") || strings.Contains(de.Message, tarPath) {
		t.Fatalf("restore of a linked tar: %v, want storage_unavailable on checkpointId, the path only in the log", err)
	}
	if !strings.Contains(log.String(), tarPath) {
		t.Fatalf("the log does not name %s:\n%s", tarPath, log.String())
	}
}

// The kept provision env of a pooled execution is written to a file of its
// own and read without following a link: its temporary name was fixed, so
// a link planted there made the write clobber what it named.
func TestEnvFileRefusesLinks(t *testing.T) {
	dir := t.TempDir()
	h, err := NewDocker(testCtx(t, time.Minute), nil, &fakeDocker{}, &Config{Owner: "gw", CheckpointDir: t.TempDir(), EnvDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte(`{"A":"victim"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	plant(t, victim, h.envFile("e1")+".partial")
	if err := h.saveEnv("e1", map[string]string{"A": "mine"}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != `{"A":"victim"}` {
		t.Fatalf("a linked file after saveEnv: %q %v, want it untouched", b, err)
	}
	if env := h.loadEnv("e1"); env["A"] != "mine" {
		t.Fatalf("loadEnv: %v", env)
	}
	plant(t, victim, h.envFile("e1"))
	if env := h.loadEnv("e1"); env != nil {
		t.Fatalf("loadEnv through a link: %v, want nothing read", env)
	}
}
