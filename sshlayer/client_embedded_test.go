package sshlayer

import (
	"context"
	"errors"
	"testing"

	"github.com/hostgate/hostgate"
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
		waitGone(ctx, t, pid)
	})

	t.Run("ctx cancel takes the process group", func(t *testing.T) {
		pctx, cancel := context.WithCancel(ctx)
		// The grandchild sleep is not the process the shell execs.
		p, pid := spawnSleeperCmd(pctx, t, c, "sleep 30 & echo $!; wait")
		cancel()
		if err := p.Wait(); !errors.Is(err, context.Canceled) {
			t.Errorf("got %v, want context.Canceled", err)
		}
		waitGone(ctx, t, pid)
	})

	t.Run("exit codes", func(t *testing.T) {
		if _, _, err := run(ctx, t, c, []string{"sh", "-c", "exit 7"}, hostgate.SpawnOptions{}, ""); hostgate.ExitCode(err) != 7 {
			t.Errorf("got %v, want exit 7", err)
		}
	})
}
