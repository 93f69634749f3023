//go:build unix

package hostgate_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/localexec"
	"github.com/hostgate/hostgate/internal/testenv"
	"github.com/hostgate/hostgate/providertest"
)

func TestExecProviderConformance(t *testing.T) {
	providertest.Run(t, func(t *testing.T) (hostgate.Provider, string) {
		return hostgate.ExecProvider(&localexec.Transport{}), t.TempDir()
	})
}

// TestExecProviderBusybox runs the suite with busybox applets as the only
// tools (sh, stat, mkdir, …), as in the busybox test image of Docker
// executions, so the scripts stay within what busybox implements.
func TestExecProviderBusybox(t *testing.T) {
	bb, err := exec.LookPath("busybox")
	testenv.RequirePeer(t, "busybox", err == nil)
	dir := t.TempDir()
	for _, tool := range []string{"sh", "uname", "stat", "ls", "mkdir", "rmdir", "rm", "mv", "cp", "cat", "test", "ln", "readlink", "realpath", "chmod", "touch"} {
		if err := os.Symlink(bb, dir+"/"+tool); err != nil {
			t.Fatal(err)
		}
	}
	tr := pathTransport{base: &localexec.Transport{}, dir: dir}
	providertest.Run(t, func(t *testing.T) (hostgate.Provider, string) {
		return hostgate.ExecProvider(tr), t.TempDir()
	})
}

// pathTransport runs every process with PATH set to dir only.
type pathTransport struct {
	base hostgate.Transport
	dir  string
}

func (p pathTransport) Spawn(ctx context.Context, argv []string, opts hostgate.SpawnOptions) (hostgate.Process, error) {
	argv = append([]string{p.dir + "/" + argv[0]}, argv[1:]...)
	env := map[string]string{"PATH": p.dir}
	for k, v := range opts.Env {
		env[k] = v
	}
	opts.Env = env
	return p.base.Spawn(ctx, argv, opts)
}

// nobody is the unprivileged user permission tests run as.
var nobody = &syscall.Credential{Uid: 65534, Gid: 65534}

// unprivilegedRoot returns a fresh directory owned by nobody, reachable by
// it (t.TempDir's parents are 0700 root), removed after the test.
func unprivilegedRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "hostgate-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			_ = os.Chmod(p, 0o755) // undo a failed test's locks; root could anyway
			return nil
		})
		if err := os.RemoveAll(dir); err != nil {
			t.Error(err)
		}
	})
	if err := os.Chown(dir, int(nobody.Uid), int(nobody.Gid)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestExecProviderConformanceUnprivileged runs the suite as nobody, so the
// permission cases (which root bypasses) are checked.
func TestExecProviderConformanceUnprivileged(t *testing.T) {
	testenv.RequirePeer(t, "root (to switch to nobody)", os.Geteuid() == 0)
	providertest.Run(t, func(t *testing.T) (hostgate.Provider, string) {
		return hostgate.ExecProvider(&localexec.Transport{Credential: nobody}), unprivilegedRoot(t)
	})
}

// A directory whose names, together, are past ARG_MAX lists whole: stat
// runs on batches. One stat of every name failed with E2BIG past about
// 60,000 names, and building its argument list was quadratic.
func TestExecProviderReadDirLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 50,000 files")
	}
	dir := t.TempDir()
	const n = 50_000
	pad := strings.Repeat("x", 40) // 50,000 names of 46 bytes: 2.4 MB, past ARG_MAX's 2 MiB
	for i := range n {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s%05d", pad, i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	p := hostgate.ExecProvider(&localexec.Transport{})
	ents, err := p.ReadDir(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != n || ents[0].Name() != pad+"00000" || ents[n-1].Name() != fmt.Sprintf("%s%05d", pad, n-1) || ents[n-1].IsDir() {
		t.Fatalf("ReadDir of %d files: %d entries, first %q", n, len(ents), ents[0].Name())
	}
}

func TestDefaultFSIsExecProviderOncePerConnection(t *testing.T) {
	h, _ := localHost(t, false)
	ctx := context.Background()
	a, err := h.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := h.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Errorf("FS returned two providers for one connection")
	}
	dir := t.TempDir()
	if fi, err := a.Stat(ctx, dir); err != nil || !fi.IsDir() {
		t.Errorf("default provider Stat: %v, %v", fi, err)
	}
}

// TestExecProviderCopyOntoFullDisk: a file copied with io.Copy onto a
// full disk fails with the disk's error, as a Write does. ReadFrom, which
// io.Copy takes (os.File's WriteTo comes to it), said "write |1: broken
// pipe" of the stdin cat had stopped reading, and the ENOSPC came only
// from Close, which a caller rarely checks after a failed copy (Upload
// without tar did not).
func TestExecProviderCopyOntoFullDisk(t *testing.T) {
	_, err := os.Stat("/dev/full")
	testenv.RequirePeer(t, "/dev/full (to stand for a full disk)", err == nil)
	// Past what the pipe to cat holds, so that a write fails after cat has.
	src := filepath.Join(t.TempDir(), "src")
	if err := os.WriteFile(src, bytes.Repeat([]byte("x"), 4<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, _ := localHost(t, false)
	ctx := context.Background()
	p, err := h.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w, err := p.Create(ctx, "/dev/full", 0o644)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(w, f)
	_ = w.Close()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("io.Copy onto a full disk: %v, want ENOSPC", err)
	}
}

// TestExecProviderChtimesWithoutTouch: on a host without touch, Chtimes
// fails with ErrNotSupported naming it (which Upload's filesystem way
// takes as a host that keeps the times files are written at), not with
// the shell's "not found".
func TestExecProviderChtimesWithoutTouch(t *testing.T) {
	// Not busybox's sh, which runs its own touch whatever PATH says.
	sh, err := exec.LookPath("dash")
	testenv.RequirePeer(t, "dash", err == nil)
	dir := t.TempDir()
	if err := os.Symlink(sh, dir+"/sh"); err != nil {
		t.Fatal(err)
	}
	p := hostgate.ExecProvider(pathTransport{base: &localexec.Transport{}, dir: dir}).(hostgate.TimeSetter)
	f := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err = p.Chtimes(context.Background(), f, time.Unix(1e9, 0), time.Unix(1e9, 0))
	if !errors.Is(err, hostgate.ErrNotSupported) || !strings.Contains(err.Error(), "touch") {
		t.Fatalf("Chtimes on a host without touch: %v, want ErrNotSupported naming touch", err)
	}
}

// TestExecProviderLchtimesWithoutTouchH: a touch that refuses -h (a
// busybox built without it) makes Lchtimes ErrNotSupported naming -h,
// which Upload takes as a link left the time it is made, not a failure;
// the link and its target keep their times.
func TestExecProviderLchtimesWithoutTouchH(t *testing.T) {
	sh, err := exec.LookPath("dash")
	testenv.RequirePeer(t, "dash", err == nil)
	touch, err := exec.LookPath("touch")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(sh, dir+"/sh"); err != nil {
		t.Fatal(err)
	}
	script := "#!" + sh + "\nfor a; do [ \"$a\" != -h ] || { echo \"touch: invalid option -- 'h'\" >&2; exit 1; }; done\nexec " + touch + " \"$@\"\n"
	if err := os.WriteFile(dir+"/touch", []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	p := hostgate.ExecProvider(pathTransport{base: &localexec.Transport{}, dir: dir}).(hostgate.TimeSetter)
	files := t.TempDir()
	f, l := filepath.Join(files, "f"), filepath.Join(files, "l")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("f", l); err != nil {
		t.Fatal(err)
	}
	before, err := os.Lstat(l)
	if err != nil {
		t.Fatal(err)
	}
	err = p.Lchtimes(context.Background(), l, time.Unix(1e9, 0), time.Unix(1e9, 0))
	if !errors.Is(err, hostgate.ErrNotSupported) || !strings.Contains(err.Error(), "-h") {
		t.Fatalf("Lchtimes with a touch without -h: %v, want ErrNotSupported naming -h", err)
	}
	if fi, err := os.Lstat(l); err != nil || !fi.ModTime().Equal(before.ModTime()) {
		t.Errorf("the link's time moved: %v (%v)", fi.ModTime(), err)
	}
	if fi, err := os.Stat(f); err != nil || fi.ModTime().Unix() == 1e9 {
		t.Errorf("the link's target got the time: %v (%v)", fi.ModTime(), err)
	}
	// The same touch sets a file's time (Chtimes takes no -h).
	if err := p.Chtimes(context.Background(), f, time.Unix(1e9, 0), time.Unix(1e9, 0)); err != nil {
		t.Errorf("Chtimes with that touch: %v", err)
	}
}
