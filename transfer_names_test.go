//go:build unix

package hostgate_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
)

// TestDownloadNonUTF8Names: a tree whose names are not UTF-8 (a Latin-1
// "café", as older systems write it) comes down whole, by tar and by the
// filesystem way: Linux names are bytes, and such a name is relative and
// without ".." like any other; it was refused as not one.
func TestDownloadNonUTF8Names(t *testing.T) {
	src := t.TempDir()
	name := "caf\xe9"
	if err := os.MkdirAll(filepath.Join(src, name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, name, name), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	h, _ := localHost(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, noTar := range []bool{false, true} {
		dst := filepath.Join(t.TempDir(), "down")
		if err := hostgate.Download(ctx, h, src, dst, &hostgate.TransferOptions{NoTar: noTar}); err != nil {
			t.Errorf("Download (NoTar %v): %v", noTar, err)
			continue
		}
		if b, err := os.ReadFile(filepath.Join(dst, name, name)); string(b) != "x" {
			t.Errorf("Download (NoTar %v): %q, %v", noTar, b, err)
		}
	}
}
