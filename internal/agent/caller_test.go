package agent

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/gateway"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/sshlayer"
)

// dialSSHFrom is dialSSH through front (the gateway's URL or one in front
// of it), returning the client and the local TCP address of its
// WebSocket: the caller's address as the gateway sees it.
func (g *gw) dialSSHFrom(front, token, host string) (*sshlayer.Client, *net.TCPAddr, error) {
	var rec gateway.HostRecord
	if err := g.api(token, "GET", "/v1/hosts/"+host, nil, &rec); err != nil {
		return nil, nil, err
	}
	key, cert, err := g.certificate(token, host)
	if err != nil {
		return nil, nil, err
	}
	var local atomic.Pointer[net.TCPAddr]
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			local.Store(c.LocalAddr().(*net.TCPAddr))
		}
		return c, err
	}
	defer tr.CloseIdleConnections()
	h := http.Header{}
	h.Set("Authorization", "Bearer "+token)
	conn, err := bytestream.WebSocket(g.ctx, front+"/v1/hosts/"+host+"/ssh", &bytestream.WebSocketOptions{Header: h, HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		return nil, nil, err
	}
	c, err := sshlayer.Connect(g.ctx, conn, sshlayer.Auth{Signer: key.Signer, Certificate: []byte(cert), HostKey: rec.HostKey})
	if err != nil {
		_ = conn.Close()
		return nil, nil, err
	}
	return c, local.Load(), nil
}

// agentEnd is the agent's end of its tunnel as SSH_CONNECTION names it,
// "IP PORT": the address the gateway saw its tunnel come from.
func (g *gw) agentEnd(t *testing.T) string {
	p := g.agentFrom.Load()
	if p == nil {
		t.Fatal("no agent tunnel reached the gateway")
	}
	ap, err := netip.ParseAddrPort(*p)
	if err != nil {
		t.Fatal(err)
	}
	return ap.Addr().String() + " " + strconv.Itoa(int(ap.Port()))
}

// TestConnectNamesTheCaller: an agent that reads caller preambles, behind
// a gateway that writes them (wire.HeaderCallerPreamble both ways), gives
// a command the caller's address and port in SSH_CONNECTION and
// SSH_CLIENT, as sshd does, and its log names the caller as the session
// starts (remote=, which said the tunnel's websocket/unknown-addr, then
// the gateway's URL), beside the gateway it dialed (gateway=). The
// server's end in them is the agent's end of its tunnel, its TCP address
// (it said UNKNOWN 65535), as sshd names the address a caller reached.
func TestConnectNamesTheCaller(t *testing.T) {
	g := newGW(t)
	var logs syncBuffer
	tunnels := runAgent(t, g.ctx, ConnectConfig{GatewayURL: g.ts.URL, Token: g.token(store.RoleAgent, "h1"), HostID: "h1", StateDir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	waitTunnel(t, tunnels, "h1")
	c, local, err := g.dialSSHFrom(g.ts.URL, g.token(store.RoleClient, "h1"), "h1")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := run(t, c, `echo "$SSH_CONNECTION"; echo "$SSH_CLIENT"`)
	port := strconv.Itoa(local.Port)
	end := g.agentEnd(t)
	_, endPort, _ := strings.Cut(end, " ")
	if want := "127.0.0.1 " + port + " " + end + "\n127.0.0.1 " + port + " " + endPort + "\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	select {
	case <-logs.has("remote=127.0.0.1:" + port):
	case <-time.After(30 * time.Second):
		t.Fatalf("the agent's log does not name the caller 127.0.0.1:%s:\n%s", port, logs.String())
	}
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `msg="ssh session"`) && (!strings.Contains(l, "remote=127.0.0.1:"+port) || !strings.Contains(l, "gateway="+g.ts.URL)) {
			t.Errorf("session log line without the caller 127.0.0.1:%s or the gateway %s: %s", port, g.ts.URL, l)
		}
	}
	if strings.Contains(logs.String(), "unknown-addr") {
		t.Errorf("the agent's log says unknown-addr:\n%s", logs.String())
	}
}

// TestConnectOlderAgentGetsNoCallerPreamble: an agent that does not say
// it reads caller preambles (an older one: the header is taken out of its
// request here) gets none, and its sessions work as before, with
// SSH_CONNECTION's caller UNKNOWN; the gateway's answer says nothing of them, so
// a newer agent behind an older gateway reads none either.
func TestConnectOlderAgentGetsNoCallerPreamble(t *testing.T) {
	g := newGW(t)
	var answered atomic.Value
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == wire.ConnectPath {
			r.Header.Del(wire.HeaderCallerPreamble)
			g.ts.Config.Handler.ServeHTTP(headerSpy{w, &answered}, r)
			return
		}
		g.ts.Config.Handler.ServeHTTP(w, r)
	}))
	defer front.Close()
	waitTunnel(t, runAgent(t, g.ctx, ConnectConfig{GatewayURL: front.URL, Token: g.token(store.RoleAgent, "h1"), HostID: "h1", StateDir: t.TempDir()}), "h1")
	if v, _ := answered.Load().(string); v != "" {
		t.Errorf("the gateway answered %s: %q to an agent that did not ask", wire.HeaderCallerPreamble, v)
	}
	c, _, err := g.dialSSHFrom(g.ts.URL, g.token(store.RoleClient, "h1"), "h1")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, want := run(t, c, `echo "$SSH_CONNECTION"`), "UNKNOWN 65535 "+g.agentEnd(t)+"\n"; got != want {
		t.Errorf("SSH_CONNECTION %q, want %q", got, want)
	}
}

// headerSpy records the upgrade's answer to HeaderCallerPreamble.
type headerSpy struct {
	http.ResponseWriter
	v *atomic.Value
}

func (h headerSpy) WriteHeader(code int) {
	h.v.Store(h.Header().Get(wire.HeaderCallerPreamble))
	h.ResponseWriter.WriteHeader(code)
}

func (h headerSpy) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// TestConnectKeyProofCarriesCallerPreamble: a first enrollment without
// the request's key signature (an agent whose clock is off) proves its
// key by an SSH key exchange on the tunnel's first stream, the gateway's
// own connection: with caller preambles agreed it carries one too
// (UNKNOWN), or the agent would close it and never be pinned.
func TestConnectKeyProofCarriesCallerPreamble(t *testing.T) {
	g := newGW(t)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(wire.HeaderKeySignature)
		g.ts.Config.Handler.ServeHTTP(w, r)
	}))
	defer front.Close()
	var logs syncBuffer
	waitTunnel(t, runAgent(t, g.ctx, ConnectConfig{GatewayURL: front.URL, Token: g.token(store.RoleAgent, "h1"), HostID: "h1", StateDir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}), "h1")
	if !strings.Contains(logs.String(), "gateway checks that this agent holds its host key") {
		t.Fatalf("no key proof ran:\n%s", logs.String())
	}
	c, local, err := g.dialSSHFrom(g.ts.URL, g.token(store.RoleClient, "h1"), "h1")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, want := run(t, c, `echo "$SSH_CONNECTION"`), "127.0.0.1 "+strconv.Itoa(local.Port)+" "+g.agentEnd(t)+"\n"; got != want {
		t.Errorf("SSH_CONNECTION %q, want %q", got, want)
	}
}
