//go:build linux

package sshlayer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/testenv"
)

// TestSFTPProviderFullDiskOverOpenSSH: a write past the room on a real
// disk (a tmpfs of 1 MiB, as a sandbox's /workspace is one of its
// diskBytes) is errors.Is(err, syscall.ENOSPC) through OpenSSH's
// sftp-server too, which answers it a bare Failure: through a stream's
// copy and Close, and through WriteFile.
func TestSFTPProviderFullDiskOverOpenSSH(t *testing.T) {
	disk := t.TempDir()
	err := syscall.Mount("tmpfs", disk, "tmpfs", 0, "size=1m")
	testenv.RequirePeer(t, "a tmpfs mount (root, or a namespace allowing it)", err == nil)
	t.Cleanup(func() {
		if err := syscall.Unmount(disk, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", disk, err)
		}
	})
	p := NewSFTPProvider(startSFTPServer(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	data := bytes.Repeat([]byte("x"), 3<<20)

	w, err := p.Create(ctx, filepath.Join(disk, "copied"), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	_, cerr := io.Copy(w, bytes.NewReader(data))
	if err := w.Close(); cerr == nil {
		cerr = err
	}
	if !errors.Is(cerr, syscall.ENOSPC) {
		t.Errorf("io.Copy of 3 MiB onto a disk of 1 MiB: %v; want ENOSPC", cerr)
	}
	if err := p.Remove(ctx, filepath.Join(disk, "copied"), false); err != nil {
		t.Fatal(err)
	}

	err = p.(hostgate.FileWriter).WriteFile(ctx, filepath.Join(disk, "whole"), 0o644, bytes.NewReader(data), nil)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("WriteFile of 3 MiB onto a disk of 1 MiB: %v; want ENOSPC", err)
	}
}
