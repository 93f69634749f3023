package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/testenv"
)

// TestConnectLogsResetsOnce: a gateway's address that resets every
// connection (a load balancer with no healthy target, as AWS's NLB does)
// fails each attempt with the same error but for its local port, a new
// ephemeral one each time ("read tcp 10.0.0.2:52278->…: connection reset
// by peer"): the agent logged a warning at every attempt, every 15-30 s
// for as long as the gateway was down, where its log promised to say it
// again only when the error changes.
func TestConnectLogsResetsOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const attempts = 6
	enough := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ln.Close()
	wg.Go(func() {
		for n := 1; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b := make([]byte, 4096)
			_, _ = c.Read(b) // the request, so that the close resets
			_ = c.(*net.TCPConn).SetLinger(0)
			_ = c.Close()
			if n == attempts {
				close(enough)
			}
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- Connect(ctx, &ConnectConfig{GatewayURL: "http://" + ln.Addr().String(), Token: "hg_x", StateDir: t.TempDir(),
			MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	}()
	select {
	case <-enough:
	case err := <-done:
		t.Fatalf("Connect returned: %v\n%s", err, logs.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if n := strings.Count(out, "connection reset by peer"); n != 1 {
		t.Errorf("%d attempts reset alike logged %d times, want once:\n%s", attempts, n, out)
	}
}

// TestConnectLogsExpiredCertificateOnce: a gateway whose TLS certificate
// expired (its renewal failed) refuses every attempt alike until someone
// renews it, but Go's error names the time of each attempt ("current
// time 2026-12-07T21:41:47Z is after …"): the agent logged a warning at
// every attempt whose second differed, every 15-30 s for as long as the
// certificate stayed expired.
func TestConnectLogsExpiredCertificateOnce(t *testing.T) {
	certPEM, keyPEM, leaf := testenv.SelfSigned(t, time.Now().Add(-time.Minute), "127.0.0.1")
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	const attempts = 8 // 200 ms apart at least: across a second
	var handshakes atomic.Int32
	enough := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew && handshakes.Add(1) == attempts {
			close(enough)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- Connect(ctx, &ConnectConfig{GatewayURL: srv.URL, RootCAs: roots, Token: "hg_x", StateDir: t.TempDir(),
			MinBackoff: 400 * time.Millisecond, MaxBackoff: 400 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	}()
	select {
	case <-enough:
	case err := <-done:
		t.Fatalf("Connect returned: %v\n%s", err, logs.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if n := strings.Count(out, "certificate has expired"); n != 1 {
		t.Errorf("%d attempts refused alike logged %d times, want once:\n%s", attempts, n, out)
	}
}
