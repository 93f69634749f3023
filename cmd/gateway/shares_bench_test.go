package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/hostgate/hostgate/forward"
	"github.com/hostgate/hostgate/internal/store"
)

// BenchmarkShareLookup is what each request to a shared port asks of the
// shares: a public page's every asset is one, with the real SQLite store
// behind them.
func BenchmarkShareLookup(b *testing.B) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(b.TempDir(), "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Enroll(ctx, store.Enrollment{HostID: "build-01", Kind: "machine", HostKey: "ssh-ed25519 AAAA"}); err != nil {
		b.Fatal(err)
	}
	g, err := newGatewayShares(ctx, st, func(context.Context, string) (bool, error) { return true, nil })
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	if err := g.Put(ctx, forward.Share{HostID: "build-01", Port: 3000, Created: now, Expires: now.Add(time.Hour)}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, ok, err := g.Lookup(ctx, "build-01", 3000); !ok || err != nil {
			b.Fatalf("lookup: %v %v", ok, err)
		}
	}
}
