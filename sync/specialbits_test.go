//go:build unix

package syncfs

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/hostgate/hostgate"
)

// TestSpecialModeBits: WriteFile's and MkdirAll's perm keeps its setuid,
// setgid and sticky bits (fs.ModeSetuid, …) as os.WriteFile and
// os.MkdirAll give them: over SFTP a new file was made without them (a
// setuid helper a tool installs, a shared drop directory made sticky),
// where over the POSIX tools it had them.
func TestSpecialModeBits(t *testing.T) {
	providers := map[string]*hostgate.SyncSpec{"sftp": agentSpec(t), "exec": execSpec()}
	for name, spec := range providers {
		t.Run(name, func(t *testing.T) {
			local, remote := t.TempDir(), t.TempDir()
			fsys := New(spec, &Options{Root: remote})
			defer fsys.Close()
			check := func(n string) {
				t.Helper()
				want, err := os.Stat(filepath.Join(local, n))
				if err != nil {
					t.Fatal(err)
				}
				got, err := fsys.Stat(n)
				if err != nil {
					t.Fatal(err)
				}
				if got.Mode() != want.Mode() {
					t.Errorf("%s is %v; os makes it %v", n, got.Mode(), want.Mode())
				}
			}
			for i, perm := range []fs.FileMode{fs.ModeSetuid | 0o755, fs.ModeSetgid | 0o750, fs.ModeSticky | 0o644} {
				n := "f" + string(rune('0'+i))
				if err := os.WriteFile(filepath.Join(local, n), []byte("x"), perm); err != nil {
					t.Fatal(err)
				}
				if err := fsys.WriteFile(n, []byte("x"), perm); err != nil {
					t.Fatal(err)
				}
				check(n)
			}
			if err := os.MkdirAll(filepath.Join(local, "drop"), fs.ModeSticky|0o777); err != nil {
				t.Fatal(err)
			}
			if err := fsys.MkdirAll("drop", fs.ModeSticky|0o777); err != nil {
				t.Fatal(err)
			}
			check("drop")
			// A directory made under a setgid one takes its setgid (and
			// keeps it through the chmod its perm needs).
			for _, root := range []string{local, remote} {
				sg := filepath.Join(root, "shared")
				if err := os.Mkdir(sg, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(sg, fs.ModeSetgid|0o775); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.MkdirAll(filepath.Join(local, "shared", "team"), 0o750); err != nil {
				t.Fatal(err)
			}
			if err := fsys.MkdirAll("shared/team", 0o750); err != nil {
				t.Fatal(err)
			}
			check("shared/team")
		})
	}
}
