//go:build linux

package sshlayer

import (
	"bufio"
	"context"
	"io"
	"net"
	"testing"

	"github.com/hostgate/hostgate"
)

// TestForwardRemoteAddr: a remote forward's Addr is where the host
// listens, which a program on the host can connect to: its loopback for
// ":0" (under sshd's default GatewayPorts no, which the agent follows),
// and ::1 for "[::1]:0", against the agent and sshd alike. x/crypto's
// listener said 0.0.0.0 for ":0", as if the host listened on every
// interface, and 127.0.0.2 for "127.0.0.2:0", where it listens on
// 127.0.0.1.
func TestForwardRemoteAddr(t *testing.T) {
	ipv6 := false
	if ln, err := net.Listen("tcp", "[::1]:0"); err == nil {
		_ = ln.Close()
		ipv6 = true
	}
	// The forward's target: says hello to each connection.
	target, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	go func() {
		for {
			c, err := target.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "hello\n")
			_ = c.Close()
		}
	}()
	servers := map[string]func(t *testing.T) *Client{
		"agent": func(t *testing.T) *Client { return connectEmbedded(t, srvStartServer(t, nil)) },
		"sshd":  func(t *testing.T) *Client { return startSSHD(t, sshdOptions{}).connect(t, nil) },
	}
	for name, connect := range servers {
		t.Run(name, func(t *testing.T) {
			c := connect(t)
			h := hostgate.New(hostgate.Info{}, func(context.Context) (*hostgate.Connection, error) { return c.Connection(nil), nil })
			t.Cleanup(func() { _ = h.Close() })
			for _, tc := range []struct{ listen, want string }{
				{":0", "127.0.0.1"},
				{"0.0.0.0:0", "127.0.0.1"},
				{"localhost:0", "127.0.0.1"},
				{"127.0.0.2:0", "127.0.0.1"},
				{"127.0.0.1:0", "127.0.0.1"},
				{"[::1]:0", "::1"},
			} {
				if tc.want == "::1" && !ipv6 {
					continue
				}
				fw, err := h.Forward(testCtx(t), hostgate.ForwardSpec{Kind: hostgate.ForwardRemote, Listen: tc.listen, Connect: target.Addr().String()})
				if err != nil {
					t.Fatalf("Forward %s: %v", tc.listen, err)
				}
				a, ok := fw.Addr().(*net.TCPAddr)
				if !ok || a.IP.String() != tc.want || a.Port == 0 {
					t.Errorf("Forward %s: Addr %v, want %s and the port taken", tc.listen, fw.Addr(), tc.want)
				}
				conn, err := net.Dial("tcp", fw.Addr().String())
				if err != nil {
					t.Errorf("Forward %s: connect to its Addr: %v", tc.listen, err)
				} else {
					line, err := bufio.NewReader(conn).ReadString('\n')
					if line != "hello\n" {
						t.Errorf("Forward %s: read %q, %v through its Addr, want the target's hello", tc.listen, line, err)
					}
					_ = conn.Close()
				}
				if err := fw.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
