//go:build unix

package syncfs

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/hostgate/hostgate"
)

// TestMkdirAllParentsGetPerm: MkdirAll gives the parents it makes perm
// (before umask), as its doc and os.MkdirAll say, and not only the last
// directory: a private tree made with 0o700 left every directory above
// its last world-readable (0o755 under umask 022), over SFTP and over the
// POSIX tools (mkdir -p -m sets the last directory's mode alone).
func TestMkdirAllParentsGetPerm(t *testing.T) {
	providers := map[string]*hostgate.SyncSpec{"sftp": agentSpec(t), "exec": execSpec()}
	for name, spec := range providers {
		t.Run(name, func(t *testing.T) {
			local, remote := t.TempDir(), t.TempDir()
			fsys := New(spec, &Options{Root: remote})
			defer fsys.Close()
			for _, perm := range []fs.FileMode{0o700, 0o750, 0o711} {
				top := "p" + perm.String()[1:]
				if err := os.MkdirAll(filepath.Join(local, top, "q", "r"), perm); err != nil {
					t.Fatal(err)
				}
				if err := fsys.MkdirAll(top+"/q/r", perm); err != nil {
					t.Fatal(err)
				}
				for _, d := range []string{top, top + "/q", top + "/q/r"} {
					want, err := os.Stat(filepath.Join(local, filepath.FromSlash(d)))
					if err != nil {
						t.Fatal(err)
					}
					got, err := fsys.Stat(d)
					if err != nil {
						t.Fatal(err)
					}
					if got.Mode() != want.Mode() {
						t.Errorf("MkdirAll(%q, %v): %s is %v; os.MkdirAll makes it %v", top+"/q/r", perm, d, got.Mode(), want.Mode())
					}
				}
			}
		})
	}
}
