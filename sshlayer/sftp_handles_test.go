//go:build unix

package sshlayer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hostgate/hostgate/third_party/github.com/pkg/sftp"
)

// TestSFTPOpenHandlesBounded: a client that opens without closing gets a
// Failure naming the bound at sftp.MaxOpenHandles, the file it asked to
// truncate untouched, and its session goes on: a close makes room again.
// Without the bound every open succeeded until the agent's process ran out
// of file descriptors.
func TestSFTPOpenHandlesBounded(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"f", "keep"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("kept"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ts := srvStartServer(t, &ServerConfig{Dir: dir})
	c := srvDialServer(t, ts)
	sc, err := sftp.NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sc.Close() }()

	var open []*sftp.File
	defer func() {
		for _, f := range open {
			_ = f.Close()
		}
	}()
	for len(open) < sftp.MaxOpenHandles {
		f, err := sc.Open("f")
		if err != nil {
			t.Fatalf("open %d of %d: %v", len(open)+1, sftp.MaxOpenHandles, err)
		}
		open = append(open, f)
	}

	f, err := sc.OpenFile("keep", os.O_WRONLY|os.O_TRUNC)
	if err == nil {
		open = append(open, f)
		t.Fatalf("open past %d handles succeeded", sftp.MaxOpenHandles)
	}
	var se *sftp.StatusError
	if !errors.As(err, &se) || se.FxCode() != sftp.ErrSSHFxFailure || !strings.Contains(err.Error(), fmt.Sprint(sftp.MaxOpenHandles)) {
		t.Fatalf("open past the bound: %v; want a Failure naming %d", err, sftp.MaxOpenHandles)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "keep")); err != nil || string(b) != "kept" {
		t.Fatalf("the refused open's file holds %q, %v; want it untouched", b, err)
	}

	// The session is still there, and a closed handle's room is free again.
	if _, err := sc.Stat("keep"); err != nil {
		t.Fatalf("stat after the refusal: %v", err)
	}
	if err := open[0].Close(); err != nil {
		t.Fatal(err)
	}
	f, err = sc.Open("keep")
	if err != nil {
		t.Fatalf("open after a close: %v", err)
	}
	open[0] = f
}
