//go:build unix

package syncfs

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/localexec"
)

// TestSeekEndIsTheFileEndNow: Seek from the end goes to the end the file
// has when Seek is called, as lseek(2) and os.File's do: a log another
// writer grew since Open is read from its real end (tail -f's way), not
// from the size it had at Open. Over SFTP, whose open file outlives its
// name, a file removed since seeks from the end it was last seen with.
func TestSeekEndIsTheFileEndNow(t *testing.T) {
	for _, tc := range []struct {
		provider string
		fs       func(t *testing.T, root string) *FS
	}{
		{"exec", func(t *testing.T, root string) *FS {
			tr := &localexec.Transport{}
			fsys := New(&hostgate.SyncSpec{Connect: func(context.Context) (*hostgate.SyncConnection, error) {
				return &hostgate.SyncConnection{FS: hostgate.ExecProvider(tr)}, nil
			}}, &Options{Root: root})
			t.Cleanup(func() { _ = fsys.Close() })
			return fsys
		}},
		{"sftp", func(t *testing.T, root string) *FS { return open(t, newServer(t), root, 0) }},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			root := t.TempDir()
			name := filepath.Join(root, "log")
			if err := os.WriteFile(name, []byte("abc"), 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := tc.fs(t, root).Open("log")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			w, err := os.OpenFile(name, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, err = w.WriteString("defgh")
			if cerr := w.Close(); err != nil || cerr != nil {
				t.Fatal(err, cerr)
			}
			sk := f.(io.Seeker)
			if pos, err := sk.Seek(0, io.SeekEnd); err != nil || pos != 8 {
				t.Errorf("Seek(0, SeekEnd) = %d, %v; want 8, the size now", pos, err)
			}
			if pos, err := sk.Seek(-2, io.SeekEnd); err != nil || pos != 6 {
				t.Fatalf("Seek(-2, SeekEnd) = %d, %v; want 6", pos, err)
			}
			if b, err := io.ReadAll(f); err != nil || string(b) != "gh" {
				t.Errorf("read after Seek(-2, SeekEnd): %q %v; want \"gh\"", b, err)
			}
			if tc.provider != "sftp" {
				return
			}
			if err := os.Remove(name); err != nil {
				t.Fatal(err)
			}
			if pos, err := sk.Seek(-1, io.SeekEnd); err != nil || pos != 7 {
				t.Fatalf("Seek(-1, SeekEnd) of a removed file: %d, %v; want 7, from its size last seen", pos, err)
			}
			if b, err := io.ReadAll(f); err != nil || string(b) != "h" {
				t.Errorf("read of a removed file: %q %v", b, err)
			}
		})
	}
}
