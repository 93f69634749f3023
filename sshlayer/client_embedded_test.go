//go:build unix

package sshlayer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/testenv"
)

// The client against this project's embedded server, which honours signal
// requests and kills the process group when a session channel closes.

func startEmbedded(t *testing.T) (*TestServer, *Client) {
	t.Helper()
	ts, err := StartTestServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ts.Close() })
	return ts, connectEmbedded(t, ts)
}

// connectEmbedded connects hostgate's client to ts over TCP.
func connectEmbedded(t *testing.T, ts *TestServer) *Client {
	t.Helper()
	var d netDialer
	conn, err := d.dial(testCtx(t), ts.Addr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Connect(testCtx(t), conn, Auth{Signer: ts.ClientSigner, HostKey: ts.HostKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestEmbeddedKill(t *testing.T) {
	_, c := startEmbedded(t)
	ctx := testCtx(t)

	t.Run("signal", func(t *testing.T) {
		p, pid := spawnSleeper(ctx, t, c, nil)
		if err := p.Kill(hostgate.SIGTERM); err != nil {
			t.Fatal(err)
		}
		var ee *hostgate.ExitError
		if err := p.Wait(); !errors.As(err, &ee) || ee.Signal != hostgate.SIGTERM || ee.Code != -1 {
			t.Errorf("got %v, want killed by TERM", err)
		}
		testenv.WaitGone(t, pid, time.Minute)
	})

	t.Run("ctx cancel takes the process group", func(t *testing.T) {
		pctx, cancel := context.WithCancel(ctx)
		// The grandchild sleep is not the process the shell execs.
		p, pid := spawnSleeperCmd(pctx, t, c, "sleep 30 & echo $!; wait")
		cancel()
		if err := p.Wait(); !errors.Is(err, context.Canceled) {
			t.Errorf("got %v, want context.Canceled", err)
		}
		testenv.WaitGone(t, pid, time.Minute)
	})

	t.Run("exit codes", func(t *testing.T) {
		if _, _, err := run(ctx, t, c, []string{"sh", "-c", "exit 7"}, hostgate.SpawnOptions{}, ""); hostgate.ExitCode(err) != 7 {
			t.Errorf("got %v, want exit 7", err)
		}
	})
}

// Regression: Host.Close's doc says every later use fails with
// hostgate.ErrClosed, but a Provider or Process obtained before Close, and
// a Wrap host over the closed Host, failed with "sshlayer: client closed",
// which did not match it.
func TestEmbeddedClosedHostErrClosed(t *testing.T) {
	ts, c := startEmbedded(t)
	_ = c.Close() // only ts is used
	ctx := testCtx(t)
	h := hostgate.New(hostgate.Info{}, func(ctx context.Context) (*hostgate.Connection, error) {
		var d netDialer
		conn, err := d.dial(ctx, ts.Addr)
		if err != nil {
			return nil, err
		}
		c, err := Connect(ctx, conn, Auth{Signer: ts.ClientSigner, HostKey: ts.HostKey})
		if err != nil {
			return nil, err
		}
		return c.Connection(nil), nil
	})
	w := hostgate.Wrap(h, func(argv []string, _ string, env map[string]string) ([]string, map[string]string) { return argv, env })
	defer w.Close()
	fsys, err := h.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Stat(ctx, "/"); err != nil {
		t.Fatal(err)
	}
	p, err := h.Spawn(ctx, []string{"sleep", "30"}, hostgate.SpawnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Exec(ctx, []string{"true"}, hostgate.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	_, statErr := fsys.Stat(ctx, "/")
	_, execErr := w.Exec(ctx, []string{"true"}, hostgate.ExecOptions{})
	for what, err := range map[string]error{
		"provider's Stat":  statErr,
		"process's Wait":   p.Wait(),
		"wrap host's Exec": execErr,
		"ErrClientClosed":  ErrClientClosed,
	} {
		if !errors.Is(err, hostgate.ErrClosed) || !errors.Is(err, ErrClientClosed) || !strings.Contains(fmt.Sprint(err), "sshlayer: client closed") {
			t.Errorf("%s after Host.Close: %v, want hostgate.ErrClosed and ErrClientClosed", what, err)
		}
	}
}
