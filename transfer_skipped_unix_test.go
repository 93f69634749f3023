//go:build unix

package hostgate_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hostgate/hostgate"
)

// TestDownloadCountsSkippedEntries: the entries Download skips (devices,
// pipes, kinds it does not know) count against MaxFiles, and a skipped
// tar entry's data against MaxBytes: a host could send them without end
// before, none counted.
func TestDownloadCountsSkippedEntries(t *testing.T) {
	archive := func(entries int, size int64) []byte {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for i := range entries {
			hdr := &tar.Header{Name: fmt.Sprintf("dev%d", i), Typeflag: 'Z', Mode: 0o644, Size: size}
			if err := tw.WriteHeader(hdr); err != nil {
				t.Fatal(err)
			}
			if _, err := tw.Write(make([]byte, size)); err != nil {
				t.Fatal(err)
			}
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	for _, c := range []struct {
		what    string
		archive []byte
		opts    hostgate.TransferOptions
	}{
		{"entries", archive(10, 0), hostgate.TransferOptions{MaxFiles: 3}},
		{"data", archive(1, 1<<20), hostgate.TransferOptions{MaxBytes: 1000}},
	} {
		t.Run("tar "+c.what, func(t *testing.T) {
			tr := archiveTransport{c.archive}
			h := hostgate.New(hostgate.Info{}, func(context.Context) (*hostgate.Connection, error) {
				return &hostgate.Connection{Transport: tr, FS: memProvider{}, Close: func() error { return nil }}, nil
			})
			defer h.Close()
			err := hostgate.Download(context.Background(), h, "x", t.TempDir(), &c.opts)
			if !errors.Is(err, hostgate.ErrTransferLimit) {
				t.Errorf("Download of skipped entries over %+v: %v, want ErrTransferLimit", c.opts, err)
			}
		})
	}
	t.Run("filesystem", func(t *testing.T) {
		h, _ := localHost(t, false)
		remote := t.TempDir()
		for i := range 5 {
			if err := syscall.Mkfifo(filepath.Join(remote, fmt.Sprintf("fifo%d", i)), 0o644); err != nil {
				t.Fatalf("mkfifo: %v", err) // a temp dir takes one on any Unix
			}
		}
		for _, noTar := range []bool{false, true} {
			opts := &hostgate.TransferOptions{MaxFiles: 3, NoTar: noTar}
			err := hostgate.Download(context.Background(), h, remote, filepath.Join(t.TempDir(), "down"), opts)
			if !errors.Is(err, hostgate.ErrTransferLimit) {
				t.Errorf("Download (NoTar %v) of 5 pipes with MaxFiles 3: %v, want ErrTransferLimit", noTar, err)
			}
		}
	})
}
