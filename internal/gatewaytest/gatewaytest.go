// Package gatewaytest runs a real gateway (internal/gateway) for the tests
// of the packages around it: its state, a store and a CA in a temporary
// directory, and a server on that state. The gateway's own tests keep
// their own setup: they cannot import this package, which imports theirs.
package gatewaytest

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/hostgate/hostgate/internal/gateway"
	"github.com/hostgate/hostgate/internal/gateway/sshca"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/store"
)

// State opens a gateway's state in a new temporary directory of tb, under
// the names `gateway serve --state-dir` gives it: the store (opened under
// ctx, closed when tb ends) and the CA. It fails tb when either cannot be
// made.
func State(tb testing.TB, ctx context.Context) (*store.SQLite, *sshca.CA) {
	tb.Helper()
	dir := tb.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, wire.GatewayStateFile))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	ca, err := sshca.LoadOrCreate(filepath.Join(dir, "ca_key"))
	if err != nil {
		tb.Fatal(err)
	}
	return st, ca
}

// Gateway is a running gateway and the state it serves.
type Gateway struct {
	*gateway.Server
	Store *store.SQLite
	CA    *sshca.CA
}

// New runs a gateway on a new State: gateway.New with ctx, logger and cfg
// (nil for either: gateway.New's defaults). When tb ends the server is
// closed, then the store. It fails tb when the gateway cannot start.
func New(tb testing.TB, ctx context.Context, logger *slog.Logger, cfg *gateway.Config) *Gateway {
	tb.Helper()
	st, ca := State(tb, ctx)
	srv, err := gateway.New(ctx, logger, st, ca, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = srv.Close() })
	return &Gateway{Server: srv, Store: st, CA: ca}
}
