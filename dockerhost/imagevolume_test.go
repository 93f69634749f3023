package dockerhost

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"

	"github.com/hostgate/hostgate/internal/testenv"
)

// An image's VOLUME gets an anonymous volume at create, a directory on the
// engine's disk that the read-only root does not cover and diskBytes does
// not bound: with VOLUME /tmp (mode 1777, as Java images often declare
// it), sandbox code wrote 50 MiB there with a workspace of 1 MiB, and could
// fill the engine's disk. Fresh and warm containers alike have each
// VOLUME read-only, as the rest of the image is.
func TestImageVolumeReadOnly(t *testing.T) {
	cli, _ := engine(t)
	busybox, err := os.ReadFile("/bin/busybox")
	testenv.RequirePeer(t, "busybox-static at /bin/busybox", err == nil)
	ref := importVolumeImage(t, cli, busybox)
	req := emptyReq(ref, small())
	for name, cfg := range map[string]*Config{
		"fresh":  {AllowUnpinnedImages: true},
		"pooled": {AllowUnpinnedImages: true, Pool: &PoolConfig{Size: 1, Keys: []ProvisionRequest{req}}},
	} {
		t.Run(name, func(t *testing.T) {
			h := newTestHost(t, cli, cfg)
			if h.pool != nil {
				waitPool(t, h, "a warm container", func(s PoolStats) bool { return s.Ready == 1 })
			}
			ex := provision(t, h, req)
			if h.pool != nil {
				if s := h.PoolStats(); s.Hits != 1 {
					t.Fatalf("want a pool hit, stats %+v", s)
				}
			}
			res := sh(t, h, ex.ExecutionID, "head -c 65536 /dev/zero > /tmp/f && echo written")
			if res.ExitCode == 0 || res.Stdout != "" {
				t.Errorf("a file was written in the image's VOLUME /tmp: %+v", res)
			}
			ins, err := cli.ContainerInspect(testCtx(t, time.Minute), ex.ContainerID)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range ins.Mounts {
				if m.Type == mount.TypeVolume && m.Destination == "/tmp" {
					t.Errorf("the image's VOLUME is a volume on the engine's disk: %+v", m)
				}
			}
		})
	}
}

// importVolumeImage imports busybox as sh, sleep, tar and head, with
// VOLUME /tmp, a directory anyone may write in.
func importVolumeImage(t *testing.T, cli *client.Client, busybox []byte) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755})
	_ = tw.WriteHeader(&tar.Header{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777})
	_ = tw.WriteHeader(&tar.Header{Name: "workspace/", Typeflag: tar.TypeDir, Mode: 0o755})
	_ = tw.WriteHeader(&tar.Header{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(busybox))})
	_, _ = tw.Write(busybox)
	for _, l := range []string{"sh", "sleep", "tar", "head"} {
		_ = tw.WriteHeader(&tar.Header{Name: "bin/" + l, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777})
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	ref := "hostgate-test/volume-tmp:" + uniqueOwner()
	rc, err := cli.ImageImport(testCtx(t, time.Minute), image.ImportSource{Source: &buf, SourceName: "-"}, ref, image.ImportOptions{Changes: []string{"VOLUME /tmp"}})
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
	return ref
}
