//go:build linux

package sshlayer

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/testenv"
	"github.com/hostgate/hostgate/providertest"
)

// TestHostOverSSHNamesTheHost: a Host over the client names Auth.Host in
// the errors of a live connection (a missing file, a refused dial), not
// only once the connection is lost; the provider that names it still
// passes the provider suite, fast paths included, and a command's exit
// status and the end of its output come as they are.
func TestHostOverSSHNamesTheHost(t *testing.T) {
	ts := srvStartServer(t, nil)
	ctx := testCtx(t)
	var d netDialer
	conn, err := d.dial(ctx, ts.Addr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Connect(ctx, conn, Auth{Signer: ts.ClientSigner, HostKey: ts.HostKey, Host: "build-01"})
	if err != nil {
		t.Fatal(err)
	}
	h := hostgate.New(hostgate.Info{}, func(context.Context) (*hostgate.Connection, error) { return c.Connection(nil), nil })
	t.Cleanup(func() { _ = h.Close() })

	providertest.Run(t, func(t *testing.T) (hostgate.Provider, string) {
		p, err := h.FS(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		return p, t.TempDir()
	})

	// The checks below get a minute of their own: the provider suite
	// took most of ctx's on CI's loaded -race stage, and every call
	// after it met the deadline.
	ctx = testCtx(t)
	p, err := h.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	missing := t.TempDir() + "/missing"
	_, err = p.Stat(ctx, missing)
	if pe, ok := err.(*fs.PathError); !ok || pe.Path != missing || !os.IsNotExist(err) || !strings.HasPrefix(err.Error(), "host build-01: stat ") {
		t.Errorf("Stat of a missing file: %v, want a *fs.PathError naming the host that os.IsNotExist", err)
	}

	closed := testenv.RefusedAddr(t)
	if _, err := h.Dial(ctx, "tcp", closed); !errors.Is(err, hostgate.ErrConnectFailed) || !strings.HasPrefix(err.Error(), "host build-01: ") {
		t.Errorf("Dial of a closed port: %v, want ErrConnectFailed naming the host", err)
	}

	// The forwarder that names the host still says what the client's
	// does: early data, and when the connection ends.
	f, err := h.Forwarder(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.(interface{ Done() <-chan struct{} }); !ok || hostgate.TakesEarlyData(ctx, f) != c.TakesEarlyData() {
		t.Errorf("Forwarder %T: want Done, and early data as the client (%v)", f, c.TakesEarlyData())
	}
	if _, err := f.Dial(ctx, "tcp", closed); !errors.Is(err, hostgate.ErrConnectFailed) || !strings.HasPrefix(err.Error(), "host build-01: ") {
		t.Errorf("Forwarder.Dial of a closed port: %v, want ErrConnectFailed naming the host", err)
	}

	res, err := h.Exec(ctx, []string{"sh", "-c", "echo hi; exit 3"}, hostgate.ExecOptions{})
	if err != nil || res.ExitCode != 3 || string(res.Stdout) != "hi\n" {
		t.Errorf("Exec: %+v, %v; want exit 3 and hi", res, err)
	}
	proc, err := h.Spawn(ctx, []string{"sh", "-c", "echo hi; exit 3"}, hostgate.SpawnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = proc.Stdin().Close()
	out, err := io.ReadAll(proc.Stdout())
	if err != nil || string(out) != "hi\n" {
		t.Errorf("Stdout: %q, %v", out, err)
	}
	_, _ = io.Copy(io.Discard, proc.Stderr())
	var ee *hostgate.ExitError
	if err := proc.Wait(); !errors.As(err, &ee) || ee.Code != 3 || strings.Contains(err.Error(), "host ") {
		t.Errorf("Wait: %v, want the *ExitError of status 3 as it is", err)
	}
}
