//go:build linux

package sshlayer

import (
	"bufio"
	"context"
	"io"
	"net"
	"slices"
	"strings"
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

// TestForwardRemoteAddrGatewayPorts: against an sshd whose GatewayPorts
// is not the default, a remote forward's Addr is where sshd listens as
// far as sshd tells the client, checked against the sockets sshd bound.
// Under yes, sshd binds every address whatever is asked and says so in a
// debug message for an asked address (127.0.0.1 here): Addr is 0.0.0.0
// from then on for every forward of the connection (it said 127.0.0.1,
// and 127.0.0.2 for "127.0.0.2:0"). What sshd does not tell stays sshd's
// default rule, as Listen documents: a first ":0" under yes, and under
// clientspecified "127.0.0.2:0", bound there only.
func TestForwardRemoteAddrGatewayPorts(t *testing.T) {
	ipv6 := false
	if ln, err := net.Listen("tcp", "[::1]:0"); err == nil {
		_ = ln.Close()
		ipv6 = true
	}
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
	type ask struct {
		listen string
		addr   string   // Addr's IP
		bound  []string // where sshd listens; "::"/"::1" only with IPv6
		reach  bool     // a connection to Addr reaches the forward
	}
	all := []string{"0.0.0.0", "::"}
	cases := []struct {
		name, config string
		asks         []ask
	}{
		{"yes", "GatewayPorts yes", []ask{
			{"127.0.0.1:0", "0.0.0.0", all, true}, // sshd says it overrode the address
			{":0", "0.0.0.0", all, true},
			{"0.0.0.0:0", "0.0.0.0", all, true},
			{"localhost:0", "0.0.0.0", all, true},
			{"127.0.0.2:0", "0.0.0.0", all, true},
			{"[::1]:0", "0.0.0.0", all, true},
		}},
		{"yes, first silent", "GatewayPorts yes", []ask{
			{":0", "127.0.0.1", all, true}, // nothing said: the default rule's answer
			{"0.0.0.0:0", "127.0.0.1", all, true},
		}},
		{"clientspecified", "GatewayPorts clientspecified", []ask{
			{"127.0.0.1:0", "127.0.0.1", []string{"127.0.0.1"}, true},
			{"[::1]:0", "::1", []string{"::1"}, true},
			{"localhost:0", "127.0.0.1", []string{"127.0.0.1", "::1"}, true},
			{":0", "127.0.0.1", all, true},
			{"0.0.0.0:0", "127.0.0.1", []string{"0.0.0.0"}, true},
			{"127.0.0.2:0", "127.0.0.1", []string{"127.0.0.2"}, false}, // documented: not told
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := startSSHD(t, sshdOptions{Config: tc.config}).connect(t, nil)
			h := hostgate.New(hostgate.Info{}, func(context.Context) (*hostgate.Connection, error) { return c.Connection(nil), nil })
			t.Cleanup(func() { _ = h.Close() })
			for _, a := range tc.asks {
				if strings.Contains(a.listen, "::1") && !ipv6 {
					continue
				}
				fw, err := h.Forward(testCtx(t), hostgate.ForwardSpec{Kind: hostgate.ForwardRemote, Listen: a.listen, Connect: target.Addr().String()})
				if err != nil {
					t.Fatalf("Forward %s: %v", a.listen, err)
				}
				addr, ok := fw.Addr().(*net.TCPAddr)
				if !ok || addr.IP.String() != a.addr || addr.Port == 0 {
					t.Errorf("Forward %s: Addr %v, want %s and the port taken", a.listen, fw.Addr(), a.addr)
				}
				var want, got []string
				for _, b := range a.bound {
					if ipv6 || !strings.Contains(b, ":") {
						want = append(want, b)
					}
				}
				if ok {
					for _, ip := range tcpListeners(t, addr.Port) {
						got = append(got, ip.String())
					}
				}
				slices.Sort(want)
				slices.Sort(got)
				if !slices.Equal(got, want) {
					t.Errorf("Forward %s: sshd listens on %v, want %v", a.listen, got, want)
				}
				if a.reach && ok {
					conn, err := net.Dial("tcp", addr.String())
					if err != nil {
						t.Errorf("Forward %s: connect to its Addr %v: %v", a.listen, addr, err)
					} else {
						line, err := bufio.NewReader(conn).ReadString('\n')
						if line != "hello\n" {
							t.Errorf("Forward %s: read %q, %v through its Addr, want the target's hello", a.listen, line, err)
						}
						_ = conn.Close()
					}
				}
				if err := fw.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
