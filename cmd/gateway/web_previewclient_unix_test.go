//go:build unix

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/agent"
	"github.com/hostgate/hostgate/internal/gateway"
	"github.com/hostgate/hostgate/internal/testenv"
)

// previewBox is a gateway behind a TLS proxy on this machine
// (--trusted-proxy 127.0.0.1, as README's deployment) with host box's
// agent connected in-process, and a dev server on box.
type previewBox struct {
	base, admin string
	devPort     string
}

func startPreviewBox(t *testing.T, dev http.Handler) *previewBox {
	t.Helper()
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "state")
	logs := &testenv.LogBuffer{}
	proxies, err := gateway.ParseTrustedProxies("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := serveWith(t, &serveConfig{Listen: "127.0.0.1:0", StateDir: dir, Docker: "off", CertTTL: time.Minute, LogFormat: "text", TrustedProxy: "127.0.0.1", proxies: proxies}, logs)
	b := &previewBox{base: "http://" + a.String()}
	newToken := tokenMaker(t, ctx, dir)
	b.admin = newToken("--role", "admin")
	actx, cancel := context.WithCancel(ctx)
	up := make(chan string, 4)
	done := make(chan error, 1)
	go func() {
		done <- agent.Connect(actx, &agent.ConnectConfig{GatewayURL: b.base, Token: newToken("--role", "agent", "--host", "box"), StateDir: t.TempDir(),
			Logger: slog.New(slog.NewTextHandler(logs, nil)), OnTunnel: func(id string) { up <- id }})
	}()
	t.Cleanup(sync.OnceFunc(func() { cancel(); <-done }))
	select {
	case <-up:
	case err := <-done:
		t.Fatalf("agent: %v", err)
	case <-ctx.Done():
		t.Fatal("agent did not connect")
	}
	srv := httptest.NewServer(dev)
	t.Cleanup(srv.Close)
	_, b.devPort, _ = net.SplitHostPort(srv.Listener.Addr().String())
	return b
}

// TestPreviewForwardsTheViewersAddress: behind README's deployment (a TLS
// proxy on the gateway's machine, --trusted-proxy 127.0.0.1), the dev
// server's X-Forwarded-For names the viewer, as the gateway's rate limits
// and audit log do. It named the proxy, 127.0.0.1, for every viewer: a
// dev server trusting loopback proxies (Rails does, and grants its error
// pages' web-console, a Ruby prompt on the host, to 127.0.0.1) took an
// anonymous viewer of a public share for this machine.
func TestPreviewForwardsTheViewersAddress(t *testing.T) {
	ctx := testCtx(t)
	b := startPreviewBox(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Header.Get("X-Forwarded-For"))
	}))
	for _, tc := range []struct{ sent, want string }{
		{"203.0.113.7", "203.0.113.7"},               // nginx's $proxy_add_x_forwarded_for
		{"198.51.100.1, 203.0.113.7", "203.0.113.7"}, // a client's own header before it: not believed
		{"", "127.0.0.1"},                            // a proxy that names no one: its peer
	} {
		req, err := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/preview/box/%s/", b.base, b.devPort), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+b.admin)
		if tc.sent != "" {
			req.Header.Set("X-Forwarded-For", tc.sent)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(got) != tc.want {
			t.Errorf("X-Forwarded-For %q from the proxy: the dev server got %d %q, want %q", tc.sent, resp.StatusCode, got, tc.want)
		}
	}
}
