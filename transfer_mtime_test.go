//go:build unix

package hostgate_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hostgate/hostgate"
)

// timedTree is makeTree with a modification time of its own on every
// file and directory (a fraction of a second on some), set after what is
// in them, as a checkout or a build leaves them.
func timedTree(t *testing.T, dir string) {
	t.Helper()
	makeTree(t, dir)
	var dirs []string
	i := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir || d.Type()&fs.ModeSymlink != 0 {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
			return nil
		}
		i++
		mt := time.Date(2001, 9, 9, 1, 46, 40, 0, time.UTC).Add(time.Duration(i)*time.Hour + 300*time.Millisecond)
		return os.Chtimes(p, mt, mt)
	})
	if err != nil {
		t.Fatal(err)
	}
	for j, d := range dirs {
		mt := time.Date(2010, 3, 4, 5, 6, 7, 0, time.UTC).Add(time.Duration(j) * 24 * time.Hour)
		if err := os.Chtimes(d, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
}

// sameTimes checks that every file and directory under src (not src
// itself, nor links, which keep the time they are made) has its
// modification time, to the second, under copied.
func sameTimes(t *testing.T, what, src, copied string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == src || d.Type()&fs.ModeSymlink != 0 {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		want, err := d.Info()
		if err != nil {
			return err
		}
		got, err := os.Lstat(filepath.Join(copied, rel))
		if err != nil {
			t.Errorf("%s: %v", what, err)
			return nil
		}
		n++
		if got.ModTime().Unix() != want.ModTime().Unix() {
			t.Errorf("%s: %s has mtime %v in the copy, %v in the source", what, rel, got.ModTime().UTC(), want.ModTime().UTC())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatalf("%s: nothing compared", what)
	}
}

// TestUploadKeepsModTimes: files' and directories' modification times go
// to the host both ways, by tar and by the filesystem way (which set
// none before), over SFTP and ExecProvider (GNU's touch and tar, and
// busybox's for every tool: its tar set no directory's time before),
// into a new directory and over what is there; a tree that gives no
// times (fstest.MapFS's zero) lands as 1970 both ways, as a tar archive
// says it.
func TestUploadKeepsModTimes(t *testing.T) {
	src := t.TempDir()
	timedTree(t, src)
	hosts := timeHosts(t)
	zero := fstest.MapFS{"z/f": {Data: []byte("x"), Mode: 0o644}}
	for name, h := range hosts {
		for _, noTar := range []bool{false, true} {
			what := name
			if noTar {
				what += " NoTar"
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			opts := &hostgate.TransferOptions{NoTar: noTar}
			remote := filepath.Join(t.TempDir(), "on", "host")
			for _, again := range []string{"", " again"} {
				if err := hostgate.Upload(ctx, h, os.DirFS(src), remote, opts); err != nil {
					t.Fatalf("%s: upload%s: %v", what, again, err)
				}
				sameTimes(t, what+": upload"+again, src, remote)
			}
			remote = filepath.Join(t.TempDir(), "zero")
			if err := hostgate.Upload(ctx, h, zero, remote, opts); err != nil {
				t.Fatalf("%s: upload of fstest.MapFS: %v", what, err)
			}
			for _, n := range []string{"z", "z/f"} {
				fi, err := os.Stat(filepath.Join(remote, n))
				if err != nil {
					t.Errorf("%s: fstest.MapFS's %s: %v", what, n, err)
				} else if fi.ModTime().Unix() != 0 {
					t.Errorf("%s: fstest.MapFS's %s without a time has %v on the host, want 1970-01-01 as a tar archive has it", what, n, fi.ModTime().UTC())
				}
			}
			cancel()
		}
	}
}

// timeHosts are the hosts the modification time tests run on:
// streamHosts' (GNU's tools locally and sshlayer's SFTP server over SSH)
// and this machine with busybox's for every tool.
func timeHosts(t *testing.T) map[string]*hostgate.Host {
	t.Helper()
	hosts := streamHosts(t)
	local, _ := localHost(t, false)
	tools := map[string]string{}
	for _, c := range []string{"sh", "uname", "stat", "mkdir", "rmdir", "rm", "mv", "cat", "ln", "readlink", "chmod", "touch", "tar"} {
		tools[c] = "busybox"
	}
	hosts["busybox"] = pathHost(t, local, tools)
	return hosts
}

// TestDownloadKeepsModTimes: files' and directories' modification times
// come from the host both ways, by tar and by the filesystem way (both
// gave every one the time of the download before), from GNU's tar and
// busybox's, over SFTP and ExecProvider, into a new directory and over a
// copy whose times have moved since (a directory's set after what is
// written in it).
func TestDownloadKeepsModTimes(t *testing.T) {
	src := t.TempDir()
	timedTree(t, src)
	for name, h := range timeHosts(t) {
		for _, noTar := range []bool{false, true} {
			what := name
			if noTar {
				what += " NoTar"
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			opts := &hostgate.TransferOptions{NoTar: noTar}
			dst := filepath.Join(t.TempDir(), "got")
			for _, again := range []string{"", " again"} {
				if again != "" {
					touchTree(t, dst)
				}
				if err := hostgate.Download(ctx, h, src, dst, opts); err != nil {
					t.Fatalf("%s: download%s: %v", what, again, err)
				}
				sameTimes(t, what+": download"+again, src, dst)
			}
			cancel()
		}
	}
}

// touchTree gives every file and directory under dir the time now, as
// editing a copy would.
func touchTree(t *testing.T, dir string) {
	t.Helper()
	now := time.Now()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 {
			return err
		}
		return os.Chtimes(p, now, now)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// setLinkTime gives the symbolic link name its own modification time.
func setLinkTime(t *testing.T, name string, mtime time.Time) {
	t.Helper()
	ts := []unix.Timespec{unix.NsecToTimespec(mtime.UnixNano()), unix.NsecToTimespec(mtime.UnixNano())}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, name, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		t.Fatal(err)
	}
}

// TestUploadKeepsLinkTimes: Upload's filesystem way gives a symbolic
// link its own modification time (it kept the time it was made before)
// where the host can set it: sshlayer's SFTP server (lsetstat@openssh.com)
// and ExecProvider with GNU's touch and busybox's (-h); new and over the
// link already there.
func TestUploadKeepsLinkTimes(t *testing.T) {
	src := t.TempDir()
	timedTree(t, src)
	want := time.Date(2005, 6, 7, 8, 9, 10, 0, time.UTC)
	setLinkTime(t, filepath.Join(src, "link"), want)
	for name, h := range timeHosts(t) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		remote := filepath.Join(t.TempDir(), "on", "host")
		for _, again := range []string{"", " again"} {
			if err := hostgate.Upload(ctx, h, os.DirFS(src), remote, &hostgate.TransferOptions{NoTar: true}); err != nil {
				t.Fatalf("%s NoTar: upload%s: %v", name, again, err)
			}
			fi, err := os.Lstat(filepath.Join(remote, "link"))
			if err != nil {
				t.Fatalf("%s NoTar: upload%s: %v", name, again, err)
			}
			if fi.Mode()&fs.ModeSymlink == 0 || fi.ModTime().Unix() != want.Unix() {
				t.Errorf("%s NoTar: upload%s: the link has mode %v and mtime %v on the host, want a link of %v", name, again, fi.Mode(), fi.ModTime().UTC(), want)
			}
			if fi, err := os.Stat(filepath.Join(remote, "sub/b.bin")); err != nil {
				t.Errorf("%s NoTar: upload%s: %v", name, again, err)
			} else if fi.ModTime().Unix() == want.Unix() {
				t.Errorf("%s NoTar: upload%s: the link's target has the link's time", name, again)
			}
			sameTimes(t, name+" NoTar: upload"+again, src, remote)
		}
		cancel()
	}
}

// TestDownloadKeepsLinkTimes: a symbolic link's own modification time
// comes from the host both ways, by tar (GNU's and busybox's) and by the
// filesystem way (SFTP, ExecProvider), where it had the time it was made
// before, and its target keeps its own; new and over the copy.
func TestDownloadKeepsLinkTimes(t *testing.T) {
	src := t.TempDir()
	timedTree(t, src)
	want := time.Date(2005, 6, 7, 8, 9, 10, 0, time.UTC)
	setLinkTime(t, filepath.Join(src, "link"), want)
	for name, h := range timeHosts(t) {
		for _, noTar := range []bool{false, true} {
			what := name
			if noTar {
				what += " NoTar"
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			dst := filepath.Join(t.TempDir(), "got")
			for _, again := range []string{"", " again"} {
				if err := hostgate.Download(ctx, h, src, dst, &hostgate.TransferOptions{NoTar: noTar}); err != nil {
					t.Fatalf("%s: download%s: %v", what, again, err)
				}
				fi, err := os.Lstat(filepath.Join(dst, "link"))
				if err != nil {
					t.Fatalf("%s: download%s: %v", what, again, err)
				}
				if fi.Mode()&fs.ModeSymlink == 0 || fi.ModTime().Unix() != want.Unix() {
					t.Errorf("%s: download%s: the link has mode %v and mtime %v in the copy, want a link of %v", what, again, fi.Mode(), fi.ModTime().UTC(), want)
				}
				sameTimes(t, what+": download"+again, src, dst)
			}
			cancel()
		}
	}
}
