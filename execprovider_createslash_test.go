//go:build unix

package hostgate_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/localexec"
)

// TestExecProviderCreateWithTrailingSlash: Create of a name ending in a
// slash fails as open(2) with O_CREAT does (os.Create, the SFTP
// provider's server): EISDIR where the directory it is in exists, whatever
// is at the name, and the parent's errno where it does not; nothing is
// created or truncated. The script took "new" for the parent of "new/" and
// said ENOENT.
func TestExecProviderCreateWithTrailingSlash(t *testing.T) {
	transports := map[string]hostgate.Transport{"sh": &localexec.Transport{}}
	if bb, err := exec.LookPath("busybox"); err == nil {
		dir := t.TempDir()
		for _, tool := range []string{"sh", "cat", "chmod", "test"} {
			if err := os.Symlink(bb, dir+"/"+tool); err != nil {
				t.Fatal(err)
			}
		}
		transports["busybox"] = pathTransport{base: &localexec.Transport{}, dir: dir}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for tname, tr := range transports {
		p := hostgate.ExecProvider(tr)
		root := t.TempDir()
		if err := os.WriteFile(filepath.Join(root, "f"), []byte("keep"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("nowhere", filepath.Join(root, "dang")); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"new/", "new//", "f/", "dang/", "nodir/new/", "f/x/"} {
			full := root + "/" + name
			var want syscall.Errno
			if fd, err := syscall.Open(full, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_TRUNC, 0o644); err == nil {
				syscall.Close(fd)
				t.Fatalf("the kernel created %s", name)
			} else if !errors.As(err, &want) {
				t.Fatal(err)
			}
			w, err := p.Create(ctx, full, 0o644)
			if err == nil {
				err = w.Close()
			}
			if !errors.Is(err, want) && !(want == syscall.ENOENT && errors.Is(err, fs.ErrNotExist)) {
				t.Errorf("%s: Create(%q) = %v; want %v (%d) as open(2) says", tname, name, err, want, int(want))
			}
		}
		if b, err := os.ReadFile(filepath.Join(root, "f")); err != nil || string(b) != "keep" {
			t.Errorf("%s: f after Create(\"f/\"): %q %v", tname, b, err)
		}
		for _, name := range []string{"new", "nowhere", "nodir"} {
			if _, err := os.Lstat(filepath.Join(root, name)); err == nil {
				t.Errorf("%s: %s created", tname, name)
			}
		}
	}
}
