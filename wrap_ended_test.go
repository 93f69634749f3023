//go:build unix

package hostgate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
)

// TestWrapConnectionEnded: a wrapper's errors once its base's connection
// ended by itself match ErrConnectionEnded, as the base's do: the
// wrapper borrows that connection, and a program that wrapped its host
// (a sandbox, sudo -u) is told the host went the same way.
func TestWrapConnectionEnded(t *testing.T) {
	base, ts := endingHost(t, "box")
	w := hostgate.Wrap(base, func(argv []string, dir string, env map[string]string) ([]string, map[string]string) {
		return argv, env
	})
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := w.Exec(ctx, []string{"true"}, hostgate.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := ts.Close(); err != nil { // the host goes
		t.Fatal(err)
	}
	if _, err := base.Exec(ctx, []string{"true"}, hostgate.ExecOptions{}); !errors.Is(err, hostgate.ErrConnectionEnded) {
		t.Fatalf("base's Exec on a host that went: %v; want ErrConnectionEnded", err)
	}
	if _, err := w.Exec(ctx, []string{"true"}, hostgate.ExecOptions{}); !errors.Is(err, hostgate.ErrConnectionEnded) {
		t.Errorf("wrapper's Exec on a host that went: %v; want ErrConnectionEnded, as base's", err)
	}
}
