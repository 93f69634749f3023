package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"path"
	"testing"
	"testing/fstest"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/testenv"
)

// BenchmarkSandboxTransfer moves a tree of 200 files of 4 KiB (the root
// package's BenchmarkTransfer's) to and from a sandbox through the
// gateway: by tar (Upload and Download), by the filesystem way (NoTar: SFTP,
// 16 files at once), and by the loop an agent writes first, one SFTP
// Create, Write and Close after another. All run interleaved in one loop,
// so each sees the same machine. Reported: ms/op of each and the ratios
// the README and Upload's doc quote.
func BenchmarkSandboxTransfer(b *testing.B) {
	ctx, _, _, h := benchExecution(b)
	tree := fstest.MapFS{}
	for i := range 200 {
		name := fmt.Sprintf("d%c/f%d", 'a'+i%10, i)
		tree[name] = &fstest.MapFile{Data: bytes.Repeat([]byte{byte(i)}, 4096), Mode: 0o644}
	}
	p, err := h.FS(ctx)
	if err != nil {
		b.Fatal(err)
	}
	loop := func(dir string) error {
		return fs.WalkDir(tree, ".", func(name string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			to := path.Join(dir, name)
			if d.IsDir() {
				return p.Mkdir(ctx, to, 0o755, true)
			}
			w, err := p.Create(ctx, to, 0o644)
			if err != nil {
				return err
			}
			if _, err := w.Write(tree[name].Data); err != nil {
				return err
			}
			return w.Close()
		})
	}
	const base = "/workspace/bench"
	if err := hostgate.Upload(ctx, h, tree, base+"/src", nil); err != nil {
		b.Fatal(err)
	}
	// Downloads go to tmpfs where there is one: the local disk's time is
	// not the transfer's.
	local := func() string { return testenv.MemTempDir(b) }
	var upTar, upFS, upLoop, downTar, downFS time.Duration
	timed := func(d *time.Duration, what string, f func() error) {
		b.Helper()
		t0 := time.Now()
		if err := f(); err != nil {
			b.Fatalf("%s: %v", what, err)
		}
		*d += time.Since(t0)
	}
	noTar := &hostgate.TransferOptions{NoTar: true}
	b.ResetTimer()
	for i := range b.N {
		dir := fmt.Sprintf("%s/%d", base, i)
		timed(&upTar, "Upload", func() error { return hostgate.Upload(ctx, h, tree, dir+"/tar", nil) })
		timed(&upFS, "Upload NoTar", func() error { return hostgate.Upload(ctx, h, tree, dir+"/fs", noTar) })
		timed(&upLoop, "a loop of Creates", func() error { return loop(dir + "/loop") })
		timed(&downTar, "Download", func() error { return hostgate.Download(ctx, h, base+"/src", local(), nil) })
		timed(&downFS, "Download NoTar", func() error { return hostgate.Download(ctx, h, base+"/src", local(), noTar) })
		b.StopTimer()
		// The sandbox's disk is bounded: the round's copies go.
		if res, err := h.Exec(context.WithoutCancel(ctx), []string{"rm", "-rf", dir}, hostgate.ExecOptions{}); err != nil || res.ExitCode != 0 {
			b.Fatalf("rm -rf %s: %v %+v", dir, err, res)
		}
		b.StartTimer()
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
	b.ReportMetric(ms(upTar), "up-tar-ms/op")
	b.ReportMetric(ms(upFS), "up-fs-ms/op")
	b.ReportMetric(ms(upLoop), "up-loop-ms/op")
	b.ReportMetric(ms(downTar), "down-tar-ms/op")
	b.ReportMetric(ms(downFS), "down-fs-ms/op")
	b.ReportMetric(float64(upTar)/float64(upLoop), "tar/loop")
	b.ReportMetric(float64(upFS)/float64(upLoop), "fs/loop")
	b.ReportMetric(float64(downTar)/float64(downFS), "down-tar/fs")
}
