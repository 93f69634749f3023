package agent

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/gateway/wire"
)

// TestDirectAdvertisesNewAddresses: with --direct :PORT, the agent
// advertises this machine's addresses as they are at each attempt to
// connect. They were looked up once, at the start, so after a DHCP lease
// or a laptop's new network gave the machine another address, every
// tunnel after went on telling the gateway the old one: callers dialed
// an address the agent no longer had, and direct sessions were not used
// again until the agent restarted.
func TestDirectAdvertisesNewAddresses(t *testing.T) {
	var (
		mu  sync.Mutex
		own = "192.0.2.10"
	)
	old := interfaceAddrs
	interfaceAddrs = func() ([]net.Addr, error) {
		mu.Lock()
		defer mu.Unlock()
		return []net.Addr{&net.IPNet{IP: net.ParseIP(own), Mask: net.CIDRMask(24, 32)}}, nil
	}
	t.Cleanup(func() { interfaceAddrs = old })

	// A gateway that is down (503) and notes what each attempt advertised.
	seen := make(chan string, 64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case seen <- r.Header.Get(wire.HeaderDirect):
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":{"code":"unavailable","message":"down"}}`))
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- Connect(ctx, &ConnectConfig{GatewayURL: srv.URL, Token: "hg_x", StateDir: t.TempDir(), Direct: "0.0.0.0:0",
			MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	}()
	first := <-seen
	if !strings.HasPrefix(first, "192.0.2.10:") {
		t.Fatalf("first attempt advertised %q, want 192.0.2.10", first)
	}
	mu.Lock()
	own = "198.51.100.7" // the machine's new address
	mu.Unlock()
	<-seen // one attempt may have looked up the old one already
	<-seen
	last := <-seen
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(last, "198.51.100.7:") {
		t.Errorf("after the machine's address changed the agent advertised %q, want 198.51.100.7\n%s", last, logs.String())
	}
}
