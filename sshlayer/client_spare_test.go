//go:build unix

package sshlayer

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
)

// waitSpare waits until the client holds a spare session.
func waitSpare(t *testing.T, c *Client) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c.spareMu.Lock()
		ok := c.spare != nil
		c.spareMu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no spare session 30 s after a command started")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSpareSession: after a command starts, the next one's session channel
// is already open; the next command takes it (and a new spare opens), and
// a spare the server has closed costs a retry, not a failed command.
func TestSpareSession(t *testing.T) {
	_, c := startEmbedded(t)
	ctx := testCtx(t)
	run := func(want string) {
		t.Helper()
		p, err := c.Spawn(ctx, []string{"echo", want}, hostgate.SpawnOptions{})
		if err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
		out, rerr := io.ReadAll(p.Stdout())
		if err := errors.Join(rerr, p.Wait()); err != nil || string(out) != want+"\n" {
			t.Fatalf("exec: %q, %v", out, err)
		}
	}
	run("one")
	waitSpare(t, c)
	first, _ := c.takeSpare()
	c.spareMu.Lock()
	c.spare = first
	c.spareMu.Unlock()
	run("two")
	waitSpare(t, c)
	second, _ := c.takeSpare()
	if second == first {
		t.Fatal("the second command did not take the spare session")
	}

	// A stale spare: its channel is gone when the next command comes.
	_ = second.Close()
	c.spareMu.Lock()
	c.spare = second
	c.spareMu.Unlock()
	run("three")
}
