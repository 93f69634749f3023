package dockerhost

import (
	"archive/tar"
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testCheckpointManyReadOnlyDirs: a workspace with more names of
// read-only directories than a restore keeps to make read-only again
// (maxFixedDirBytes) is refused when its checkpoint is taken, as a
// conflict naming the fix, and a checkpoint that holds them anyway (taken
// before, or not made by a checkpoint) answers invalid_request on
// checkpointId. The checkpoint was taken, and every restore of it failed
// with an untyped error, answered 502 "the container engine failed".
func testCheckpointManyReadOnlyDirs(t *testing.T) {
	cli, img := engine(t)
	dir := t.TempDir()
	h := newTestHost(t, cli, &Config{CheckpointDir: dir})
	r := small()
	r.DiskBytes, r.MemoryBytes = 64<<20, 512<<20
	ex := provision(t, h, emptyReq(img, r))
	// 5,000 read-only directories 3.6 KiB deep: 18 MiB of names.
	comp := strings.Repeat("d", 240)
	deep := strings.TrimSuffix(strings.Repeat(comp+"/", 15), "/")
	sh(t, h, ex.ExecutionID, `cd /workspace && mkdir -p `+deep+` && cd `+deep+` && seq 1 5000 | xargs mkdir && seq 1 5000 | xargs chmod 555`)
	_, err := h.Checkpoint(testCtx(t, 2*time.Minute), ex.ExecutionID, CheckpointRequest{})
	var e *Error
	if !asError(err, &e) || e.Code != CodeConflict || !strings.Contains(e.Message, "chmod -R u+w") {
		t.Errorf("checkpoint of a workspace with 18 MiB of read-only directory names: %v; want a conflict naming the fix", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("checkpoint files after the refusal: %v", ents)
	}
	if out := sh(t, h, ex.ExecutionID, "echo alive").Stdout; out != "alive\n" {
		t.Errorf("the execution after the refusal: %q", out)
	}

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	parts := strings.Split(deep, "/")
	for i := range parts {
		if err := tw.WriteHeader(&tar.Header{Name: "./" + strings.Join(parts[:i+1], "/") + "/", Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 5000; i++ {
		if err := tw.WriteHeader(&tar.Header{Name: "./" + deep + "/" + strconv.Itoa(i) + "/", Typeflag: tar.TypeDir, Mode: 0o555}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	m := validManifest(buf.Bytes())
	m.Request = emptyReq(img, r)
	commitManifest(t, h.store, m, buf.Bytes())
	rex, err := h.Restore(testCtx(t, 2*time.Minute), RestoreRequest{CheckpointID: m.CheckpointID})
	if !asError(err, &e) || e.Code != CodeInvalidRequest || e.Field != "checkpointId" {
		t.Errorf("restore of a checkpoint with 18 MiB of read-only directory names: %+v %v; want invalid_request on checkpointId", rex, err)
	}
	if got := h.List(); len(got) != 1 {
		t.Errorf("executions after the refused restore: %+v, want only the first", got)
	}
}
