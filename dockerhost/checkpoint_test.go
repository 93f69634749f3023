package dockerhost

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func validManifest(tar []byte) *Manifest {
	sum := sha256.Sum256(tar)
	req := validReq()
	req.Env = map[string]string{"MODE": ""}
	return &Manifest{
		Version: ManifestVersion, CheckpointID: newCheckpointID(), ExecutionID: "exec-1",
		CreatedAt: time.Unix(1_800_000_000, 0).UTC(), Reason: "handoff",
		SizeBytes: int64(len(tar)), SHA256: hex.EncodeToString(sum[:]), Request: req,
	}
}

func TestLocalStoreRoundTrip(t *testing.T) {
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
	if _, _, err := s.Open(ctx, m.CheckpointID); !errors.Is(err, ErrCheckpointNotFound) {
		t.Fatalf("checkpoint visible before commit: %v", err)
	}
	if err := w.Commit(m); err != nil {
		t.Fatal(err)
	}
	got, rc, err := s.Open(ctx, m.CheckpointID)
	if err != nil {
		t.Fatal(err)
	}
	back, _ := io.ReadAll(rc)
	_ = rc.Close()
	if !bytes.Equal(back, data) || got.SHA256 != m.SHA256 || !got.CreatedAt.Equal(m.CreatedAt) || got.Request.Image != m.Request.Image {
		t.Fatalf("round trip: %+v", got)
	}
	if err := s.Delete(ctx, m.CheckpointID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Open(ctx, m.CheckpointID); !errors.Is(err, ErrCheckpointNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if _, _, err := s.Open(ctx, "../../etc/passwd"); !errors.Is(err, ErrCheckpointNotFound) {
		t.Fatalf("path traversal id: %v", err)
	}

	// A manifest that fails validation is never committed.
	w, _ = s.Create(ctx, m.CheckpointID)
	bad := *m
	bad.Request.Env = map[string]string{"MODE": "value"}
	if err := w.Commit(&bad); err == nil {
		t.Fatal("manifest with an env value committed")
	}
	entries, _ := os.ReadDir(s.Dir)
	if len(entries) != 0 {
		t.Fatalf("aborted checkpoint left files: %v", entries)
	}
}

func TestParseManifestRefusals(t *testing.T) {
	good, _ := json.Marshal(validManifest([]byte("x")))
	if _, err := ParseManifest(good); err != nil {
		t.Fatalf("good manifest: %v", err)
	}
	edit := func(f func(map[string]any)) []byte {
		var m map[string]any
		_ = json.Unmarshal(good, &m)
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	for name, data := range map[string][]byte{
		"version 2":       edit(func(m map[string]any) { m["version"] = 2 }),
		"no version":      edit(func(m map[string]any) { delete(m, "version") }),
		"unknown field":   edit(func(m map[string]any) { m["memory"] = "dump" }),
		"bad sha":         edit(func(m map[string]any) { m["sha256"] = "abc" }),
		"guessable id":    edit(func(m map[string]any) { m["checkpointId"] = "1" }),
		"negative size":   edit(func(m map[string]any) { m["sizeBytes"] = -1 }),
		"size over disk":  edit(func(m map[string]any) { m["sizeBytes"] = int64(1) << 40 }),
		"env value":       edit(func(m map[string]any) { m["request"].(map[string]any)["env"] = map[string]string{"A": "secret"} }),
		"no resources":    edit(func(m map[string]any) { delete(m["request"].(map[string]any), "resources") }),
		"trailing data":   append(append([]byte{}, good...), []byte(`{}`)...),
		"not json":        []byte("tar"),
		"too large":       append([]byte(`{"version":1,"reason":"`), bytes.Repeat([]byte("a"), maxManifestBytes)...),
		"unknown nested":  edit(func(m map[string]any) { m["request"].(map[string]any)["privileged"] = true }),
		"missing created": edit(func(m map[string]any) { delete(m, "createdAt") }),
	} {
		if _, err := ParseManifest(data); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzParseManifest(f *testing.F) {
	good, _ := json.Marshal(validManifest([]byte("x")))
	f.Add(good)
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`{"version":2,"x":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		if err != nil {
			return
		}
		// Whatever parses re-encodes to an equal, valid manifest.
		again, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := ParseManifest(again)
		if err != nil {
			t.Fatalf("re-encoded manifest refused: %v", err)
		}
		if m2.SHA256 != m.SHA256 || m2.SizeBytes != m.SizeBytes || m2.CheckpointID != m.CheckpointID {
			t.Fatalf("round trip changed the manifest")
		}
	})
}

func TestVerifyingReader(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 10000)
	sum := sha256.Sum256(data)
	read := func(src []byte, size int64, partial int) error {
		v := &verifyingReader{r: bytes.NewReader(src), left: size, sum: sha256.New(), want: sum[:]}
		if partial > 0 {
			// A consumer that stops early, like tar at its end blocks.
			if _, err := io.ReadFull(v, make([]byte, partial)); err != nil {
				return err
			}
			return v.finish(context.Background())
		}
		_, err := io.Copy(io.Discard, v)
		return err
	}
	if err := read(data, int64(len(data)), 0); err != nil {
		t.Fatalf("intact: %v", err)
	}
	if err := read(data, int64(len(data)), 100); err != nil {
		t.Fatalf("intact, partly read: %v", err)
	}
	tampered := bytes.Clone(data)
	tampered[len(tampered)-1] ^= 1
	if err := read(tampered, int64(len(data)), 0); !errors.Is(err, errChecksum) {
		t.Fatalf("tampered: %v", err)
	}
	if err := read(tampered, int64(len(data)), 100); !errors.Is(err, errChecksum) {
		t.Fatalf("tampered tail after a partial read: %v", err)
	}
	if err := read(append(bytes.Clone(data), 'x'), int64(len(data)), 0); !errors.Is(err, errChecksum) {
		t.Fatalf("longer: %v", err)
	}
	if err := read(data[:len(data)-1], int64(len(data)), 0); !errors.Is(err, errChecksum) {
		t.Fatalf("shorter: %v", err)
	}
}

func TestRWLock(t *testing.T) {
	var l rwLock
	ctx := testCtx(t, time.Minute)
	if err := l.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- l.Lock(ctx) }()

	// A waiting writer keeps new readers out...
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	for {
		err := l.RLock(short)
		if err != nil {
			break
		}
		// The writer may not have registered yet: undo and retry.
		l.RUnlock()
	}
	// ...and gets the lock once the reader leaves.
	l.RUnlock()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	if err := l.RLock(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("RLock under a writer with a cancelled ctx: %v", err)
	}
	l.Unlock()
	if err := l.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	l.RUnlock()
	if !strings.Contains((&Error{Code: CodeGone, Message: "m"}).Error(), "gone") {
		t.Fatal("Error text lacks its code")
	}
}

// A new LocalStore removes the partial files and manifest-less tars a
// killed run left, and not those a checkpoint is writing now.
func TestLocalStoreSweepsPartials(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "cp1.tar.123.partial")
	fresh := filepath.Join(dir, "cp2.tar.456.partial")
	for _, n := range []string{old, fresh} {
		if err := os.WriteFile(n, []byte("half"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	long := time.Now().Add(-time.Hour)
	if err := os.Chtimes(old, long, long); err != nil {
		t.Fatal(err)
	}
	// A tar whose manifest a killed run never wrote (or had removed),
	// an old one with its manifest, and a fresh one being committed.
	orphan := writeCheckpoint(t, dir, time.Now(), 10, "exec-1").CheckpointID
	kept := writeCheckpoint(t, dir, time.Now(), 10, "exec-1").CheckpointID
	committing := writeCheckpoint(t, dir, time.Now(), 10, "exec-1").CheckpointID
	for _, id := range []string{orphan, committing} {
		if err := os.Remove(filepath.Join(dir, id+".json")); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{orphan, kept} {
		if err := os.Chtimes(filepath.Join(dir, id+".tar"), long, long); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := NewLocalStore(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a killed run's partial file: %v, want it removed", err)
	}
	if _, err := os.Stat(filepath.Join(dir, orphan+".tar")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a killed run's tar without its manifest: %v, want it removed", err)
	}
	for _, id := range []string{kept, committing} {
		if _, err := os.Stat(filepath.Join(dir, id+".tar")); err != nil {
			t.Errorf("tar %s: %v, want it kept", id, err)
		}
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("a partial file being written: %v, want it kept", err)
	}
}

// A checkpoint damaged in the store (here a manifest of another version)
// says what is wrong, where it said only "unreadable" and logged nothing.
func TestRestoreNamesStoreDamage(t *testing.T) {
	h := fakeHost(t, &fakeDocker{}, time.Now())
	id := strings.Repeat("a", 32)
	if err := os.WriteFile(filepath.Join(h.store.(*LocalStore).Dir, id+".json"), []byte(`{"version": 2}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := h.Restore(testCtx(t, time.Minute), RestoreRequest{CheckpointID: id})
	// The message is what the API answers (the wrapped error is not).
	var de *Error
	if !errors.As(err, &de) || de.Code != CodeInvalidRequest || !strings.Contains(de.Message, "manifest version 2 not supported") {
		t.Fatalf("restore of a version 2 manifest: %v, want invalid_request whose message names the version", err)
	}
}

// A restore that names no checkpoint is told the field is missing, not
// that an empty id has the wrong form.
func TestRestoreWithoutCheckpointID(t *testing.T) {
	h := fakeHost(t, &fakeDocker{}, time.Now())
	_, err := h.Restore(testCtx(t, time.Minute), RestoreRequest{})
	var de *Error
	if !errors.As(err, &de) || de.Code != CodeInvalidRequest || de.Field != "checkpointId" || !strings.Contains(de.Message, "is required") {
		t.Fatalf("restore of {}: %v, want invalid_request saying checkpointId is required", err)
	}
}

// A checkpoint taken when the least pids was 8 (then 16) restores: a
// restore cannot change its resources, so it gets the least pids allowed
// now.
func TestRestoreRaisesOldPids(t *testing.T) {
	for _, pids := range []int64{8, 16} {
		t.Run(strconv.FormatInt(pids, 10), func(t *testing.T) {
			h := fakeHost(t, &fakeDocker{}, time.Now())
			data := bytes.Repeat([]byte("tar!"), 128)
			m := validManifest(data)
			m.Request.Resources.Pids = pids
			commitManifest(t, h.store, m, data)
			// The fake engine creates nothing: the restore gets past
			// validation and fails at the engine.
			_, err := h.Restore(testCtx(t, time.Minute), RestoreRequest{CheckpointID: m.CheckpointID})
			var de *Error
			if errors.As(err, &de) && de.Field == "resources.pids" {
				t.Fatalf("restore of a pids %d checkpoint: %v, want it past validation", pids, err)
			}
			if err == nil || !strings.Contains(err.Error(), "fake: no more creates") {
				t.Fatalf("restore: %v, want the fake engine's create failure", err)
			}
		})
	}
}

// A restore refused for a field of the checkpoint's recorded request (a
// checkpoint from a gateway that allowed more CPUs) says the value is the
// checkpoint's; one refused for what its caller sent does not.
func TestRestoreNamesCheckpointFields(t *testing.T) {
	h := fakeHost(t, &fakeDocker{}, time.Now())
	data := bytes.Repeat([]byte("tar!"), 128)
	big := validManifest(data)
	big.Request.Resources.CPUs = h.policy.Max.CPUs + 1
	commitManifest(t, h.store, big, data)
	_, err := h.Restore(testCtx(t, time.Minute), RestoreRequest{CheckpointID: big.CheckpointID})
	var de *Error
	if !errors.As(err, &de) || de.Field != "resources.cpus" || !strings.Contains(de.Message, "the checkpoint's value") {
		t.Fatalf("restore of a checkpoint with more CPUs than allowed: %v, want resources.cpus named as the checkpoint's", err)
	}
	ok := commitCheckpoint(t, h.store, data)
	_, err = h.Restore(testCtx(t, time.Minute), RestoreRequest{CheckpointID: ok.CheckpointID, Env: map[string]string{"API_TOKEN": "x"}})
	if !errors.As(err, &de) || de.Field != "env.API_TOKEN" || strings.Contains(de.Message, "checkpoint") {
		t.Fatalf("restore with a credential env name: %v, want env.API_TOKEN refused as the caller's", err)
	}
}
