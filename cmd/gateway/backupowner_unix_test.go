//go:build unix

package main

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
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
	bin, dir := otherUsersStateDir(t, ctx, "hostgate-backupowner-")
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
	out := filepath.Join(filepath.Dir(dir), "backup")
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

// backup says how to restore it, and the command it gives works: the
// backup moved into the state dir's place whole (copied over the old
// files, the database would meet their -wal), and, when sandboxes ran,
// that a gateway started on the backup's own path does not adopt them
// (Docker knows a gateway's executions by an owner named after its state
// dir's path). Before, it said "start it with --state-dir DEST (or copy it
// back)", and a gateway restored so recorded the live sandboxes as ended
// while they ran on.
func TestBackupSaysHowToRestore(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "state")
	if _, err := cli(t, ctx, "token", "create", "--state-dir", dir, "--role", "admin"); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "b1")
	msg, err := cli(t, ctx, "backup", "--state-dir", dir, "--out", out)
	if err != nil {
		t.Fatal(err)
	}
	restore := fmt.Sprintf("mv %s %s.old && cp -a %s %s", dir, dir, out, dir)
	if !strings.Contains(msg, "("+restore+")") || !strings.Contains(msg, "(or start it with --state-dir "+out+")") || strings.Contains(msg, "sandboxes") {
		t.Errorf("backup of a state dir without sandboxes said %q; want the restore %q and --state-dir %s", msg, restore, out)
	}
	if b, err := exec.Command("sh", "-c", restore).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", restore, err, b)
	}
	if list, err := cli(t, ctx, "token", "list", "--state-dir", dir); err != nil || !strings.Contains(list, "admin") {
		t.Errorf("token list after the restore: %v\n%s", err, list)
	}

	if err := os.MkdirAll(filepath.Join(dir, "execution-keys"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "execution-keys", "e1.key"), []byte("sandbox key"), 0o600); err != nil {
		t.Fatal(err)
	}
	out2 := filepath.Join(t.TempDir(), "b2")
	msg, err = cli(t, ctx, "backup", "--state-dir", dir, "--out", out2)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"only there does it adopt the sandbox that ran", "--state-dir " + out2 + " is Docker executions owner " + owner(out2) + ", not " + owner(dir)} {
		if !strings.Contains(msg, want) {
			t.Errorf("backup of a state dir with a sandbox said %q; want %q", msg, want)
		}
	}
	if strings.Contains(msg, "(or start it with") {
		t.Errorf("backup of a state dir with a sandbox offers --state-dir as the same restore: %q", msg)
	}
}
