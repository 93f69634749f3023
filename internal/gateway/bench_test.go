package gateway

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/store"
)

// BenchmarkEcho measures echo throughput of one stream through the
// gateway relay (caller WebSocket → gateway → yamux over the agent's
// WebSocket → echo) against its peers in the same run: plain loopback TCP
// and one direct WebSocket hop. Compare ns/op (MB/s) across sub-benchmarks.
func BenchmarkEcho(b *testing.B) {
	const chunk = 32 << 10
	b.Run("tcp", func(b *testing.B) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.Copy(c, c)
			_ = c.Close()
		}()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		benchEcho(b, c, chunk)
		_ = c.Close()
		_ = ln.Close()
		wg.Wait()
	})
	b.Run("websocket", func(b *testing.B) {
		var wg sync.WaitGroup
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, err := bytestream.Accept(w, r, nil)
			if err != nil {
				return
			}
			wg.Add(1)
			defer wg.Done()
			_, _ = io.Copy(c, c)
			_ = c.Close()
		}))
		c, err := bytestream.WebSocket(b.Context(), ts.URL, nil)
		if err != nil {
			b.Fatal(err)
		}
		benchEcho(b, c, chunk)
		_ = c.Close()
		wg.Wait()
		ts.Close()
	})
	b.Run("gateway", func(b *testing.B) { benchGateway(b, nil, chunk) })
	b.Run("gateway-1MiB-window", func(b *testing.B) {
		benchGateway(b, &Config{TunnelMux: &bytestream.MuxConfig{StreamWindow: 1 << 20, MaxStreams: 1, AcceptBacklog: 1}}, chunk)
	})
}

func benchGateway(b *testing.B, cfg *Config, chunk int) {
	{
		e := newEnv(b, cfg)
		_, k := newKey(b)
		if _, err := e.dialAgent(e.token(store.RoleAgent, "h"), k, hostgate.Info{}); err != nil {
			b.Fatal(err)
		}
		c, err := e.relay("h", e.token(store.RoleAdmin))
		if err != nil {
			b.Fatal(err)
		}
		benchEcho(b, c, chunk)
		_ = c.Close()
	}
}

func benchEcho(b *testing.B, c net.Conn, chunk int) {
	buf := make([]byte, chunk)
	b.SetBytes(int64(chunk))
	b.ResetTimer()
	done := make(chan error, 1)
	go func() {
		_, err := io.CopyN(io.Discard, c, int64(chunk)*int64(b.N))
		done <- err
	}()
	for range b.N {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
}

// BenchmarkAgentConnect measures an agent's connect up to its tunnel's
// mux, with a key signature in the request as `agent connect` sends:
// "reconnect" for a host whose key is pinned (every connect after the
// first, and all of them after a gateway restart), "first" for a first
// enrollment, which the signature pins. Alongside, the two costs the
// gateway weighs on each: "verify" is one ed25519 key signature check,
// "host-read" one read of a host's row among 10,000.
func BenchmarkAgentConnect(b *testing.B) {
	e := newEnv(b, nil)
	signer, key := newKey(b)
	connect := func(b *testing.B, tok string) {
		h := http.Header{}
		h.Set("Authorization", "Bearer "+tok)
		h.Set(wire.HeaderHostKey, key)
		sig, err := wire.SignKey(signer, tok, "", time.Now())
		if err != nil {
			b.Fatal(err)
		}
		h.Set(wire.HeaderKeySignature, sig)
		conn, resp, err := bytestream.DialWebSocket(e.ctx, e.ts.URL+wire.ConnectPath, &bytestream.WebSocketOptions{Header: h})
		if err != nil {
			b.Fatal(err)
		}
		if resp.Header.Get(wire.HeaderKeyProof) != "" {
			b.Fatal("the gateway asks for an SSH key proof despite the signature")
		}
		sess, err := bytestream.MuxServer(conn, nil)
		if err != nil {
			b.Fatal(err)
		}
		_ = sess.Close()
	}
	for i := range 10000 {
		e.pin(fmt.Sprintf("other-%d", i), key)
	}
	b.Run("reconnect", func(b *testing.B) {
		tok := e.token(store.RoleAgent, "pinned")
		e.pin("pinned", key)
		for b.Loop() {
			connect(b, tok)
		}
	})
	b.Run("first", func(b *testing.B) {
		toks := make([]string, b.N)
		for i := range toks {
			toks[i] = e.token(store.RoleAgent, fmt.Sprintf("first-%d-%d", b.N, i))
		}
		b.ResetTimer()
		for i := range b.N {
			connect(b, toks[i])
		}
	})
	b.Run("verify", func(b *testing.B) {
		sig, err := wire.SignKey(signer, "tok", "", time.Now())
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if err := wire.VerifyKeySignature(signer.PublicKey(), sig, "tok", "", time.Now()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("host-read", func(b *testing.B) {
		for b.Loop() {
			if _, err := e.store.Host(e.ctx, "other-5000"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
