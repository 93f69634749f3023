package gateway

import (
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/store"
)

// FuzzHostileAgentTunnel is an agent's tunnel through the whole gateway
// (its default configuration: the tunnel's mux settings, the relay budget,
// misuse counted), whose agent, once connected, sends whatever the input
// holds as its side of the multiplexer, while a caller's SSH relay to the
// host is open if relay is set; then the agent leaves. The host must go
// offline with it, the caller's relay end, and the gateway still answer.
func FuzzHostileAgentTunnel(f *testing.F) {
	e := newEnv(f, nil)
	admin := e.token(store.RoleAdmin)
	_, key := newKey(f)
	e.pin("h", key) // proven before: no key proof, the input is the tunnel's
	agent := e.token(store.RoleAgent, "h")
	frame := func(typ uint8, flags uint16, id uint32, body []byte, length uint32) []byte {
		h := make([]byte, 12)
		h[1] = typ
		binary.BigEndian.PutUint16(h[2:4], flags)
		binary.BigEndian.PutUint32(h[4:8], id)
		binary.BigEndian.PutUint32(h[8:12], length)
		return append(h, body...)
	}
	var a []byte // the relay's stream answered, written to, closed
	a = append(a, frame(1, 2, 1, nil, 0)...)
	a = append(a, frame(0, 0, 1, []byte("SSH-2.0-x\r\n"), 11)...)
	a = append(a, frame(0, 4, 1, nil, 0)...)
	f.Add(a, true)
	var b []byte // streams of its own, empty updates, a ping, a go-away
	b = append(b, frame(1, 1, 2, nil, 0)...)
	b = append(b, frame(1, 1, 4, nil, 0)...)
	b = append(b, frame(1, 0, 1, nil, 1)...)
	b = append(b, frame(2, 1, 0, nil, 9)...)
	b = append(b, frame(3, 0, 0, nil, 1)...)
	f.Add(b, true)
	f.Add(frame(1, 1, 1, nil, 0), true) // the relay's id, opened by the agent
	f.Add([]byte{0xff, 0, 0}, false)
	f.Fuzz(func(t *testing.T, in []byte, relay bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		h := http.Header{}
		h.Set("Authorization", "Bearer "+agent)
		h.Set(wire.HeaderHostKey, key)
		h.Set(wire.HeaderInfo, wire.EncodeInfo(hostgate.Info{}))
		conn, _, err := bytestream.DialWebSocket(ctx, e.ts.URL+wire.ConnectPath, &bytestream.WebSocketOptions{Header: h})
		if err != nil {
			t.Fatalf("agent's connect: %v", err)
		}
		defer conn.Close()
		up := e.srv.Tunnels().Done("h")
		relayEnded := make(chan struct{})
		if relay {
			rh := http.Header{}
			rh.Set("Authorization", "Bearer "+admin)
			rc, err := bytestream.WebSocket(ctx, e.ts.URL+"/v1/hosts/h/ssh", &bytestream.WebSocketOptions{Header: rh})
			if err != nil {
				close(relayEnded) // the tunnel was not (or no longer) up: answered, not relayed
			} else {
				defer rc.Close()
				go func() { defer close(relayEnded); _, _ = io.Copy(io.Discard, rc) }()
			}
		} else {
			close(relayEnded)
		}
		_, _ = conn.Write(in)
		_ = conn.Close()
		if up != nil {
			select {
			case <-up:
			case <-ctx.Done():
				t.Fatal("h's tunnel still up 30 s after its agent left")
			}
		}
		select {
		case <-relayEnded:
		case <-ctx.Done():
			t.Fatal("the caller's relay to h still open 30 s after its agent left")
		}
		if code, body := e.callCtx(ctx, "GET", "/v1/hosts/h", admin); code != http.StatusOK {
			t.Fatalf("after h's agent left: GET /v1/hosts/h %d %s", code, body)
		}
	})
}

// callCtx is a GET of path with token, bound to ctx (the env's ends 60 s
// into a fuzz run).
func (e *env) callCtx(ctx context.Context, method, path, token string) (int, string) {
	req, _ := http.NewRequestWithContext(ctx, method, e.ts.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	return res.StatusCode, string(b)
}

// FuzzHostileAgentKeyProof is an agent's first connection for a host
// whose key is not pinned, through the whole gateway: the gateway asks it
// to prove its host key with an SSH handshake on a stream it opens, and
// the agent answers with whatever the input holds as its side of the
// multiplexer, then leaves. The key must stay unpinned (nothing but the
// key's holder can prove it), and the host's proof slot must be free once
// the agent has gone, so that its next dial is not refused busy.
func FuzzHostileAgentKeyProof(f *testing.F) {
	e := newEnv(f, nil)
	_, key := newKey(f)
	agent := e.token(store.RoleAgent, "p")
	frame := func(typ uint8, flags uint16, id uint32, body []byte, length uint32) []byte {
		h := make([]byte, 12)
		h[1] = typ
		binary.BigEndian.PutUint16(h[2:4], flags)
		binary.BigEndian.PutUint32(h[4:8], id)
		binary.BigEndian.PutUint32(h[8:12], length)
		return append(h, body...)
	}
	var a []byte // the proof's stream answered with an SSH server's first words
	a = append(a, frame(1, 2, 1, nil, 0)...)
	a = append(a, frame(0, 0, 1, []byte("SSH-2.0-x\r\n"), 11)...)
	a = append(a, frame(0, 0, 1, []byte("\x00\x00\x00\x0c\x0a\x14abcdefghij"), 16)...)
	f.Add(a)
	f.Add(append(frame(1, 2, 1, nil, 0), frame(1, 8, 1, nil, 0)...)) // reset
	f.Add(frame(1, 1, 1, nil, 0))                                    // the proof's id, opened by the agent
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		defer cancel()
		h := http.Header{}
		h.Set("Authorization", "Bearer "+agent)
		h.Set(wire.HeaderHostKey, key)
		h.Set(wire.HeaderInfo, wire.EncodeInfo(hostgate.Info{}))
		conn, resp, err := bytestream.DialWebSocket(ctx, e.ts.URL+wire.ConnectPath, &bytestream.WebSocketOptions{Header: h})
		if err != nil {
			t.Fatalf("agent's connect: %v", err)
		}
		if resp.Header.Get(wire.HeaderKeyProof) == "" {
			t.Fatal("the gateway took an unproven key without asking for its proof")
		}
		_, _ = conn.Write(in)
		_ = conn.Close()
		for { // the proof ends with the tunnel; its slot with it
			if _, held := e.srv.proving.Load("p"); !held {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatal("host p's key proof slot still held 40 s after its agent left: its next dial is refused busy")
			case <-time.After(time.Millisecond):
			}
		}
		if hs, err := e.store.Host(ctx, "p"); err == nil && hs.HostKey != "" {
			t.Fatalf("host p's key %q pinned without a proof", hs.HostKey)
		}
	})
}
