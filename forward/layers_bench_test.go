//go:build unix

package forward

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/client"
	"github.com/hostgate/hostgate/forward/internal/forwardtest"
	"github.com/hostgate/hostgate/internal/agent"
	"github.com/hostgate/hostgate/internal/gatewaytest"
	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/internal/testenv"
	"github.com/hostgate/hostgate/sshlayer"
)

// layerRequest and layerAnswer are the small exchange each op makes on a new
// forwarded connection, the shape of the harness's HTTP GET with
// "Connection: close".
var (
	layerRequest = []byte("GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
	layerAnswer  = []byte("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n")
)

// answerOnce reads one request and answers it, then the connection closes
// (forwardtest.Serve closes it when this returns).
func answerOnce(c net.Conn) {
	buf := make([]byte, 512)
	if _, err := c.Read(buf); err != nil {
		return
	}
	_, _ = c.Write(layerAnswer)
}

// layerDial opens a forwarded connection to addr over one stack.
type layerDial func(ctx context.Context, addr string) (net.Conn, error)

// exchange makes one request on a new forwarded connection and reads the
// whole answer, as an HTTP client does (it does not wait for the close).
func exchange(ctx context.Context, dial layerDial, addr string) error {
	c, err := dial(ctx, addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Write(layerRequest); err != nil {
		return err
	}
	buf := make([]byte, len(layerAnswer))
	_, err = io.ReadFull(c, buf)
	return err
}

// BenchmarkForwardConnect is the per-layer breakdown of the harness's
// forward scenario: each op is a new forwarded connection (a new
// direct-tcpip channel) carrying one small request and answer. Layers, in
// the same run: plain TCP to the target; our SSH server over loopback TCP;
// the same over a yamux stream (the agent's tunnel without WebSocket); over
// one WebSocket (no relay); the whole path, client → WebSocket → gateway
// relay → yamux over WebSocket → agent, all in this process (the harness
// runs them as three). The
// sequential sub-benchmarks give the latency of one connection (ns/op);
// the par4 ones keep four in flight (req/s).
func BenchmarkForwardConnect(b *testing.B) {
	target := forwardtest.Serve(b, answerOnce)
	layers := []struct {
		name string
		dial func(b *testing.B) layerDial
	}{
		{"tcp", func(*testing.B) layerDial {
			var d net.Dialer
			return func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
		}},
		{"ssh", sshLayer},
		{"ssh-yamux", yamuxLayer},
		{"ssh-ws", wsLayer},
		{"gateway", gatewayLayer},
	}
	for _, l := range layers {
		dial := l.dial(b)
		b.Run(l.name, func(b *testing.B) {
			ctx := testCtx(b)
			cpu := testenv.CPUTime(b)
			for b.Loop() {
				if err := exchange(ctx, dial, target); err != nil {
					b.Fatal(err)
				}
			}
			testenv.ReportCPU(b, cpu)
		})
		b.Run(l.name+"-par4", func(b *testing.B) {
			ctx := testCtx(b)
			b.SetParallelism(4)
			cpu := testenv.CPUTime(b)
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := exchange(ctx, dial, target); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
			testenv.ReportCPU(b, cpu)
		})
	}
}

// sshLayer connects our SSH client to our SSH server over loopback TCP.
func sshLayer(b *testing.B) layerDial {
	sc := sshTCPClient(b)
	return func(ctx context.Context, addr string) (net.Conn, error) { return sc.Dial(ctx, "tcp", addr) }
}

func sshOver(b *testing.B, conn net.Conn, ts *sshlayer.TestServer) layerDial {
	sc := sshClient(b, conn, ts)
	return func(ctx context.Context, addr string) (net.Conn, error) { return sc.Dial(ctx, "tcp", addr) }
}

// yamuxLayer serves our SSH server on the streams of a yamux session over
// loopback TCP (agent.ServeMux) and connects over one stream.
func yamuxLayer(b *testing.B) layerDial {
	ts, err := sshlayer.StartTestServer()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ts.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		c, err := ln.Accept()
		_ = ln.Close()
		if err != nil {
			return
		}
		_ = agent.ServeMux(ctx, c, ts.Server, nil)
	})
	b.Cleanup(func() { cancel(); _ = ln.Close(); wg.Wait() })
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	sess, err := bytestream.MuxClient(conn, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sess.Close() })
	st, err := sess.OpenStream()
	if err != nil {
		b.Fatal(err)
	}
	return sshOver(b, st, ts)
}

// gatewayLayer runs a gateway and an agent in this process, the agent
// connected over its WebSocket tunnel, and dials the host with the client
// package: the path the harness's forward scenario measures.
func gatewayLayer(b *testing.B) layerDial {
	ctx, cancel := context.WithCancel(context.Background())
	log := slog.New(slog.DiscardHandler)
	gw := gatewaytest.New(b, ctx, log, nil)
	st := gw.Store
	srv := httptest.NewServer(gw.Handler())
	agentTok, _, err := st.CreateToken(ctx, store.TokenSpec{Role: store.RoleAgent, Hosts: []string{"h"}, Name: "agent"})
	if err != nil {
		b.Fatal(err)
	}
	adminTok, _, err := st.CreateToken(ctx, store.TokenSpec{Role: store.RoleAdmin, Name: "admin"})
	if err != nil {
		b.Fatal(err)
	}
	agentDir := b.TempDir()
	up := make(chan struct{}, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = agent.Connect(ctx, &agent.ConnectConfig{
			GatewayURL: srv.URL, Token: agentTok, HostID: "h", StateDir: agentDir, Logger: log,
			OnTunnel: func(string) {
				select {
				case up <- struct{}{}:
				default:
				}
			},
		})
	})
	var h *hostgate.Host
	b.Cleanup(func() {
		if h != nil {
			_ = h.Close()
		}
		cancel()
		wg.Wait()
		srv.Close()
	})
	select {
	case <-up:
	case <-time.After(60 * time.Second):
		b.Fatal("agent tunnel not up in 60 s")
	}
	dctx, dcancel := context.WithTimeout(ctx, 60*time.Second)
	defer dcancel()
	h, err = client.Dial(dctx, srv.URL, adminTok, "h")
	if err != nil {
		b.Fatal(err)
	}
	return func(ctx context.Context, addr string) (net.Conn, error) { return h.Dial(ctx, "tcp", addr) }
}

// wsLayer serves our SSH server on one WebSocket (no relay, no yamux).
func wsLayer(b *testing.B) layerDial {
	ts, err := sshlayer.StartTestServer()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ts.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := bytestream.Accept(w, r, nil)
		if err != nil {
			return
		}
		wg.Go(func() { _ = ts.Server.ServeConn(ctx, c) })
	}))
	b.Cleanup(func() { cancel(); srv.Close(); wg.Wait() })
	conn, err := bytestream.WebSocket(testCtx(b), srv.URL, nil)
	if err != nil {
		b.Fatal(err)
	}
	return sshOver(b, conn, ts)
}
