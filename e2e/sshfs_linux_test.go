package e2e

import (
	"bytes"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/testenv"
)

// TestSSHFSThroughGateway mounts a host's directory with sshfs over ssh
// through `gateway proxy`, as users mount a remote workspace: sshfs leans
// on the SFTP server's OpenSSH extensions (posix-rename for mv over a
// file, hardlink, fsync, statvfs for df) where `sftp` and scp do not, so
// each is used through the mount and checked on the host's side.
func TestSSHFSThroughGateway(t *testing.T) {
	_, fuseErr := os.Stat("/dev/fuse")
	testenv.RequirePeer(t, "sshfs, fusermount3 and /dev/fuse (scripts/test installs sshfs)", lookPath("sshfs") && lookPath("fusermount3") && lookPath("ssh") && fuseErr == nil)
	g := startGateway(t, "")
	g.startAgent("alpha", "")
	dir := t.TempDir()
	cfg := sshConfig(t, g, "alpha", dir)
	remote, mnt := filepath.Join(t.TempDir(), "remote"), filepath.Join(dir, "mnt")
	must(t, os.MkdirAll(remote, 0o755))
	must(t, os.MkdirAll(mnt, 0o755))

	// -f keeps sshfs in the foreground, so the harness owns the process;
	// the unmount below ends it.
	sshfs := start(t, "sshfs", "sshfs", nil, "-f", "-F", cfg, "alpha:"+remote, mnt)
	t.Cleanup(func() { _ = exec.Command("fusermount3", "-u", "-z", mnt).Run() })
	deadline := time.Now().Add(30 * time.Second)
	for !mounted(t, mnt) {
		select {
		case <-sshfs.done:
			t.Fatalf("sshfs ended before mounting: %v\n%s", sshfs.err, sshfs.output())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshfs did not mount %s in 30 s:\n%s", mnt, sshfs.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	at, on := func(name string) string { return filepath.Join(mnt, name) }, func(name string) string { return filepath.Join(remote, name) }

	data := make([]byte, 8<<20)
	_, _ = rand.Read(data)
	f, err := os.Create(at("big"))
	must(t, err)
	_, err = f.Write(data)
	must(t, err)
	must(t, f.Sync()) // fsync@openssh.com
	must(t, f.Close())
	if got, err := os.ReadFile(on("big")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("8 MiB written through the mount arrived as %d bytes: %v", len(got), err)
	}
	if got, err := os.ReadFile(at("big")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("8 MiB read back through the mount: %d bytes: %v", len(got), err)
	}

	must(t, os.WriteFile(at("a.txt"), []byte("old\n"), 0o644))
	must(t, os.WriteFile(at("b.txt"), []byte("new\n"), 0o644))
	must(t, os.Rename(at("b.txt"), at("a.txt"))) // mv over a file: posix-rename@openssh.com
	if got, err := os.ReadFile(on("a.txt")); err != nil || string(got) != "new\n" {
		t.Errorf("mv over a file: the host has %q, %v", got, err)
	}
	if _, err := os.Lstat(on("b.txt")); !os.IsNotExist(err) {
		t.Errorf("mv left its source: %v", err)
	}
	must(t, os.Link(at("a.txt"), at("hard"))) // hardlink@openssh.com
	var st1, st2 syscall.Stat_t
	must(t, syscall.Stat(on("a.txt"), &st1))
	must(t, syscall.Stat(on("hard"), &st2))
	if st1.Ino != st2.Ino || st1.Nlink != 2 {
		t.Errorf("ln: inodes %d and %d, links %d: want one file with two names", st1.Ino, st2.Ino, st1.Nlink)
	}
	must(t, os.Symlink("a.txt", at("link")))
	if target, err := os.Readlink(on("link")); err != nil || target != "a.txt" {
		t.Errorf("ln -s: the host's link points at %q, %v", target, err)
	}
	must(t, os.Chmod(at("a.txt"), 0o600))
	if fi, err := os.Stat(on("a.txt")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("chmod 600: the host has %v, %v", fi.Mode(), err)
	}
	must(t, os.Truncate(at("big"), 3))
	if fi, err := os.Stat(on("big")); err != nil || fi.Size() != 3 {
		t.Errorf("truncate to 3: the host's file is %d bytes, %v", fi.Size(), err)
	}
	when := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	must(t, os.Chtimes(at("a.txt"), when, when))
	if fi, err := os.Stat(on("a.txt")); err != nil || !fi.ModTime().Equal(when) {
		t.Errorf("touch -d: the host's mtime is %v, %v", fi.ModTime(), err)
	}
	must(t, os.Mkdir(at("d"), 0o750))
	must(t, os.WriteFile(at("d/x"), []byte("x"), 0o600))
	entries, err := os.ReadDir(mnt)
	must(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, " "); got != "a.txt big d hard link" {
		t.Errorf("ls of the mount: %q", got)
	}
	must(t, os.RemoveAll(at("d")))
	if _, err := os.Stat(on("d")); !os.IsNotExist(err) {
		t.Errorf("rm -r: the host still has d: %v", err)
	}

	// df: statvfs@openssh.com answers with the host's file system.
	var viaMount, onHost syscall.Statfs_t
	must(t, syscall.Statfs(mnt, &viaMount))
	must(t, syscall.Statfs(remote, &onHost))
	if total := func(s syscall.Statfs_t) uint64 { return s.Blocks * uint64(s.Bsize) }; total(viaMount) != total(onHost) || viaMount.Blocks == 0 {
		t.Errorf("df through the mount: %d bytes in all, the host's file system %d", total(viaMount), total(onHost))
	}

	if out, err := exec.Command("fusermount3", "-u", mnt).CombinedOutput(); err != nil {
		t.Fatalf("fusermount3 -u: %v %s", err, out)
	}
	select {
	case <-sshfs.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("sshfs still running 30 s after the unmount:\n%s", sshfs.output())
	}
}

// mounted reports whether a file system is mounted at dir.
func mounted(t *testing.T, dir string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mounts")
	must(t, err)
	for line := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[1] == dir {
			return true
		}
	}
	return false
}
