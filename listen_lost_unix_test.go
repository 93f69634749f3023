//go:build unix

package hostgate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
)

// TestListenEndsWhenConnectionEnds: a listener Host.Listen gave over the
// forwarder hostgate ships (the SSH client, under a Host and a Wrap of
// it) does not outlive its connection: once the host's connection ended
// by itself, Accept returns, saying so. (Host.Forward needed Done for
// that; a listener ends with its forward list, which the SSH client
// closes when the connection ends.)
func TestListenEndsWhenConnectionEnds(t *testing.T) {
	for _, wrapped := range []bool{false, true} {
		h, ts := endingHost(t, "box")
		if wrapped {
			h = hostgate.Wrap(h, func(argv []string, dir string, env map[string]string) ([]string, map[string]string) { return argv, env })
			t.Cleanup(func() { _ = h.Close() })
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		ln, err := h.Listen(ctx, "tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		accepted := make(chan error, 1)
		go func() {
			c, err := ln.Accept()
			if c != nil {
				_ = c.Close()
			}
			accepted <- err
		}()
		if err := ts.Close(); err != nil { // the host goes
			t.Fatal(err)
		}
		select {
		case err := <-accepted:
			if !errors.Is(err, hostgate.ErrConnectionEnded) {
				t.Errorf("wrapped %v: Accept once the connection ended: %v; want ErrConnectionEnded", wrapped, err)
			}
		case <-time.After(30 * time.Second): // a guard against a hang, not a timing
			t.Fatalf("wrapped %v: Accept still waiting 30 s after the host's connection ended", wrapped)
		}
	}
}
