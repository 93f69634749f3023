//go:build unix

package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/testenv"
)

// asNobody runs this test binary as the gateway, as uid and gid 65534, from
// a copy nobody may execute (go test's own directory is its builder's
// alone), and returns its combined output.
func asNobody(t *testing.T, ctx context.Context, bin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "HOSTGATE_TEST_BE_GATEWAY=1", "HOME=/nonexistent")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// copyExecutable copies this test binary into dir, executable by all.
func copyExecutable(t *testing.T, dir string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	bin := filepath.Join(dir, "gateway")
	out, err := os.OpenFile(bin, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return bin
}

// A state dir the gateway's user cannot read and write (a backup made as
// root, restored for a gateway that runs as its own user, as the README's
// unit does) is refused by serve and the admin commands with the file, its
// owner, the user and the chown that fixes it. Before, serve said "state
// dir lock: open …: permission denied" and the commands SQLite's "unable
// to open database file (14)".
func TestStateDirOfAnotherUser(t *testing.T) {
	testenv.RequirePeer(t, "root (to run the gateway as another user)", os.Geteuid() == 0)
	ctx := testCtx(t)
	bin, dir := otherUsersStateDir(t, ctx, "hostgate-stateaccess-")
	nobody := "65534"
	if u, err := user.LookupId("65534"); err == nil {
		nobody = u.Username
	}
	check := func(what, denied string, args ...string) {
		t.Helper()
		out, err := asNobody(t, ctx, bin, args...)
		if err == nil {
			t.Fatalf("%s as nobody: no error\n%s", what, out)
		}
		for _, want := range []string{denied + " belongs to root (uid 0)", "runs as " + nobody + " (uid 65534)", "chown -R " + nobody + ": " + dir} {
			if !strings.Contains(out, want) {
				t.Errorf("%s as nobody: %q lacks %q", what, strings.TrimSpace(out), want)
			}
		}
	}
	// The dir itself root's: a backup made as root.
	check("serve", dir, "serve", "--listen", "127.0.0.1:0", "--state-dir", dir, "--docker", "off")
	check("token list", dir, "token", "list", "--state-dir", dir)
	// The dir given over, but not what is in it: a chown without -R.
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	check("serve", filepath.Join(dir, caKeyFile), "serve", "--listen", "127.0.0.1:0", "--state-dir", dir, "--docker", "off")
	check("token list", filepath.Join(dir, caKeyFile), "token", "list", "--state-dir", dir)
	// Given over whole: the commands work.
	if err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, 65534, 65534)
	}); err != nil {
		t.Fatal(err)
	}
	if out, err := asNobody(t, ctx, bin, "token", "list", "--state-dir", dir); err != nil || !strings.Contains(out, "admin") {
		t.Errorf("token list as nobody on its own state dir: %v\n%s", err, out)
	}
	// Its own but read-only: not an owner's problem, and chown is no fix;
	// the store says what is (its open's writes, the tombstone trim's
	// included, which said SQLite's "attempt to write a readonly database
	// (8)" alone).
	if err := os.Chmod(filepath.Join(dir, dbFile), 0o400); err != nil {
		t.Fatal(err)
	}
	if out, err := asNobody(t, ctx, bin, "serve", "--listen", "127.0.0.1:0", "--state-dir", dir, "--docker", "off"); err == nil || strings.Contains(out, "chown") || !strings.Contains(out, "store: cannot open "+filepath.Join(dir, dbFile)+": it, its -wal or -shm file or its filesystem is read-only; make them writable by the gateway's user") {
		t.Errorf("serve as nobody on its own read-only database: %v\n%s", err, out)
	}
}

// otherUsersStateDir makes a state dir (with an admin token) under a new
// directory of /tmp that another user can traverse, with a copy of this
// test binary there that such a user may run: the binary and the dir.
func otherUsersStateDir(t *testing.T, ctx context.Context, prefix string) (bin, dir string) {
	t.Helper()
	top, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(top) })
	if err := os.Chmod(top, 0o755); err != nil {
		t.Fatal(err)
	}
	bin = copyExecutable(t, top)
	dir = filepath.Join(top, "state")
	if _, err := cli(t, ctx, "token", "create", "--state-dir", dir, "--role", "admin"); err != nil {
		t.Fatal(err)
	}
	return bin, dir
}

// A backup run as a user who cannot read the state dir (an operator's own
// account against the gateway's 0700 dir) says whose it is and who runs:
// it said "no gateway state in DIR (… permission denied): is --state-dir
// (or HOSTGATE_STATE_DIR) the gateway's?", sending the operator after a
// path that was right.
func TestBackupOfAnotherUsersStateDir(t *testing.T) {
	testenv.RequirePeer(t, "root (to run the gateway as another user)", os.Geteuid() == 0)
	ctx := testCtx(t)
	bin, dir := otherUsersStateDir(t, ctx, "hostgate-backupaccess-")
	outDir := filepath.Join(filepath.Dir(dir), "out")
	if err := os.Mkdir(outDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(outDir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	out, err := asNobody(t, ctx, bin, "backup", "--state-dir", dir, "--out", filepath.Join(outDir, "b"))
	if err == nil {
		t.Fatalf("backup as nobody of root's state dir: no error\n%s", out)
	}
	if strings.Contains(out, "is --state-dir") || !strings.Contains(out, dir+" belongs to root (uid 0)") || !strings.Contains(out, "(uid 65534)") {
		t.Errorf("backup as nobody of root's state dir: %q; want whose it is and who runs", strings.TrimSpace(out))
	}
}
