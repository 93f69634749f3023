//go:build unix

package hostgate_test

import (
	"archive/tar"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/hostgate/hostgate"
)

// TestDownloadLinksStayInside: no link a hostile host's archive makes
// leads out of the destination once the links it goes through are
// followed, as the kernel follows them: a link made through another
// link, or whose ".." climbs out of a link, is checked where it lands,
// not where its name says.
func TestDownloadLinksStayInside(t *testing.T) {
	dir, sym := byte(tar.TypeDir), byte(tar.TypeSymlink)
	for _, c := range []struct {
		what    string
		entries []entry
	}{
		// b is dst itself, so b/x is dst/x, and its ".." dst's parent.
		{what: "through a link", entries: []entry{{name: "b", link: ".", typ: sym}, {name: "b/x", link: "..", typ: sym}}},
		// b/c becomes a link to dst after a is made: a's b/c/.. is then
		// dst's parent.
		// h is a hard link to the link a/l, so another link to ../y,
		// from dst.
		{what: "hard link to a link", entries: []entry{{name: "a/l", link: "../y", typ: sym}, {name: "h", link: "a/l", typ: byte(tar.TypeLink)}}},
		{what: "dot-dot after a link", entries: []entry{{name: "b/c/", typ: dir}, {name: "a", link: "b/c/..", typ: sym}, {name: "b/c", link: "..", typ: sym}}},
	} {
		t.Run(c.what, func(t *testing.T) {
			top := t.TempDir()
			dst := filepath.Join(top, "dst")
			if err := os.Mkdir(dst, 0o755); err != nil {
				t.Fatal(err)
			}
			tr := archiveTransport{archiveOf(t, c.entries...)}
			h := hostgate.New(hostgate.Info{}, func(context.Context) (*hostgate.Connection, error) {
				return &hostgate.Connection{Transport: tr, FS: memProvider{}, Close: func() error { return nil }}, nil
			})
			defer h.Close()
			err := hostgate.Download(context.Background(), h, "x", dst, nil)
			if err == nil {
				t.Errorf("Download of %v: no error", c.entries)
			}
			real, err := filepath.EvalSymlinks(dst)
			if err != nil {
				t.Fatal(err)
			}
			_ = filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.Type()&fs.ModeSymlink == 0 {
					return err
				}
				target, _ := os.Readlink(p)
				dir, err := filepath.EvalSymlinks(filepath.Dir(p))
				if err != nil {
					t.Fatal(err)
				}
				// Where it leads by one step (dangling or not), then
				// by all.
				for _, to := range []string{filepath.Join(dir, target), func() string { to, _ := filepath.EvalSymlinks(p); return to }()} {
					if rel, err := filepath.Rel(real, to); to != "" && (err != nil || !filepath.IsLocal(rel) && rel != ".") {
						t.Errorf("%s -> %s leads out of the destination, to %s", p, target, to)
					}
				}
				return nil
			})
		})
	}
}
