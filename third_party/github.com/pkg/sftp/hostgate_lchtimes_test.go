//go:build linux || darwin

package sftp

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// hostgate: change 34 (HOSTGATE.md). LchtimesContext sets a symbolic
// link's own times through the package's server, which offers
// lsetstat@openssh.com, and leaves its target's as they were.
func TestHostgateLchtimesContext(t *testing.T) {
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	srv, err := NewServer(struct {
		io.Reader
		io.WriteCloser
	}{sr, sw})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	c, err := NewClientPipe(cr, cw)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cw.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		_ = sw.Close()
		_ = c.Close()
	}()
	if _, ok := c.HasExtension("lsetstat@openssh.com"); !ok {
		t.Fatal("the server does not offer lsetstat@openssh.com")
	}
	dir := t.TempDir()
	name, link := filepath.Join(dir, "file"), filepath.Join(dir, "link")
	if err := os.WriteFile(name, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("file", link); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	atime, mtime := time.Unix(1_000_000_000, 0), time.Unix(1_500_000_000, 0)
	if err := c.LchtimesContext(context.Background(), link, atime, mtime); err != nil {
		t.Fatalf("LchtimesContext: %v", err)
	}
	if fi, err := os.Lstat(link); err != nil || !fi.ModTime().Equal(mtime) {
		t.Errorf("the link's mtime after LchtimesContext: %v (%v), want %v", fi.ModTime(), err, mtime)
	}
	if fi, err := os.Stat(name); err != nil || !fi.ModTime().Equal(before.ModTime()) {
		t.Errorf("the link's target's mtime moved to %v (%v) from %v", fi.ModTime(), err, before.ModTime())
	}
	if err := c.LchtimesContext(context.Background(), filepath.Join(dir, "none"), atime, mtime); !os.IsNotExist(err) {
		t.Errorf("LchtimesContext of a missing name: %v, want not exist", err)
	}
}
