package dockerhost

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"

	"github.com/hostgate/hostgate/internal/testenv"
)

// SetTimeout runs its one command as uid 0 in the container. That
// command must not get the container's environment, which holds the
// provision env: with LD_PRELOAD or LD_LIBRARY_PATH naming a file of the
// workspace, a dynamically linked /bin/sh (most images have one) loaded
// the sandbox's code as uid 0, which could then write the in-container
// deadline's extension that no sandbox process may write. LD_DEBUG_OUTPUT
// shows the loader's environment reaching a process without a library of
// the test's: the loader creates the file as the process's uid.
func TestSetTimeoutRootExecWithoutContainerEnv(t *testing.T) {
	cli, _ := engine(t)
	busybox, err := os.ReadFile("/bin/busybox")
	testenv.RequirePeer(t, "busybox-static at /bin/busybox", err == nil)
	// Debian's dash with glibc's loader: a dynamically linked /bin/sh.
	files := map[string]string{
		"bin/sh":                         "/bin/dash",
		"lib64/ld-linux-x86-64.so.2":     "/lib64/ld-linux-x86-64.so.2",
		"lib/x86_64-linux-gnu/libc.so.6": "/lib/x86_64-linux-gnu/libc.so.6",
	}
	data := map[string][]byte{"bin/busybox": busybox}
	for in, host := range files {
		b, err := os.ReadFile(host)
		testenv.RequirePeer(t, "a dynamically linked dash at "+host, err == nil)
		data[in] = b
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"bin/", "lib/", "lib/x86_64-linux-gnu/", "lib64/", "workspace/"} {
		_ = tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755})
	}
	for name, b := range data {
		_ = tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(b))})
		_, _ = tw.Write(b)
	}
	for _, l := range []string{"sleep", "tar", "find", "cat", "mkdir"} {
		_ = tw.WriteHeader(&tar.Header{Name: "bin/" + l, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777})
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	ref := "hostgate-test/dynamic-sh:" + uniqueOwner()
	rc, err := cli.ImageImport(testCtx(t, time.Minute), image.ImportSource{Source: &buf, SourceName: "-"}, ref, image.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = bytes.NewBuffer(nil).ReadFrom(rc)
	_ = rc.Close()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = cli.ImageRemove(ctx, ref, image.RemoveOptions{Force: true})
	})

	h := newTestHost(t, cli, &Config{AllowUnpinnedImages: true})
	req := emptyReq(ref, small())
	req.Env = map[string]string{"LD_DEBUG": "files", "LD_DEBUG_OUTPUT": "/dev/shm/lddebug"}
	ex := provision(t, h, req)
	if _, err := h.SetTimeout(testCtx(t, time.Minute), ex.ExecutionID, 10*small().RuntimeMs); err != nil {
		t.Fatal(err)
	}
	if res := sh(t, h, ex.ExecutionID, "cat "+deadlineDir+"/extra"); res.ExitCode != 0 || strings.TrimSpace(res.Stdout) == "" {
		t.Fatalf("the in-container deadline was not moved: %+v", res)
	}
	res := sh(t, h, ex.ExecutionID, "find /dev/shm -name 'lddebug*' -user 0")
	if res.ExitCode != 0 {
		t.Fatalf("find: %+v", res)
	}
	if res.Stdout != "" {
		t.Errorf("the provision env reached a process of uid 0; the loader wrote, as uid 0:\n%s", res.Stdout)
	}
}
