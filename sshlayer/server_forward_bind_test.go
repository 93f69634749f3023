//go:build linux

package sshlayer

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRemoteForwardBindsAsSSHD: under sshd's default GatewayPorts no, a
// remote forward binds the host's loopback whatever address it asks for,
// but for the two sshd takes as written (channel_fwd_bind_addr): 127.0.0.1
// alone, ::1 alone, and any other ask (127.0.0.2 included) both. The
// agent bound 127.0.0.2 as asked, where sshd, run here beside it, binds
// 127.0.0.1 and ::1, so a program on the host connecting to localhost
// found nothing.
func TestRemoteForwardBindsAsSSHD(t *testing.T) {
	ipv6 := false
	if ln, err := net.Listen("tcp", "[::1]:0"); err == nil {
		_ = ln.Close()
		ipv6 = true
	}
	servers := map[string]func(t *testing.T) *Client{
		"agent": func(t *testing.T) *Client { return connectEmbedded(t, srvStartServer(t, nil)) },
		"sshd":  func(t *testing.T) *Client { return startSSHD(t, sshdOptions{}).connect(t, nil) },
	}
	cases := []struct {
		ask    string
		listen []string // where a connection reaches the forward
		not    []string // where nothing listens
	}{
		{"127.0.0.2", []string{"127.0.0.1", "::1"}, []string{"127.0.0.2"}},
		{"127.0.0.1", []string{"127.0.0.1"}, []string{"::1", "127.0.0.2"}},
		{"::1", []string{"::1"}, []string{"127.0.0.1"}},
		{"localhost", []string{"127.0.0.1", "::1"}, []string{"127.0.0.2"}},
		{"", []string{"127.0.0.1", "::1"}, []string{"127.0.0.2"}},
		{"0.0.0.0", []string{"127.0.0.1", "::1"}, []string{"127.0.0.2"}},
		{"192.0.2.1", []string{"127.0.0.1", "::1"}, []string{"127.0.0.2"}},
	}
	for name, connect := range servers {
		t.Run(name, func(t *testing.T) {
			c := connect(t)
			ctx := testCtx(t)
			for _, tc := range cases {
				if !ipv6 && tc.ask == "::1" {
					continue
				}
				ln, err := c.Listen(ctx, "tcp", net.JoinHostPort(tc.ask, "0"))
				if err != nil {
					t.Fatalf("Listen %q: %v", tc.ask, err)
				}
				// Each connection the forward takes is greeted with the
				// marker, so a connection that reached something else
				// listening on the same port number (another test's
				// server, on a busy machine) is not taken for the forward.
				go func() {
					for {
						fc, err := ln.Accept()
						if err != nil {
							return
						}
						_, _ = fc.Write([]byte(forwardMarker))
						_ = fc.Close()
					}
				}()
				port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
				for _, host := range tc.listen {
					if host == "::1" && !ipv6 {
						continue
					}
					if reached, err := reachesForward(net.JoinHostPort(host, port)); !reached {
						t.Errorf("asked %q: the forward is not at %s: %v", tc.ask, host, err)
					}
				}
				for _, host := range tc.not {
					if host == "::1" && !ipv6 {
						continue
					}
					reached, err := reachesForward(net.JoinHostPort(host, port))
					switch {
					case reached:
						t.Errorf("asked %q: the forward listens at %s too", tc.ask, host)
					case errors.Is(err, syscall.ECONNREFUSED):
					case err != nil && strings.HasPrefix(err.Error(), notForward):
						t.Logf("asked %q: %s", tc.ask, err)
					default:
						t.Errorf("asked %q: dial %s: %v, want refused", tc.ask, host, err)
					}
				}
				if err := ln.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

const (
	forwardMarker = "through the forward\n"
	notForward    = "something else listens"
)

// reachesForward dials addr and reports whether the connection reached a
// forward of TestRemoteForwardBindsAsSSHD (its greeting came). A refused
// dial is its error; a connection that got anything else says
// notForward.
func reachesForward(addr string) (bool, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return false, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(io.LimitReader(c, int64(len(forwardMarker))))
	if string(got) == forwardMarker {
		return true, nil
	}
	return false, fmt.Errorf("%s at %s (read %q, %v)", notForward, addr, got, err)
}

// TestOpenSSHRemoteForwardOtherLoopback: ssh -R 127.0.0.2:0:TARGET to the
// agent listens where sshd would (TestRemoteForwardBindsAsSSHD): on
// 127.0.0.1, not 127.0.0.2.
func TestOpenSSHRemoteForwardOtherLoopback(t *testing.T) {
	t.Parallel()
	_, o := srvOpenSSHServer(t, nil)
	echo := srvStartEcho(t)
	cmd := o.command(srvTestCtx(t), "ssh", "-o", "ExitOnForwardFailure=yes",
		"-R", "127.0.0.2:0:"+echo, "127.0.0.1", "echo ready; exec sleep 300")
	port := allocatedPort(t, srvStartReady(t, cmd))
	conn, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		t.Fatalf("the forward on 127.0.0.1: %v", err)
	}
	srvEchoRoundTrip(t, conn)
	_ = conn.Close()
	if conn, err := net.Dial("tcp", net.JoinHostPort("127.0.0.2", port)); err == nil {
		_ = conn.Close()
		t.Errorf("the forward listens on 127.0.0.2")
	}
}
