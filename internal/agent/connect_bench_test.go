package agent

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/internal/gateway"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/internal/testenv"
	"github.com/hostgate/hostgate/sshlayer"
)

// BenchmarkSSHUpload streams bytes into `cat >/dev/null` over SSH to the
// same embedded server two ways in one run: through the gateway (caller
// WebSocket → relay → agent tunnel) and over direct loopback TCP. The
// ratio of the two is the gateway's cost.
func BenchmarkSSHUpload(b *testing.B) {
	const chunk = 32 << 10
	upload := func(b *testing.B, c *sshlayer.Client) {
		s, err := c.SSH().NewSession()
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		in, _ := s.StdinPipe()
		if err := s.Start("cat >/dev/null"); err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, chunk)
		b.SetBytes(chunk)
		b.ResetTimer()
		for range b.N {
			if _, err := in.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
		_ = in.Close()
		if err := s.Wait(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
	}
	b.Run("gateway", func(b *testing.B) {
		g := newGW(b)
		tunnels := make(chan string, 4)
		ctx, cancel := context.WithCancel(g.ctx)
		done := make(chan error, 1)
		go func() {
			done <- Connect(ctx, &ConnectConfig{GatewayURL: g.ts.URL, Token: g.token(store.RoleAgent, "h"), StateDir: b.TempDir(),
				OnTunnel: func(id string) { tunnels <- id }})
		}()
		defer func() { cancel(); <-done }()
		select {
		case <-tunnels:
		case <-time.After(30 * time.Second):
			b.Fatal("no tunnel")
		}
		c, err := g.dialSSH(g.token(store.RoleClient, "h"), "h")
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		upload(b, c)
	})
	b.Run("direct-tcp", func(b *testing.B) {
		hk, err := sshlayer.LoadOrCreateHostKey(filepath.Join(b.TempDir(), HostKeyFile))
		if err != nil {
			b.Fatal(err)
		}
		key, _ := sshlayer.GenerateSessionKey()
		srv, err := sshlayer.NewServer(&sshlayer.ServerConfig{HostKey: hk, AuthorizedKeys: []ssh.PublicKey{key.Signer.PublicKey()}})
		if err != nil {
			b.Fatal(err)
		}
		defer srv.Close()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		go func() { _ = srv.Serve(ln) }()
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		c, err := sshlayer.Connect(context.Background(), conn, sshlayer.Auth{Signer: key.Signer, HostKey: sshlayer.Fingerprint(hk.PublicKey())})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		upload(b, c)
	})
}

// callerAgents starts a gateway and two agents through it, host "with"
// reading caller preambles and host "without" not (its request header
// taken out, as an older agent's lacks it), and returns the gateway and,
// for each host, a client token and its SSH auth.
func callerAgents(b *testing.B) (*gw, map[string]string, map[string]sshlayer.Auth) {
	g := newGW(b)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(wire.HeaderCallerPreamble)
		g.ts.Config.Handler.ServeHTTP(w, r)
	}))
	b.Cleanup(front.Close)
	ctx, cancel := context.WithCancel(g.ctx)
	b.Cleanup(cancel)
	toks, auths := map[string]string{}, map[string]sshlayer.Auth{}
	for id, url := range map[string]string{"with": g.ts.URL, "without": front.URL} {
		tunnels := make(chan string, 4)
		done := make(chan error, 1)
		go func() {
			done <- Connect(ctx, &ConnectConfig{GatewayURL: url, Token: g.token(store.RoleAgent, id), StateDir: b.TempDir(),
				OnTunnel: func(id string) { tunnels <- id }})
		}()
		b.Cleanup(func() { cancel(); <-done })
		select {
		case <-tunnels:
		case <-time.After(30 * time.Second):
			b.Fatal("no tunnel")
		}
		tok := g.token(store.RoleClient, id)
		var rec gateway.HostRecord
		if err := g.api(tok, "GET", "/v1/hosts/"+id, nil, &rec); err != nil {
			b.Fatal(err)
		}
		key, cert, err := g.certificate(tok, id)
		if err != nil {
			b.Fatal(err)
		}
		toks[id], auths[id] = tok, sshlayer.Auth{Signer: key.Signer, Certificate: []byte(cert), HostKey: rec.HostKey}
	}
	return g, toks, auths
}

// BenchmarkSSHConnectThroughGateway: a new SSH connection through the
// gateway (caller WebSocket, relay stream, handshake, one exec of true),
// with the stream's caller preamble and without it: the preamble's cost
// per connection. Gateway, agent and client run in this process: its CPU
// time per op (cpu-µs/op) is the whole path's, steadier than wall time on
// a busy machine.
func BenchmarkSSHConnectThroughGateway(b *testing.B) {
	g, toks, auths := callerAgents(b)
	for _, id := range []string{"with", "without"} {
		b.Run("preamble="+id, func(b *testing.B) {
			cpu := testenv.CPUTime(b)
			defer func() { testenv.ReportCPU(b, cpu) }()
			for range b.N {
				c, err := g.connectWith(toks[id], id, auths[id])
				if err != nil {
					b.Fatal(err)
				}
				s, err := c.SSH().NewSession()
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Run("true"); err != nil {
					b.Fatal(err)
				}
				_ = c.Close()
			}
		})
	}
}

// BenchmarkSSHExecThroughGateway: exec round trips of true over one SSH
// connection through the gateway, with and without the caller preamble
// on its stream: the cost of the preamble's wrappers (the gateway's first
// write, the agent's read of the rest) on every byte after it.
func BenchmarkSSHExecThroughGateway(b *testing.B) {
	g, toks, auths := callerAgents(b)
	for _, id := range []string{"with", "without"} {
		b.Run("preamble="+id, func(b *testing.B) {
			c, err := g.connectWith(toks[id], id, auths[id])
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			b.ResetTimer()
			cpu := testenv.CPUTime(b)
			defer func() { testenv.ReportCPU(b, cpu) }()
			for range b.N {
				s, err := c.SSH().NewSession()
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Run("true"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
