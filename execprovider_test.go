package hostgate_test

import (
	"context"
	"os"
	"testing"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/localexec"
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
	const bb = "/usr/bin/busybox"
	_, err := os.Stat(bb)
	if err != nil {
		t.Skipf("busybox not installed: %v", err)
	}
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
