package syncfs_test

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/hostgate/hostgate"
	syncfs "github.com/hostgate/hostgate/sync"
)

// TestNotSupportedSaysWhy: a call of an FS with no way to connect says
// why and what to do, not only "not supported by this host". FromHost
// replaced the host's own words (Host.Sync's "this host offers no
// synchronous filesystem (its Connection has no Sync spec)") with the
// bare ErrNotSupported, and New without a spec said nothing of the spec.
func TestNotSupportedSaysWhy(t *testing.T) {
	host := hostgate.New(hostgate.Info{}, func(context.Context) (*hostgate.Connection, error) {
		return &hostgate.Connection{Name: "h1", Transport: noTransportX{}, Close: func() error { return nil }}, nil
	})
	defer host.Close()
	for _, tc := range []struct {
		name string
		fsys *syncfs.FS
		want []string
	}{
		{"New without a spec", syncfs.New(nil, nil), []string{"stat x: ", "without a sync spec", "FromHost"}},
		{"New without Connect", syncfs.New(&hostgate.SyncSpec{Name: "h2"}, nil), []string{"host h2: stat x: ", "without a sync spec", "FromHost"}},
		{"a host without it", syncfs.FromHost(host, nil), []string{"host h1: stat x: ", "offers no synchronous filesystem"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer tc.fsys.Close()
			_, err := tc.fsys.Stat("x")
			if !errors.Is(err, syscall.ENOTSUP) {
				t.Fatalf("stat = %v; want ENOTSUP", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("stat = %q; want it to say %q", err, w)
				}
			}
			if n := strings.Count(err.Error(), "host h"); n > 1 {
				t.Errorf("stat = %q: names the host %d times", err, n)
			}
		})
	}
}

type noTransportX struct{}

func (noTransportX) Spawn(context.Context, []string, hostgate.SpawnOptions) (hostgate.Process, error) {
	return nil, errors.New("no transport")
}
