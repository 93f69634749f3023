package dockerhost

import (
	"archive/tar"
	"bytes"
	"strings"
	"testing"
	"time"
)

// hostileTar is a tar of entries as given, data for each regular one.
func hostileTar(t *testing.T, hdrs []tar.Header, data map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range hdrs {
		h.Size = int64(len(data[h.Name]))
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(data[h.Name])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// testRestoreHostileTar: a checkpoint whose archive was written to escape
// the workspace, stored with a manifest that matches it (a store written
// by someone else than this gateway), is unpacked inside the workspace
// or refused. Names with ../ and absolute names land under /workspace;
// a set-uid bit and root ownership are dropped and a device is not made
// (tar runs as the sandbox's user, no capabilities); nothing lands in
// /dev/shm, the one other place the sandbox can write. A hard link to a
// file outside, or a file through a symbolic link out of it, is refused
// as invalid_request on checkpointId in tar's words, nothing left: it
// answered 502 engine_error, "the container engine failed".
func testRestoreHostileTar(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, &Config{CheckpointDir: t.TempDir()})
	restore := func(data []byte) (*Execution, error) {
		m := validManifest(data)
		m.Request = emptyReq(img, small())
		commitManifest(t, h.store, m, data)
		return h.Restore(testCtx(t, 2*time.Minute), RestoreRequest{CheckpointID: m.CheckpointID})
	}
	inside := hostileTar(t, []tar.Header{
		{Name: "../../../dev/shm/up", Typeflag: tar.TypeReg, Mode: 0o644},
		{Name: "/dev/shm/abs", Typeflag: tar.TypeReg, Mode: 0o644},
		{Name: "./suid", Typeflag: tar.TypeReg, Mode: 0o4755, Uid: 0, Gid: 0},
		{Name: "./null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3, Mode: 0o666},
	}, map[string]string{"../../../dev/shm/up": "up", "/dev/shm/abs": "abs", "./suid": "#!/bin/sh\n"})
	rex, err := restore(inside)
	if err != nil {
		t.Fatalf("restore of names out of the workspace: %v, want them unpacked inside", err)
	}
	res := sh(t, h, rex.ExecutionID, `cd /workspace && find . | sort; stat -c '%a %u %n' suid; ls -A /dev/shm`)
	uid := uidOf(t, h, rex.ExecutionID)
	if want := ".\n./dev\n./dev/shm\n./dev/shm/abs\n./dev/shm/up\n./suid\n755 " + uid + " suid\n"; res.Stdout != want {
		t.Errorf("the workspace and /dev/shm after the restore:\n%s\nwant:\n%s", res.Stdout, want)
	}
	for name, hdrs := range map[string][]tar.Header{
		"a hard link out": {{Name: "./passwd", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"}},
		"through a symbolic link out": {
			{Name: "./l", Typeflag: tar.TypeSymlink, Linkname: "/dev/shm", Mode: 0o777},
			{Name: "./l/through", Typeflag: tar.TypeReg, Mode: 0o644},
		},
	} {
		ex, err := restore(hostileTar(t, hdrs, map[string]string{"./l/through": "x"}))
		var e *Error
		if !asError(err, &e) || e.Code != CodeInvalidRequest || e.Field != "checkpointId" || !strings.Contains(e.Message, "tar: can't create") || !strings.Contains(e.Message, "restore another checkpoint") {
			t.Errorf("%s: %+v %v; want invalid_request on checkpointId in tar's words", name, ex, err)
		}
	}
	if n := len(h.List()); n != 1 {
		t.Errorf("%d executions after the refusals, want the one restored", n)
	}
	for _, c := range ownerContainers(t, cli, h) {
		if c.ID != rex.ContainerID {
			waitRemoved(t, cli, c.ID, time.Minute)
		}
	}
}
