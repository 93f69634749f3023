package sftp

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// hostgate: change 33 (HOSTGATE.md). The calls that change a file by its
// name, and those sshlayer's provider looks with, have a ctx variant that
// does what the plain call does, and sends nothing once ctx has ended.
func TestHostgateCtxCalls(t *testing.T) {
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
	dir := t.TempDir()
	at := func(name string) string { return filepath.Join(dir, name) }
	if err := os.WriteFile(at("f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(at("d"), 0o755); err != nil {
		t.Fatal(err)
	}

	// With a ctx ended, each fails with its error, and the tree is as
	// it was: nothing was sent.
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	calls := map[string]func(ctx context.Context) error{
		"MkdirContext":           func(ctx context.Context) error { return c.MkdirContext(ctx, at("new")) },
		"RemoveContext":          func(ctx context.Context) error { return c.RemoveContext(ctx, at("f")) },
		"RemoveDirectoryContext": func(ctx context.Context) error { return c.RemoveDirectoryContext(ctx, at("d")) },
		"RenameContext":          func(ctx context.Context) error { return c.RenameContext(ctx, at("f"), at("g")) },
		"PosixRenameContext":     func(ctx context.Context) error { return c.PosixRenameContext(ctx, at("f"), at("g")) },
		"SymlinkContext":         func(ctx context.Context) error { return c.SymlinkContext(ctx, "f", at("l")) },
		"ChmodContext":           func(ctx context.Context) error { return c.ChmodContext(ctx, at("f"), 0o600) },
		"ReadLinkContext":        func(ctx context.Context) error { _, err := c.ReadLinkContext(ctx, at("f")); return err },
		"RealPathContext":        func(ctx context.Context) error { _, err := c.RealPathContext(ctx, at("f")); return err },
	}
	for name, call := range calls {
		if err := call(ended); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with its ctx ended: %v, want context.Canceled", name, err)
		}
	}
	if fi, err := os.Stat(at("f")); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("f after the calls with ctx ended: %v, %v; want it there, mode 0644", fi, err)
	}
	for _, n := range []string{"new", "g", "l"} {
		if _, err := os.Lstat(at(n)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after the calls with ctx ended: %v, want none", n, err)
		}
	}
	if _, err := os.Stat(at("d")); err != nil {
		t.Errorf("d after the calls with ctx ended: %v, want it there", err)
	}

	// With a live ctx, each does the plain call's work.
	ctx := context.Background()
	if err := c.MkdirContext(ctx, at("new")); err != nil {
		t.Errorf("MkdirContext: %v", err)
	}
	if err := c.ChmodContext(ctx, at("f"), 0o600); err != nil {
		t.Errorf("ChmodContext: %v", err)
	}
	if err := c.SymlinkContext(ctx, "f", at("l")); err != nil {
		t.Errorf("SymlinkContext: %v", err)
	}
	if s, err := c.ReadLinkContext(ctx, at("l")); err != nil || s != "f" {
		t.Errorf("ReadLinkContext: %q, %v; want f", s, err)
	}
	if s, err := c.RealPathContext(ctx, at("f")); err != nil || s != at("f") {
		t.Errorf("RealPathContext: %q, %v; want %s", s, err, at("f"))
	}
	if err := c.RenameContext(ctx, at("f"), at("g")); err != nil {
		t.Errorf("RenameContext: %v", err)
	}
	if err := c.PosixRenameContext(ctx, at("g"), at("h")); err != nil {
		t.Errorf("PosixRenameContext: %v", err)
	}
	if err := c.RemoveContext(ctx, at("h")); err != nil {
		t.Errorf("RemoveContext of a file: %v", err)
	}
	if err := c.RemoveContext(ctx, at("new")); err != nil {
		t.Errorf("RemoveContext of a directory: %v", err)
	}
	if err := c.RemoveDirectoryContext(ctx, at("d")); err != nil {
		t.Errorf("RemoveDirectoryContext: %v", err)
	}
	if err := c.RemoveContext(ctx, at("h")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("RemoveContext of a name not there: %v, want fs.ErrNotExist", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != "l" {
		t.Errorf("left in the tree: %v, want only l", ents)
	}
}
