//go:build unix

package syncfs

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/localexec"
)

// TestCommandFailureKeepsTheConnection: over ExecProvider, a command that
// ran on the host and failed in words the provider does not map to an
// errno (mv refusing to move a directory into itself; a file being
// executed, full quotas, …) is that call's answer, as an errno is. It was
// taken for a broken connection: the call said "syncfs: connection
// broken", the connection was given up, a file open on it failed from
// then on, and the next call connected again.
func TestCommandFailureKeepsTheConnection(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "d", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "f"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	var connects atomic.Int32
	fsys := New(&hostgate.SyncSpec{Name: "h", Connect: func(context.Context) (*hostgate.SyncConnection, error) {
		connects.Add(1)
		return &hostgate.SyncConnection{FS: hostgate.ExecProvider(&localexec.Transport{})}, nil
	}}, &Options{Root: root})
	defer fsys.Close()

	f, err := fsys.Open("f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = fsys.Rename("d", "d/sub/d")
	if err == nil || strings.Contains(err.Error(), "connection broken") || !strings.HasPrefix(err.Error(), "host h: rename d d/sub/d: ") {
		t.Errorf("Rename of a directory into itself: %v; want the host's refusal, not a broken connection", err)
	}
	if b, err := io.ReadAll(f); err != nil || string(b) != "kept" {
		t.Errorf("a file open before: %q, %v; want it read whole", b, err)
	}
	if _, err := fsys.Stat("f"); err != nil {
		t.Errorf("the next Stat: %v", err)
	}
	if n := connects.Load(); n != 1 {
		t.Errorf("%d connects; want 1, the connection kept", n)
	}
}
