//go:build unix

package hostgate_test

import (
	"context"
	"errors"
	"sync/atomic"
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

// TestWrapReconnect: a wrapper of a Host made with Reconnect runs its
// processes on the connection its base made again after a loss, rather
// than on the lost one for good.
func TestWrapReconnect(t *testing.T) {
	type made struct {
		done chan struct{}
		tr   *fakeTransport
	}
	var conns []*made
	var n atomic.Int32
	base := hostgate.New(hostgate.Info{}, func(ctx context.Context) (*hostgate.Connection, error) {
		n.Add(1)
		m := &made{done: make(chan struct{}), tr: &fakeTransport{}}
		conns = append(conns, m)
		return &hostgate.Connection{Transport: m.tr, Done: m.done, Close: func() error { return nil }}, nil
	}, hostgate.Reconnect())
	defer base.Close()
	w := hostgate.Wrap(base, func(argv []string, dir string, env map[string]string) ([]string, map[string]string) {
		return argv, env
	})
	defer w.Close()
	ctx := t.Context()
	if _, err := w.Exec(ctx, []string{"true"}, hostgate.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	close(conns[0].done) // lost
	if _, err := w.Exec(ctx, []string{"true"}, hostgate.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	if n.Load() != 2 || conns[0].tr.spawns.Load() != 1 || conns[1].tr.spawns.Load() != 1 {
		t.Errorf("%d connections; spawns on the lost one %d, want 2 connections and the second Exec on the new one", n.Load(), conns[0].tr.spawns.Load())
	}
}
