package sshinterop

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/forward"
	"github.com/hostgate/hostgate/forward/internal/forwardtest"
	"github.com/hostgate/hostgate/sshlayer"
)

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func sshHost(t testing.TB, c *sshlayer.Client) *hostgate.Host {
	h := hostgate.New(hostgate.Info{Kind: "ssh"}, func(context.Context) (*hostgate.Connection, error) {
		return c.Connection(nil), nil
	})
	t.Cleanup(func() { _ = h.Close() })
	return h
}

func echoThrough(t testing.TB, addr string, msg string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(c)
	if err != nil || string(got) != msg {
		t.Fatalf("through %s: got %q, %v; want %q", addr, got, err, msg)
	}
}

func socksConnect(t testing.TB, proxy, target string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", proxy, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	host, ps, _ := net.SplitHostPort(target)
	port, _ := strconv.Atoi(ps)
	req := []byte{5, 1, 0, 5, 1, 0, 3, byte(len(host))}
	req = append(req, host...)
	req = binary.BigEndian.AppendUint16(req, uint16(port))
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	rep := make([]byte, 2+10)
	if _, err := io.ReadFull(c, rep); err != nil || rep[1] != 0 || rep[3] != 0 {
		t.Fatalf("socks reply %v, %v", rep, err)
	}
	_ = c.SetDeadline(time.Time{})
	return c
}

// TestForwardOverOpenSSH runs every kind of forward through our SSH client
// to OpenSSH's sshd, then closes the client: every forward must stop, with
// ErrHostGone, because the client reports its end through Done.
func TestForwardOverOpenSSH(t *testing.T) {
	ctx := testCtx(t)
	s := startSSHD(t)
	c := s.connect(t, ctx)
	h := sshHost(t, c)
	target := forwardtest.Serve(t, forwardtest.Echo)

	local, err := forward.Run(ctx, h, forward.Spec{Kind: forward.Local, Listen: "127.0.0.1:0", Connect: target})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	remote, err := forward.Run(ctx, h, forward.Spec{Kind: forward.Remote, Listen: "127.0.0.1:0", Connect: target})
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close()
	dyn, err := forward.Run(ctx, h, forward.Spec{Kind: forward.Dynamic, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer dyn.Close()

	echoThrough(t, local.Addr().String(), "through sshd -L")
	echoThrough(t, remote.Addr().String(), "through sshd -R")
	sc := socksConnect(t, dyn.Addr().String(), target)
	defer sc.Close()
	if _, err := io.WriteString(sc, "socks"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(sc, buf); err != nil || string(buf) != "socks" {
		t.Fatalf("socks echo %q, %v", buf, err)
	}
	if st := local.Stats(); st.Connections != 1 || st.BytesIn != int64(len("through sshd -L")) {
		t.Fatalf("local stats %+v", st)
	}

	_ = c.Close()
	for name, fw := range map[string]*forward.Forward{"local": local, "remote": remote, "dynamic": dyn} {
		select {
		case <-fw.Done():
		case <-ctx.Done():
			t.Fatalf("%s forward still running after the SSH connection closed", name)
		}
		if err := fw.Err(); !errors.Is(err, forward.ErrHostGone) {
			t.Errorf("%s: Err = %v, want ErrHostGone", name, err)
		}
	}
	_ = sc.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := sc.Read(buf); err == nil {
		t.Fatal("SOCKS connection still open after the SSH connection closed")
	}
}

// TestOpenSSHLocalForwardHelper checks the benchmark's ssh -L harness.
func TestOpenSSHLocalForwardHelper(t *testing.T) {
	ctx := testCtx(t)
	s := startSSHD(t)
	echoThrough(t, s.sshL(t, ctx, forwardtest.Serve(t, forwardtest.Echo)), "through ssh -L")
}
