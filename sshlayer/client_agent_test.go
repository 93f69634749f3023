//go:build unix

package sshlayer

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/sshdtest"
)

// TestClientForwardAgent: a Host over a Client with
// ClientConfig.ForwardAgent forwards that agent to every process it
// spawns, as ssh -A does: ssh-add -l there lists the agent's key, every
// time (a spare session too asks). Without ForwardAgent, or on a server
// that does not allow it, a process has no SSH_AUTH_SOCK.
func TestClientForwardAgent(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	ag := sshdtest.StartAgent(t, ctx, t.TempDir())
	dial := func() (net.Conn, error) { return net.Dial("unix", ag.Sock) }
	allowing := srvStartServer(t, &ServerConfig{AgentForwarding: true})
	refusing := srvStartServer(t, nil)
	for _, tc := range []struct {
		name    string
		ts      *TestServer
		forward func() (net.Conn, error)
		want    bool
	}{
		{"forwarded", allowing, dial, true},
		{"no ForwardAgent", allowing, nil, false},
		{"server refuses", refusing, dial, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hostgate.New(hostgate.Info{}, func(ctx context.Context) (*hostgate.Connection, error) {
				var d netDialer
				conn, err := d.dial(ctx, tc.ts.Addr)
				if err != nil {
					return nil, err
				}
				c, err := ConnectConfig(ctx, conn, Auth{Signer: tc.ts.ClientSigner, HostKey: tc.ts.HostKey}, &ClientConfig{ForwardAgent: tc.forward})
				if err != nil {
					return nil, err
				}
				return c.Connection(nil), nil
			})
			defer func() { _ = h.Close() }()
			for range 2 {
				res, err := h.Exec(ctx, []string{"sh", "-c", `echo "[$SSH_AUTH_SOCK]"; ssh-add -l`}, hostgate.ExecOptions{})
				out := string(res.Stdout)
				if got := err == nil && !strings.HasPrefix(out, "[]") && strings.Contains(out, ag.Listed()); got != tc.want {
					t.Errorf("agent forwarded %v (%v %q %q), want %v", got, err, out, res.Stderr, tc.want)
				}
			}
		})
	}
}
