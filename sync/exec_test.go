//go:build unix

package syncfs

import (
	"context"
	"testing"
	"testing/fstest"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/localexec"
)

// TestFSConformanceExecProvider runs fstest over the POSIX-tools provider:
// every call is a process (stat, ls, cat…) in other processes, and its
// files cannot seek, so Seek reopens.
func TestFSConformanceExecProvider(t *testing.T) {
	root, files := tree(t)
	tr := &localexec.Transport{}
	var connects int
	spec := &hostgate.SyncSpec{Connect: func(context.Context) (*hostgate.SyncConnection, error) {
		connects++ // one session: the test provokes no timeout
		return &hostgate.SyncConnection{FS: hostgate.ExecProvider(tr)}, nil
	}}
	fsys := New(spec, &Options{Root: root})
	defer fsys.Close()
	if err := fstest.TestFS(fsys, files...); err != nil {
		t.Fatal(err)
	}
	if connects != 1 {
		t.Fatalf("connects = %d", connects)
	}
}
