//go:build unix

package client

import (
	"context"
	"crypto/x509"
	"net"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/testenv"
)

// slowGateway is a TCP proxy to addr whose every byte arrives delay
// after it was sent, both ways: a gateway delay away. It returns its
// address. Its connections are accepted at once: a TCP connect, a round
// trip on a real link, costs none here.
func slowGateway(tb testing.TB, addr string, delay time.Duration) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	tb.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			near, err := ln.Accept()
			if err != nil {
				return
			}
			far, err := net.Dial("tcp", addr)
			if err != nil {
				_ = near.Close()
				continue
			}
			testenv.DelayedCopy(&wg, delay, far, near, nil)
			testenv.DelayedCopy(&wg, delay, near, far, nil)
		}
	})
	return ln.Addr().String()
}

// BenchmarkDialLatency: Dial to a host through the relay, from a program
// 25 ms one way from its gateway, in round trips (rtt/op, the median
// dial's; rtt-least/op). fresh is the package's Dial, a client of its own
// (its connections dialed, a certificate asked for); again is a Client's
// second Dial of the host (its certificate kept, the gateway's connection
// idle); tls=on the same to a gateway serving TLS (each new connection a
// TLS 1.3 handshake, a round trip). Each of the gateway's answers and the SSH setup behind them is a
// round trip a program far from its gateway feels. Run it with
// -benchtime=10x.
func BenchmarkDialLatency(b *testing.B) {
	const delay = 25 * time.Millisecond
	g := newDirectGateway(b, func() []string { return nil })
	tlsSrv := httptest.NewTLSServer(g.handler)
	defer tlsSrv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(tlsSrv.Certificate())
	run := func(b *testing.B, dial func(ctx context.Context) (func(), error)) {
		var spent []time.Duration
		for b.Loop() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			t0 := time.Now()
			done, err := dial(ctx)
			spent = append(spent, time.Since(t0))
			cancel()
			if err != nil {
				b.Fatal(err)
			}
			done()
		}
		testenv.ReportRoundTrips(b, spent, delay)
	}
	for _, tls := range []bool{false, true} {
		url, opts := "http://"+slowGateway(b, g.url[len("http://"):], delay), (*Options)(nil)
		if tls {
			url, opts = "https://"+slowGateway(b, tlsSrv.Listener.Addr().String(), delay), &Options{RootCAs: roots}
		}
		name := map[bool]string{false: "tls=off", true: "tls=on"}[tls]
		b.Run(name+"/client=fresh", func(b *testing.B) {
			run(b, func(ctx context.Context) (func(), error) {
				c, err := New(url, "tok", opts)
				if err != nil {
					return nil, err
				}
				h, err := c.Dial(ctx, "box")
				if err != nil {
					c.CloseIdleConnections()
					return nil, err
				}
				return func() { _ = h.Close(); c.CloseIdleConnections() }, nil
			})
		})
		b.Run(name+"/client=again", func(b *testing.B) {
			c, err := New(url, "tok", opts)
			if err != nil {
				b.Fatal(err)
			}
			defer c.CloseIdleConnections()
			h, err := c.Dial(b.Context(), "box")
			if err != nil {
				b.Fatal(err)
			}
			_ = h.Close()
			run(b, func(ctx context.Context) (func(), error) {
				h, err := c.Dial(ctx, "box")
				if err != nil {
					return nil, err
				}
				return func() { _ = h.Close() }, nil
			})
		})
	}
}
