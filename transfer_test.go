//go:build unix

package hostgate_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/testenv"
)

// makeTree writes a small tree under dir: nested directories, files of
// several sizes (one empty, one executable), a name with a space and a
// long one, and a symbolic link within the tree.
func makeTree(t *testing.T, dir string) {
	t.Helper()
	files := map[string]string{
		"a.txt":        "alpha\n",
		"empty":        "",
		"sub/b.bin":    strings.Repeat("b", 100_000),
		"sub/deep/c":   "c",
		"with space/d": "d",
		"run.sh":       "#!/bin/sh\necho hi\n",
		strings.Repeat("n", 120) + "/" + strings.Repeat("m", 120): "long",
	}
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub/b.bin", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
}

// treeOf lists dir: each name with its kind, mode bits and contents (or
// link target).
func treeOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "link " + target
		case d.IsDir():
			out[rel] = "dir"
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = info.Mode().Perm().String() + " " + string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t *testing.T, what string, want, got map[string]string) {
	t.Helper()
	for n, w := range want {
		if g, ok := got[n]; !ok {
			t.Errorf("%s: %q missing", what, n)
		} else if g != w {
			t.Errorf("%s: %q is %.40q, want %.40q", what, n, g, w)
		}
	}
	for n := range got {
		if _, ok := want[n]; !ok {
			t.Errorf("%s: %q is not in the source", what, n)
		}
	}
}

// roundTrip uploads the tree src to the host and downloads it back, and
// checks that both are want; it returns the two copies.
func roundTrip(t *testing.T, ctx context.Context, h *hostgate.Host, src string, want map[string]string, opts *hostgate.TransferOptions, what string) (remote, back string) {
	t.Helper()
	remote = filepath.Join(t.TempDir(), "on", "host")
	if err := hostgate.Upload(ctx, h, os.DirFS(src), remote, opts); err != nil {
		t.Fatalf("%s: upload: %v", what, err)
	}
	sameTree(t, what+" upload", want, treeOf(t, remote))
	back = filepath.Join(t.TempDir(), "back")
	if err := hostgate.Download(ctx, h, remote, back, opts); err != nil {
		t.Fatalf("%s: download: %v", what, err)
	}
	sameTree(t, what+" download", want, treeOf(t, back))
	return remote, back
}

// TestUploadDownloadTree: a tree goes to the host and back whole (files,
// modes, a link, long names), by tar and by the filesystem way, on the
// local transport and over SSH; the hosts are this machine, so the host's
// side is read here.
func TestUploadDownloadTree(t *testing.T) {
	src := t.TempDir()
	makeTree(t, src)
	want := treeOf(t, src)
	for name, h := range streamHosts(t) {
		for _, noTar := range []bool{false, true} {
			what := name
			if noTar {
				what += " NoTar"
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			opts := &hostgate.TransferOptions{NoTar: noTar}
			remote, back := roundTrip(t, ctx, h, src, want, opts, what)
			// Again, over what is there: files are replaced.
			if err := os.WriteFile(filepath.Join(remote, "a.txt"), []byte("changed"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := hostgate.Download(ctx, h, remote, back, opts); err != nil {
				t.Fatalf("%s: download again: %v", what, err)
			}
			if b, _ := os.ReadFile(filepath.Join(back, "a.txt")); string(b) != "changed" {
				t.Errorf("%s: download again: a.txt is %q", what, b)
			}
			cancel()
		}
	}
}

// TestDownloadMissingTree: a Download of a directory that is not there
// fails with fs.ErrNotExist, and of a file with ENOTDIR, by tar as by the
// filesystem way, so a caller tells "nothing there" from a failed
// transfer with errors.Is, as after any other failed read of the host;
// a file's says what reads one.
func TestDownloadMissingTree(t *testing.T) {
	for name, h := range streamHosts(t) {
		dir := t.TempDir()
		file := filepath.Join(dir, "file")
		if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, noTar := range []bool{false, true} {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			opts := &hostgate.TransferOptions{NoTar: noTar}
			for _, c := range []struct {
				remote string
				want   error
			}{
				{filepath.Join(dir, "missing"), fs.ErrNotExist},
				{filepath.Join(dir, "missing", "deeper"), fs.ErrNotExist},
				{file, syscall.ENOTDIR},
			} {
				dst := filepath.Join(t.TempDir(), "down")
				err := hostgate.Download(ctx, h, c.remote, dst, opts)
				if !errors.Is(err, c.want) {
					t.Errorf("%s NoTar %v: Download of %s: %v, want %v", name, noTar, c.remote, err, c.want)
				}
				// Of a file, it says what reads one (an agent's program
				// that downloaded a single file read "open …/file: not a
				// directory" and no more).
				if c.remote == file && !strings.Contains(fmt.Sprint(err), "is a file: Download copies a directory's tree; read one file with Host.FS") {
					t.Errorf("%s NoTar %v: Download of a file: %v, want it to say what reads one", name, noTar, err)
				}
				if c.remote != file && strings.Contains(fmt.Sprint(err), "is a file") {
					t.Errorf("%s NoTar %v: Download of %s: %v, calls it a file", name, noTar, c.remote, err)
				}
			}
			cancel()
		}
	}
}

// TestUploadRefusedTree: an Upload whose directory cannot be made fails
// as the filesystem way's Mkdir does, by tar too: ENOTDIR where dir, or a
// directory on its way, is a file, as os.MkdirAll says (it was
// fs.ErrExist, mkdir -p's), and fs.ErrPermission in a directory the user
// may not write in, rather than mkdir's words alone.
func TestUploadRefusedTree(t *testing.T) {
	tree := fstest.MapFS{"a.txt": {Data: []byte("a"), Mode: 0o644}}
	for name, h := range streamHosts(t) {
		dir := t.TempDir()
		file := filepath.Join(dir, "file")
		if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		locked := filepath.Join(dir, "locked")
		if err := os.Mkdir(locked, 0o555); err != nil {
			t.Fatal(err)
		}
		cases := map[string][]error{
			file:                                 {syscall.ENOTDIR},
			filepath.Join(file, "sub", "deeper"): {syscall.ENOTDIR},
		}
		if os.Geteuid() != 0 { // root writes in any directory
			cases[filepath.Join(locked, "sub")] = []error{fs.ErrPermission}
		}
		for _, noTar := range []bool{false, true} {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			for remote, want := range cases {
				err := hostgate.Upload(ctx, h, tree, remote, &hostgate.TransferOptions{NoTar: noTar})
				if !slices.ContainsFunc(want, func(w error) bool { return errors.Is(err, w) }) {
					t.Errorf("%s NoTar %v: Upload to %s: %v, want %v", name, noTar, remote, err, want)
				}
			}
			cancel()
		}
	}
}

// pathHost is base with a PATH of only the commands given, each a link
// to the program named beside it (empty: the command itself, from this
// PATH).
func pathHost(t *testing.T, base *hostgate.Host, commands map[string]string) *hostgate.Host {
	t.Helper()
	bin := t.TempDir()
	// Open to every user, the test's temporary directory included, for
	// a host that runs its commands as another.
	for _, d := range []string{bin, filepath.Dir(bin)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for c, prog := range commands {
		if prog == "" {
			prog = c
		}
		p, err := exec.LookPath(prog)
		if err != nil {
			testenv.RequirePeer(t, prog, false)
		}
		if err := os.Symlink(p, filepath.Join(bin, c)); err != nil {
			t.Fatal(err)
		}
	}
	return hostgate.Wrap(base, func(argv []string, dir string, env map[string]string) ([]string, map[string]string) {
		e := map[string]string{"PATH": bin}
		for k, v := range env {
			e[k] = v
		}
		return argv, e
	})
}

// TestUploadReadOnlyDirsToBusybox: directories go with their owner's rwx
// added, so that busybox's tar, which makes a directory as the archive
// says before its files, can put files in one that fstest.MapFS gives as
// read-only (it could not: "can't open 'bin/run.sh': Permission denied",
// found in a sandbox).
func TestUploadReadOnlyDirsToBusybox(t *testing.T) {
	local, _ := localHost(t, false)
	h := pathHost(t, local, map[string]string{"sh": "", "mkdir": "", "tar": "busybox"})
	if os.Geteuid() == 0 {
		// root writes into a read-only directory: run as nobody, as a
		// sandbox runs its commands as a user.
		setpriv, err := exec.LookPath("setpriv")
		if err != nil {
			testenv.RequirePeer(t, "setpriv (to run busybox's tar as another user than root)", false)
		}
		h = hostgate.Wrap(h, func(argv []string, dir string, env map[string]string) ([]string, map[string]string) {
			return append([]string{setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"}, argv...), env
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tree := fstest.MapFS{"bin/run.sh": {Data: []byte("echo ran\n"), Mode: 0o755}}
	if info, err := fs.Stat(tree, "bin"); err != nil || info.Mode().Perm()&0o200 != 0 {
		t.Fatalf("fstest.MapFS's implicit directory: %v, %v; want read-only", info, err)
	}
	top := t.TempDir()
	if err := os.Chmod(top, 0o777); err != nil {
		t.Fatal(err)
	}
	// The transfer goes by tar: the way without it (ExecProvider here)
	// runs as root, past the read-only directory.
	if res, err := h.Exec(ctx, []string{"sh", "-c", "command -v tar"}, hostgate.ExecOptions{}); err != nil || res.ExitCode != 0 {
		t.Fatalf("no tar on the wrapped host: %v %q", err, res.Stderr)
	}
	remote := filepath.Join(top, "up")
	if err := hostgate.Upload(ctx, h, tree, remote, nil); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(remote, "bin/run.sh")); err != nil || string(b) != "echo ran\n" {
		t.Fatalf("uploaded: %q, %v", b, err)
	}
}

// TestTransferWithoutTar: on a host without tar (its PATH has sh and
// mkdir only), Upload and Download fall back to the host's filesystem.
func TestTransferWithoutTar(t *testing.T) {
	src := t.TempDir()
	makeTree(t, src)
	want := treeOf(t, src)
	for name, base := range streamHosts(t) {
		h := pathHost(t, base, map[string]string{"sh": "", "mkdir": ""})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if res, err := h.Exec(ctx, []string{"sh", "-c", "command -v tar"}, hostgate.ExecOptions{}); err != nil || res.ExitCode == 0 {
			t.Fatalf("%s: the wrapped host has tar: %+v, %v", name, res, err)
		}
		roundTrip(t, ctx, h, src, want, nil, name)
		cancel()
	}
}

// TestTransferLimits: a tree over TransferOptions' limits fails with
// ErrTransferLimit both ways, and both ways of each.
func TestTransferLimits(t *testing.T) {
	src := t.TempDir()
	makeTree(t, src)
	h := sshHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	remote := filepath.Join(t.TempDir(), "full")
	if err := hostgate.Upload(ctx, h, os.DirFS(src), remote, nil); err != nil {
		t.Fatal(err)
	}
	for _, noTar := range []bool{false, true} {
		for _, o := range []hostgate.TransferOptions{{MaxFiles: 3}, {MaxBytes: 50_000}} {
			o.NoTar = noTar
			err := hostgate.Upload(ctx, h, os.DirFS(src), filepath.Join(t.TempDir(), "up"), &o)
			if !errors.Is(err, hostgate.ErrTransferLimit) {
				t.Errorf("upload %+v: %v, want ErrTransferLimit", o, err)
			}
			err = hostgate.Download(ctx, h, remote, filepath.Join(t.TempDir(), "down"), &o)
			if !errors.Is(err, hostgate.ErrTransferLimit) {
				t.Errorf("download %+v: %v, want ErrTransferLimit", o, err)
			}
		}
	}
}

// archiveTransport is a host whose every command writes archive to its
// stdout and exits 0: a host's tar that sends what it likes.
type archiveTransport struct{ archive []byte }

func (a archiveTransport) Spawn(context.Context, []string, hostgate.SpawnOptions) (hostgate.Process, error) {
	return outputProcess{bytes.NewReader(a.archive)}, nil
}

type entry struct {
	name, link string
	typ        byte
}

func archiveOf(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: 0o644}
		var body []byte
		if e.typ == tar.TypeReg {
			body = []byte("pwned")
			hdr.Size = int64(len(body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestDownloadRefusesEscapes: an archive from the host cannot put a file
// outside the destination: not by "..", an absolute name, a link whose
// target leaves it, a file through such a link, or a link already in the
// destination.
func TestDownloadRefusesEscapes(t *testing.T) {
	reg, sym, hard := byte(tar.TypeReg), byte(tar.TypeSymlink), byte(tar.TypeLink)
	for _, c := range []struct {
		what    string
		entries []entry
		pre     func(dst, outside string) // the destination before the download
	}{
		{what: "dot-dot", entries: []entry{{name: "../evil", typ: reg}}},
		{what: "dot-dot inside", entries: []entry{{name: "a/../../evil", typ: reg}}},
		{what: "absolute", entries: []entry{{name: "/tmp/evil", typ: reg}}},
		{what: "absolute link", entries: []entry{{name: "l", link: "/", typ: sym}, {name: "l/evil", typ: reg}}},
		{what: "link up", entries: []entry{{name: "a/l", link: "../..", typ: sym}, {name: "a/l/evil", typ: reg}}},
		{what: "hard link out", entries: []entry{{name: "h", link: "../evil", typ: hard}}},
		{what: "link there before", entries: []entry{{name: "out/evil", typ: reg}}, pre: func(dst, outside string) {
			if err := os.Symlink(outside, filepath.Join(dst, "out")); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.what, func(t *testing.T) {
			top := t.TempDir()
			dst, outside := filepath.Join(top, "dst"), filepath.Join(top, "outside")
			for _, d := range []string{dst, outside} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if c.pre != nil {
				c.pre(dst, outside)
			}
			tr := archiveTransport{archiveOf(t, c.entries...)}
			h := hostgate.New(hostgate.Info{}, func(context.Context) (*hostgate.Connection, error) {
				return &hostgate.Connection{Transport: tr, FS: memProvider{}, Close: func() error { return nil }}, nil
			})
			defer h.Close()
			err := hostgate.Download(context.Background(), h, "x", dst, nil)
			if err == nil {
				t.Errorf("Download of %v: no error", c.entries)
			}
			// Nothing outside dst: top holds dst and outside, outside
			// nothing, and no "evil" anywhere but refused.
			if ents, _ := os.ReadDir(outside); len(ents) != 0 {
				t.Errorf("written outside the destination: %v", ents)
			}
			if ents, _ := os.ReadDir(top); len(ents) != 2 {
				t.Errorf("the destination's parent holds %v", ents)
			}
			if _, err := os.Stat("/tmp/evil"); err == nil {
				t.Errorf("/tmp/evil written")
			}
			// No link made in dst leads out of it (the one there before
			// aside).
			_ = filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.Type()&fs.ModeSymlink == 0 || c.pre != nil {
					return err
				}
				target, _ := os.Readlink(p)
				if rel, _ := filepath.Rel(dst, filepath.Join(filepath.Dir(p), target)); filepath.IsAbs(target) || !filepath.IsLocal(rel) {
					t.Errorf("a link out of the destination: %s -> %s", p, target)
				}
				return nil
			})
		})
	}
}

// BenchmarkTransfer moves a tree of 200 files of 4 KiB to and from a host
// over SSH (sshlayer's test server on loopback): by tar, by the
// filesystem way (SFTP, 16 files at once), and by the loop an agent
// writes first, one SFTP Create after another.
func BenchmarkTransfer(b *testing.B) {
	src := b.TempDir()
	for i := range 200 {
		p := filepath.Join(src, "d"+string(rune('a'+i%10)), "f"+strings.Repeat("x", i%7)+string(rune('a'+i/10)))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, bytes.Repeat([]byte{byte(i)}, 4096), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	h := sshHost(b)
	ctx := context.Background()
	remote := filepath.Join(testenv.MemTempDir(b), "remote")
	if err := hostgate.Upload(ctx, h, os.DirFS(src), remote, nil); err != nil {
		b.Fatal(err)
	}
	for _, way := range []struct {
		name string
		opts *hostgate.TransferOptions
	}{{"tar", nil}, {"fs", &hostgate.TransferOptions{NoTar: true}}} {
		b.Run("upload/"+way.name, func(b *testing.B) {
			for b.Loop() {
				if err := hostgate.Upload(ctx, h, os.DirFS(src), filepath.Join(testenv.MemTempDir(b), "up"), way.opts); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("download/"+way.name, func(b *testing.B) {
			for b.Loop() {
				if err := hostgate.Download(ctx, h, remote, filepath.Join(testenv.MemTempDir(b), "down"), way.opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("upload/sftp-loop", func(b *testing.B) {
		p, err := h.FS(ctx)
		if err != nil {
			b.Fatal(err)
		}
		fsys := os.DirFS(src)
		for b.Loop() {
			dir := filepath.Join(testenv.MemTempDir(b), "up")
			err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				to := filepath.Join(dir, name)
				if d.IsDir() {
					return p.Mkdir(ctx, to, 0o755, true)
				}
				data, err := fs.ReadFile(fsys, name)
				if err != nil {
					return err
				}
				w, err := p.Create(ctx, to, 0o644)
				if err != nil {
					return err
				}
				if _, err := w.Write(data); err != nil {
					return err
				}
				return w.Close()
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestUploadFSReportsTheFailedCopy: when one file's copy fails on the
// filesystem way, Upload says which and why, not the cancellation that
// copy's failure gave the walk and the other copies.
func TestUploadFSReportsTheFailedCopy(t *testing.T) {
	src := fstest.MapFS{}
	for i := range 40 {
		src[fmt.Sprintf("f%02d", i)] = &fstest.MapFile{Data: []byte("x"), Mode: 0o644}
	}
	dst := t.TempDir()
	// A directory with something in it where the tree has the file f05.
	if err := os.MkdirAll(filepath.Join(dst, "f05", "in"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, h := range streamHosts(t) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := hostgate.Upload(ctx, h, src, dst, &hostgate.TransferOptions{NoTar: true})
		cancel()
		if err == nil || errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "f05") {
			t.Errorf("%s: upload over a directory named as a file: %v, want the copy's error naming f05", name, err)
		}
	}
}
