package bytestream_test

// Fuzz targets with the configurations production runs, not the package's
// defaults: a deadlock in internal/yamux showed only with the gateway's
// settings (RecvBudget, CloseEndsReads), never with the test defaults.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/gateway"
)

// gatewayMux is an agent tunnel's configuration at the gateway
// (Server.tunnelMux over Config.withDefaults): DefaultTunnelMux with the
// RelayMemory budget and a misuse hook, which must not block.
func gatewayMux(b *bytestream.RecvBudget, misuse *atomic.Int64) *bytestream.MuxConfig {
	mc := *gateway.DefaultTunnelMux()
	mc.RecvBudget = b
	mc.OnMisuse = func(bytestream.MuxMisuse) { misuse.Add(1) }
	return &mc
}

// agentMux is a tunnel's configuration at the agent (serveMux with the
// nil config connect.go and serve_cmd.go pass).
func agentMux() *bytestream.MuxConfig { return &bytestream.MuxConfig{CloseEndsReads: true} }

// yamux frames, for seeds.
func yframe(typ uint8, flags uint16, id uint32, body []byte, length uint32) []byte {
	h := make([]byte, 12)
	h[1] = typ
	binary.BigEndian.PutUint16(h[2:4], flags)
	binary.BigEndian.PutUint32(h[4:8], id)
	binary.BigEndian.PutUint32(h[8:12], length)
	return append(h, body...)
}

// tunnelSeeds are yamux inputs from a peer: streams opened (by either
// side's parity), data, a FIN, a RST, a ping, window updates, a go-away.
func tunnelSeeds() [][]byte {
	var s [][]byte
	var a []byte
	for id := uint32(1); id <= 6; id++ {
		a = append(a, yframe(1, 1, id, nil, 0)...)
		a = append(a, yframe(0, 0, id, []byte("hello"), 5)...)
	}
	a = append(a, yframe(0, 4, 1, nil, 0)...)
	a = append(a, yframe(1, 8, 2, nil, 0)...)
	a = append(a, yframe(2, 1, 0, nil, 7)...)
	a = append(a, yframe(1, 0, 1, nil, 1<<20)...)
	a = append(a, yframe(3, 0, 0, nil, 0)...)
	s = append(s, a)
	// The gateway's stream 1 answered, written to, reset and closed.
	var b []byte
	b = append(b, yframe(1, 2, 1, nil, 0)...)
	b = append(b, yframe(0, 0, 1, bytes.Repeat([]byte{'x'}, 300), 300)...)
	b = append(b, yframe(1, 0, 1, nil, 4<<20)...)
	b = append(b, yframe(0, 8, 1, nil, 0)...)
	b = append(b, yframe(0, 4, 1, nil, 0)...)
	s = append(s, b)
	s = append(s, yframe(0, 1|8, 2, []byte("abc"), 3))
	s = append(s, yframe(0, 1, 2, nil, 1<<31))
	for range 40 { // empty window updates: the misuse hook
		s[len(s)-1] = append(s[len(s)-1], yframe(1, 0, 2, nil, 1)...)
	}
	return s
}

// tunnelEnd runs sess, as a tunnel's end does with its streams (opens one
// if opens, accepts any, reads and writes each and closes it), until its
// peer has left, and fails unless the session and every goroutine serving
// it end, and budget (if any) holds and reserves nothing after.
func tunnelEnd(t *testing.T, sess *bytestream.MuxSession, opens bool, budget *bytestream.RecvBudget, peerDone <-chan struct{}) {
	t.Helper()
	var wg sync.WaitGroup
	use := func(s net.Conn) {
		defer wg.Done()
		_, _ = s.Write([]byte("SSH-2.0-x\r\n"))
		_, _ = io.Copy(io.Discard, s)
		_ = s.Close()
	}
	if opens {
		if s, err := sess.Open(); err == nil {
			wg.Add(1)
			go use(s)
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			s, err := sess.AcceptStream()
			if err != nil {
				return
			}
			wg.Add(1)
			go use(s)
		}
	}()
	ended := make(chan struct{})
	go func() {
		<-peerDone
		<-sess.CloseChan()
		_ = sess.Close()
		wg.Wait()
		close(ended)
	}()
	select {
	case <-ended:
	case <-time.After(20 * time.Second):
		t.Fatal("the tunnel's session, or a goroutine serving it, still running 20 s after its peer left")
	}
	if budget != nil {
		if h, r := budget.Held(), budget.Reserved(); h != 0 || r != 0 {
			t.Fatalf("after the tunnel ended its RecvBudget holds %d and reserves %d bytes, want 0 and 0", h, r)
		}
	}
}

// pipeTunnel runs a tunnel end made by mk over a pipe whose other end
// writes in and leaves.
func pipeTunnel(t *testing.T, in []byte, mk func(net.Conn) (*bytestream.MuxSession, error), opens bool, budget *bytestream.RecvBudget) {
	peer, conn := net.Pipe()
	sess, err := mk(conn)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	drained := make(chan struct{})
	go func() { defer close(drained); _, _ = io.Copy(io.Discard, peer) }()
	go func() {
		defer close(done)
		_ = peer.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = peer.Write(in)
		_ = peer.Close()
		<-drained
	}()
	tunnelEnd(t, sess, opens, budget, done)
}

// FuzzMuxGatewayTunnel is an agent's tunnel at the gateway (MuxClient with
// the gateway's configuration, a relay's stream opened on it) fed
// whatever a hostile agent sends.
func FuzzMuxGatewayTunnel(f *testing.F) {
	for _, s := range tunnelSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		b := bytestream.NewRecvBudget(gateway.DefaultRelayMemory)
		var misuse atomic.Int64
		pipeTunnel(t, in, func(c net.Conn) (*bytestream.MuxSession, error) {
			return bytestream.MuxClient(c, gatewayMux(b, &misuse))
		}, true, b)
	})
}

// FuzzMuxAgentTunnel is a tunnel at the agent (MuxServer with the agent's
// configuration, every stream served) fed whatever a hostile gateway, or
// what claims to be one, sends.
func FuzzMuxAgentTunnel(f *testing.F) {
	for _, s := range tunnelSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		pipeTunnel(t, in, func(c net.Conn) (*bytestream.MuxSession, error) {
			return bytestream.MuxServer(c, agentMux())
		}, false, nil)
	})
}

// wsFrame is one WebSocket frame; a client's is masked (RFC 6455 5.3).
func wsFrame(fin bool, op byte, payload []byte, masked bool) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	out := []byte{b0}
	var m byte
	if masked {
		m = 0x80
	}
	switch n := len(payload); {
	case n < 126:
		out = append(out, m|byte(n))
	case n < 1<<16:
		out = append(out, m|126, byte(n>>8), byte(n))
	default:
		out = append(out, m|127)
		out = binary.BigEndian.AppendUint64(out, uint64(n))
	}
	p := bytes.Clone(payload)
	if masked {
		key := [4]byte{0x12, 0x34, 0x56, 0x78}
		out = append(out, key[:]...)
		for i := range p {
			p[i] ^= key[i%4]
		}
	}
	return append(out, p...)
}

// wsSeeds wrap the tunnel seeds in WebSocket frames: whole messages, a
// message in fragments, a ping, a text message, a close with a reason.
func wsSeeds(masked bool) [][]byte {
	var out [][]byte
	for _, s := range tunnelSeeds() {
		out = append(out, wsFrame(true, 2, s, masked))
	}
	y := tunnelSeeds()[0]
	frag := wsFrame(false, 2, y[:20], masked)
	frag = append(frag, wsFrame(true, 9, []byte("p"), masked)...)
	frag = append(frag, wsFrame(true, 0, y[20:], masked)...)
	out = append(out, frag)
	out = append(out, wsFrame(true, 1, []byte("text"), masked))
	out = append(out, append(wsFrame(true, 2, y, masked), wsFrame(true, 8, []byte{0x03, 0xe8, 'b', 'y', 'e'}, masked)...))
	out = append(out, wsFrame(true, 2, make([]byte, 300<<10), masked)) // beyond the gateway's ReadLimit
	return out
}

const wsKey = "dGhlIHNhbXBsZSBub25jZQ=="

func wsAccept(key string) string {
	h := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(h[:])
}

// FuzzWebSocketGatewayTunnel is FuzzMuxGatewayTunnel under the gateway's
// WebSocket (Accept with its ReadLimit): in is what the agent's side of
// the TCP connection sends after the handshake, WebSocket frames and all.
func FuzzWebSocketGatewayTunnel(f *testing.F) {
	for _, s := range wsSeeds(true) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		b := bytestream.NewRecvBudget(gateway.DefaultRelayMemory)
		var misuse atomic.Int64
		type accepted struct {
			sess *bytestream.MuxSession
			err  error
		}
		got := make(chan accepted, 1)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// The gateway's Config.ReadLimit default (connect.go, relay.go).
			conn, err := bytestream.Accept(w, r, &bytestream.AcceptOptions{ReadLimit: 256 << 10})
			if err != nil {
				got <- accepted{err: err}
				return
			}
			sess, err := bytestream.MuxClient(conn, gatewayMux(b, &misuse))
			got <- accepted{sess, err}
		}))
		defer srv.Close()
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		req := "GET /v1/agents/connect HTTP/1.1\r\nHost: gw\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
			"Sec-WebSocket-Key: " + wsKey + "\r\nSec-WebSocket-Version: 13\r\n\r\n"
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("handshake answered %s", resp.Status)
		}
		a := <-got
		if a.err != nil {
			t.Fatal(a.err)
		}
		done := make(chan struct{})
		drained := make(chan struct{})
		go func() { defer close(drained); _, _ = io.Copy(io.Discard, br) }()
		go func() {
			defer close(done)
			_, _ = c.Write(in)
			_ = c.Close()
			<-drained
		}()
		tunnelEnd(t, a.sess, true, b, done)
	})
}

// FuzzWebSocketAgentTunnel is FuzzMuxAgentTunnel under the agent's
// WebSocket (DialWebSocket with the options connect.go dials with): in is
// what the gateway's side sends after its 101, frames and all.
func FuzzWebSocketAgentTunnel(f *testing.F) {
	for _, s := range wsSeeds(false) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		done := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer close(done)
			c, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer c.Close()
			_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
				"Sec-WebSocket-Accept: " + wsAccept(r.Header.Get("Sec-WebSocket-Key")) + "\r\n\r\n")
			_, _ = brw.Write(in)
			_ = brw.Flush()
			// The peer leaves once it has said its piece; what the agent
			// still sends is read, as a closing TCP conn would.
			_ = c.(*net.TCPConn).CloseWrite()
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, _ = io.Copy(io.Discard, brw)
		}))
		defer srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		u := strings.Replace(srv.URL, "http://", "ws://", 1) + "/v1/agents/connect"
		conn, _, err := bytestream.DialWebSocket(ctx, u, &bytestream.WebSocketOptions{HandshakeTimeout: 10 * time.Second})
		if err != nil {
			<-done
			return // the handshake itself is the server's answer, not under test
		}
		sess, err := bytestream.MuxServer(conn, agentMux())
		if err != nil {
			t.Fatal(err)
		}
		tunnelEnd(t, sess, false, nil, done)
	})
}
