//go:build unix

package syncfs

import (
	"errors"
	"syscall"
	"testing"

	"github.com/hostgate/hostgate"
)

// TestReadLinkOfNoLinkIsEINVAL: ReadLink of a name that is no symbolic
// link fails with EINVAL, as os.Readlink and readlink(2) do and as code
// telling links from the rest tests for; over SFTP it matched nothing (the
// agent's server says it in a Failure's words, OpenSSH's a bare Failure).
// Renaming a directory into itself is EINVAL too, as os.Rename says.
func TestReadLinkOfNoLinkIsEINVAL(t *testing.T) {
	root, _ := tree(t)
	specs := map[string]*hostgate.SyncSpec{"agent": agentSpec(t), "openssh": newServer(t).spec()}
	for name, spec := range specs {
		t.Run(name, func(t *testing.T) {
			fsys := New(spec, &Options{Root: root})
			defer fsys.Close()
			for _, n := range []string{"hello.txt", "dir"} {
				if _, err := fsys.ReadLink(n); !errors.Is(err, syscall.EINVAL) {
					t.Errorf("ReadLink of %s: %v; want EINVAL", n, err)
				}
			}
			if _, err := fsys.ReadLink("link"); err != nil {
				t.Errorf("ReadLink of a link: %v", err)
			}
			if name == "agent" {
				if err := fsys.Rename("dir", "dir/sub/dir"); !errors.Is(err, syscall.EINVAL) {
					t.Errorf("Rename of a directory into itself: %v; want EINVAL", err)
				}
			}
		})
	}
}
