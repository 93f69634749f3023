package dockerhost

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

// TestCheckpointReasonNotUTF8: a reason that is not UTF-8 text is
// refused, by the store's commit too, rather than kept in a manifest that
// reads back otherwise. JSON writes each invalid byte as U+FFFD, three
// bytes, so a reason of 600 such bytes (under the 1024 a reason may
// take) was committed and its checkpoint answered, and then every read
// of the manifest refused it (reason longer than 1024 bytes): the
// checkpoint could not be listed, got or restored.
func TestCheckpointReasonNotUTF8(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	dir := t.TempDir()
	s, err := NewLocalStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("tar!"), 100)
	m := validManifest(data)
	m.Reason = strings.Repeat("\xff", 600)
	w, err := s.Create(ctx, m.CheckpointID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(m); err == nil {
		_, _, oerr := s.Open(ctx, m.CheckpointID)
		t.Fatalf("commit of a manifest whose reason is not UTF-8 succeeded; reading it back: %v", oerr)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("files left by the refused commit: %v", ents)
	}

	h := fakeHost(t, &fakeDocker{}, time.Unix(1_800_000_000, 0))
	_, err = h.Checkpoint(ctx, "x", CheckpointRequest{Reason: m.Reason})
	var e *Error
	if !asError(err, &e) || e.Code != CodeInvalidRequest || e.Field != "reason" {
		t.Errorf("checkpoint with a reason that is not UTF-8: %v, want invalid_request on reason", err)
	}
}
