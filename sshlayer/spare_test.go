//go:build unix

package sshlayer

import (
	"context"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/testenv"
)

// slowConnect connects to s over a link with delay each way.
func slowConnect(t *testing.T, s *countingServer, delay time.Duration) *Client {
	t.Helper()
	c, err := Connect(testCtx(t), testenv.DelayedLink(t, s.dial(t), delay), s.auth())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Commands run one after another each take the spare session opened with
// the one before, so that each costs one round trip: each spare's open
// goes out with its command, not after the command's answer (this server
// answers a command only once the next channel's open has come), five
// commands open six channels (the last a spare), and the first SFTP call
// starts its subsystem on the spare. The link is slow (10 ms each way), so
// that a spare still opening is waited for, not opened beside.
func TestCommandsTakeTheSpareOpenedWithTheOneBefore(t *testing.T) {
	s := newRunningServer(t)
	c := slowConnect(t, s, 10*time.Millisecond)
	h := hostgate.New(hostgate.Info{}, func(context.Context) (*hostgate.Connection, error) { return c.Connection(nil), nil })
	ctx := testCtx(t)
	// A spare still opening is waited for, not opened beside: its answer
	// comes before any open sent now.
	c.refillSpare()
	sess, ok := c.takeSpareWait()
	if !ok {
		t.Fatal("takeSpareWait right after refillSpare: no spare, want the one opening")
	}
	_ = sess.Close()
	for i := range 5 {
		res, err := h.Exec(ctx, []string{"true"}, hostgate.ExecOptions{})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("command %d: %v, %v", i, res, err)
		}
	}
	if sess, ok := c.takeSpareWait(); ok {
		_ = sess.Close()
	}
	if n := s.sessions.Load(); n != 7 {
		t.Fatalf("5 commands opened %d session channels after the first spare, want 6: a command did not take the spare opened with the one before", n)
	}
	c.refillSpare()
	fsys, err := h.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Stat(ctx, "/"); err != nil {
		t.Fatal(err)
	}
	if got := s.first(8); got != "subsystem" {
		t.Fatalf("the spare opened before the first SFTP call had %q first, want its subsystem request", got)
	}
	if n := s.unpaired.Load(); n != 0 {
		t.Fatalf("%d of the commands and the SFTP start went out without the next spare's open, which waited for their answers: a round trip more for the next", n)
	}
}
