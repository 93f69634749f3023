package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/hostgate/hostgate/bench"
	"github.com/hostgate/hostgate/bytestream"
	gatewaypkg "github.com/hostgate/hostgate/internal/gateway"
)

// The relay layers alone: the bulk bytes through hostgate's WebSocket
// (bytestream) and through yamux over it, with no SSH, gateway or agent.
// A child hgbench dials this process as an agent dials the gateway (so
// gateway-to-agent bytes travel in server frames and agent-to-gateway ones
// in masked client frames, and yamux is set up as on a tunnel), against
// loopback TCP between the same two processes. With the SSH-layer-alone
// rows they split the full path's cost by layer.

// Environment of the layer child (set by layerProc only).
const (
	envLayerChild = "HGBENCH_LAYER_CHILD" // "1" runs the child instead of main
	envLayerTCP   = "HGBENCH_LAYER_TCP"   // the parent's TCP address
	envLayerURL   = "HGBENCH_LAYER_URL"   // the parent's HTTP base URL
)

// A transfer on a layer conn starts with a 9-byte header from the parent:
// the direction and the byte count.
const (
	layerToChild   = 't' // the parent writes n bytes; the child answers one byte once it has read them
	layerFromChild = 'f' // the child writes n bytes
)

// layerChild dials the parent three times (TCP, a WebSocket, a WebSocket
// carrying a yamux session whose streams the parent opens), serves
// transfers on each until the parent goes away or SIGTERM.
func layerChild() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var d net.Dialer
	tc, err := d.DialContext(ctx, "tcp", os.Getenv(envLayerTCP))
	if err != nil {
		return err
	}
	ws, err := bytestream.WebSocket(ctx, os.Getenv(envLayerURL)+"/ws", nil)
	if err != nil {
		return err
	}
	mws, err := bytestream.WebSocket(ctx, os.Getenv(envLayerURL)+"/mux", nil)
	if err != nil {
		return err
	}
	// The agent's side of a tunnel: a yamux server with the defaults.
	sess, err := bytestream.MuxServer(mws, nil)
	if err != nil {
		return err
	}
	done := make(chan struct{}, 3)
	serve := func(c net.Conn) { serveLayer(c); done <- struct{}{} }
	go serve(tc)
	go serve(ws)
	go func() {
		for {
			st, err := sess.Accept()
			if err != nil {
				done <- struct{}{}
				return
			}
			go serveLayer(st)
		}
	}()
	select {
	case <-ctx.Done():
	case <-done:
	}
	_ = tc.Close()
	_ = ws.Close()
	return sess.Close()
}

// serveLayer answers transfers on c until it fails or ends.
func serveLayer(c net.Conn) {
	defer c.Close()
	buf := make([]byte, len(chunk))
	var hdr [9]byte
	for {
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		n := int64(binary.BigEndian.Uint64(hdr[1:]))
		switch hdr[0] {
		case layerToChild:
			for n > 0 {
				k, err := c.Read(buf[:min(n, int64(len(buf)))])
				n -= int64(k)
				if err != nil {
					return
				}
			}
			if _, err := c.Write([]byte{1}); err != nil {
				return
			}
		case layerFromChild:
			if err := writeN(c, n); err != nil {
				return
			}
		default:
			return
		}
	}
}

// layerTransfer times n bytes one way over c: to the child, until it
// confirms it read them all, or from it, until they are all read here.
func layerTransfer(c net.Conn, op byte, n int64) (time.Duration, error) {
	var hdr [9]byte
	hdr[0] = op
	binary.BigEndian.PutUint64(hdr[1:], uint64(n))
	return timeIt(func() error {
		if _, err := c.Write(hdr[:]); err != nil {
			return err
		}
		if op == layerToChild {
			if err := writeN(c, n); err != nil {
				return err
			}
			_, err := io.ReadFull(c, hdr[:1])
			return err
		}
		buf := make([]byte, len(chunk))
		for got := int64(0); got < n; {
			k, err := c.Read(buf[:min(n-got, int64(len(buf)))])
			got += int64(k)
			if err != nil {
				return fmt.Errorf("read %d of %d bytes: %w", got, n, err)
			}
		}
		return nil
	})
}

// bulkLayers runs the relay-layer rows: the WebSocket alone and yamux over
// a WebSocket, each way, against loopback TCP.
func (e *env) bulkLayers(ctx context.Context) ([]*bench.Scenario, error) {
	tln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer tln.Close()
	hln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	wsc, muxc, tcpConns := make(chan net.Conn, 1), make(chan net.Conn, 1), make(chan net.Conn, 1)
	accept := func(ch chan<- net.Conn) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			// As the gateway accepts an agent's WebSocket.
			c, err := bytestream.Accept(w, r, &bytestream.AcceptOptions{ReadLimit: 256 << 10})
			if err == nil {
				ch <- c
			}
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/ws", accept(wsc))
	mux.Handle("/mux", accept(muxc))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(hln) }()
	defer func() {
		_ = srv.Close()
		// A conn that came after a failed wait.
		for _, ch := range []chan net.Conn{wsc, muxc, tcpConns} {
			select {
			case c := <-ch:
				_ = c.Close()
			default:
			}
		}
	}()

	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), envLayerChild+"=1", envLayerTCP+"="+tln.Addr().String(),
		envLayerURL+"=http://"+hln.Addr().String(), "GOMAXPROCS="+gomaxprocs())
	child, err := startProc("layer child", cmd)
	if err != nil {
		return nil, err
	}
	defer child.Stop()

	// The conns the child made are closed when the scenario ends.
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	wait := func(ch <-chan net.Conn) (net.Conn, error) {
		select {
		case c := <-ch:
			conns = append(conns, c)
			return c, nil
		case <-child.done:
			return nil, fmt.Errorf("layer child exited: %s", child.output())
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(30 * time.Second):
			return nil, fmt.Errorf("layer child did not connect: %s", child.output())
		}
	}
	go func() {
		if c, err := tln.Accept(); err == nil {
			tcpConns <- c
		}
	}()
	tc, err := wait(tcpConns)
	if err != nil {
		return nil, err
	}
	ws, err := wait(wsc)
	if err != nil {
		return nil, err
	}
	mws, err := wait(muxc)
	if err != nil {
		return nil, err
	}
	// The gateway's side of a tunnel.
	sess, err := bytestream.MuxClient(mws, gatewaypkg.DefaultTunnelMux())
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	// Cancelling the run (SIGINT) ends a transfer the child stopped.
	stop := context.AfterFunc(ctx, func() {
		for _, c := range conns {
			_ = c.Close()
		}
		_ = sess.Close()
	})
	defer stop()

	n := int64(e.cfg.bulkMiB) * mib
	rate := func(d time.Duration) float64 { return float64(n) / mib / d.Seconds() }
	const peer = "loopback TCP between the same two processes"
	row := func(layer, dir string) *bench.Scenario {
		return &bench.Scenario{Name: fmt.Sprintf("bulk stream %d MiB %s, %s alone", e.cfg.bulkMiB, dir, layer), Unit: "MiB/s",
			PeerName: peer, Better: bench.Higher}
	}
	const toAgent, fromAgent = "gateway to agent", "agent to gateway"
	wsTo, wsFrom := row("WebSocket", toAgent), row("WebSocket", fromAgent)
	wsTo.Note = "bytes through hostgate's WebSocket (bytestream) between this process, accepting as the gateway does, and a child that dials as an agent does: server frames to the agent, masked client frames from it; no SSH, yamux or gateway. The peer is plain TCP between the same processes"
	muxTo, muxFrom := row("yamux over WebSocket", toAgent), row("yamux over WebSocket", fromAgent)
	muxTo.Note = "the same, through one yamux stream set up as on an agent tunnel (a new stream per run)"
	for i := range e.cfg.pairs {
		for _, r := range []struct {
			s  *bench.Scenario
			op byte
		}{{wsTo, layerToChild}, {wsFrom, layerFromChild}, {muxTo, layerToChild}, {muxFrom, layerFromChild}} {
			var a, b time.Duration
			err := bench.Alternate(i, func() (err error) {
				c := ws
				if r.s == muxTo || r.s == muxFrom {
					st, err := sess.Open()
					if err != nil {
						return fmt.Errorf("yamux open: %w", err)
					}
					c = st
				}
				a, err = layerTransfer(c, r.op, n)
				if c != ws {
					_ = c.Close()
				}
				if err != nil {
					return fmt.Errorf("%s: %w", r.s.Name, err)
				}
				return nil
			}, func() (err error) {
				if b, err = layerTransfer(tc, r.op, n); err != nil {
					return fmt.Errorf("%s, TCP: %w", r.s.Name, err)
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
			r.s.Add(rate(a), rate(b))
		}
	}
	return []*bench.Scenario{wsTo, wsFrom, muxTo, muxFrom}, nil
}
