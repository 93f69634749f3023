//go:build unix

package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hostgate/hostgate/internal/testenv"
)

// A backup root makes of a state dir that is another user's (the gateway's,
// under the README's unit) is that user's too, so that the gateway can
// start on it, or on the state dir it is copied back into. Before, all of
// it was root's, and the gateway refused it.
func TestBackupAsRootKeepsTheOwner(t *testing.T) {
	testenv.RequirePeer(t, "root (to back up another user's state dir)", os.Geteuid() == 0)
	ctx := testCtx(t)
	top, err := os.MkdirTemp("", "hostgate-backupowner-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(top) })
	if err := os.Chmod(top, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := copyExecutable(t, top)
	dir := filepath.Join(top, "state")
	if _, err := cli(t, ctx, "token", "create", "--state-dir", dir, "--role", "admin"); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "checkpoints"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "checkpoints", "c.tar"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, 65534, 65534)
	}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(top, "backup")
	if _, err := cli(t, ctx, "backup", "--state-dir", dir, "--out", out); err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := filepath.WalkDir(out, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if s := fi.Sys().(*syscall.Stat_t); s.Uid != 65534 || s.Gid != 65534 {
			t.Errorf("%s is %d:%d; want the state dir's 65534:65534", p, s.Uid, s.Gid)
		}
		n++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n < 4 {
		t.Errorf("the backup holds %d entries; want the dir, database, CA key and a checkpoint", n)
	}
	if msg, err := asNobody(t, ctx, bin, "token", "list", "--state-dir", out); err != nil || !strings.Contains(msg, "admin") {
		t.Errorf("token list as the state dir's user on its backup: %v\n%s", err, msg)
	}
}
