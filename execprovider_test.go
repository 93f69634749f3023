package hostgate_test

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

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
	for _, tool := range []string{"sh", "uname", "stat", "ls", "mkdir", "rmdir", "rm", "mv", "cp", "cat", "test", "ln", "readlink", "realpath", "chmod"} {
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
