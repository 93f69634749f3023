//go:build unix

package hostgate_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
	"time"

	"github.com/hostgate/hostgate"
)

// TestUploadReplacesLinks: a symbolic link on the host at a name where
// the tree has a file or a directory is replaced by it, by the tar way
// and the filesystem way alike, and what the link led to is left alone.
// The filesystem way wrote the file through the link and made the
// directory's files in the one it led to, out of the destination (or
// over another file of the tree, where a link of the last Upload has
// become a file since), while the host's tar replaced both.
func TestUploadReplacesLinks(t *testing.T) {
	h, _ := localHost(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tree := fstest.MapFS{
		"f":   {Data: []byte("tree's f"), Mode: 0o644},
		"s/g": {Data: []byte("tree's g"), Mode: 0o644},
	}
	for _, noTar := range []bool{false, true} {
		top := t.TempDir()
		dir, outside := filepath.Join(top, "dir"), filepath.Join(top, "outside")
		for _, d := range []string{dir, outside} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(outside, "keep"), []byte("outside's"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("../outside/keep", filepath.Join(dir, "f")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("../outside", filepath.Join(dir, "s")); err != nil {
			t.Fatal(err)
		}
		if err := hostgate.Upload(ctx, h, tree, dir, &hostgate.TransferOptions{NoTar: noTar}); err != nil {
			t.Fatalf("NoTar %v: %v", noTar, err)
		}
		if b, err := os.ReadFile(filepath.Join(outside, "keep")); string(b) != "outside's" {
			t.Errorf("NoTar %v: the file a link at f led to holds %q (%v), want it left alone", noTar, b, err)
		}
		if _, err := os.Lstat(filepath.Join(outside, "g")); err == nil {
			t.Errorf("NoTar %v: s/g was made in the directory the link at s led to", noTar)
		}
		for name, want := range map[string]string{"f": "tree's f", "s/g": "tree's g"} {
			p := filepath.Join(dir, name)
			fi, err := os.Lstat(p)
			if err != nil || !fi.Mode().IsRegular() {
				t.Errorf("NoTar %v: %s is %v (%v), want the tree's file", noTar, name, modeOf(fi), err)
				continue
			}
			if b, _ := os.ReadFile(p); string(b) != want {
				t.Errorf("NoTar %v: %s holds %q, want %q", noTar, name, b, want)
			}
		}
		if fi, err := os.Lstat(filepath.Join(dir, "s")); err != nil || !fi.IsDir() {
			t.Errorf("NoTar %v: s is %v (%v), want a directory", noTar, modeOf(fi), err)
		}
	}
}

// modeOf is fi's mode, or nothing for no fi.
func modeOf(fi os.FileInfo) any {
	if fi == nil {
		return nil
	}
	return fi.Mode()
}
