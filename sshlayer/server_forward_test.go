//go:build linux

package sshlayer

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/internal/testenv"
)

func TestServerDirectTCPIP(t *testing.T) {
	t.Parallel()
	ts := srvStartServer(t, nil)
	c := srvDialServer(t, ts)
	echo := srvStartEcho(t)
	conn, err := c.Dial("tcp", echo)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	srvEchoRoundTrip(t, conn)
}

// TestServerDirectTCPIPDialFailure: the target is dialed before the
// channel is accepted, so a refused dial is a ConnectionFailed rejection.
func TestServerDirectTCPIPDialFailure(t *testing.T) {
	t.Parallel()
	ts := srvStartServer(t, nil)
	c := srvDialServer(t, ts)
	// A port that refuses. The reason is sshd's: strerror,
	// which ssh prints ("open failed: connect failed: Connection
	// refused"); it was "connect failed" for every cause.
	_, err := c.Dial("tcp", testenv.RefusedAddr(t))
	var oce *ssh.OpenChannelError
	if !errors.As(err, &oce) || oce.Reason != ssh.ConnectionFailed || oce.Message != "Connection refused" {
		t.Fatalf("dial of a closed port: %v, want ConnectionFailed with reason \"Connection refused\"", err)
	}
}

// TestServerDirectTCPIPDialFailureLogged: a failed dial's log line names
// the channel, its type and the target (the channel's logger is made only
// when a forwarded connection logs).
func TestServerDirectTCPIPDialFailureLogged(t *testing.T) {
	t.Parallel()
	var logs testenv.LogBuffer
	ts := srvStartServer(t, &ServerConfig{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	c := srvDialServer(t, ts)
	target := testenv.RefusedAddr(t)
	if _, err := c.Dial("tcp", target); err == nil {
		t.Fatal("dial of a closed port succeeded")
	}
	for line := range strings.Lines(logs.String()) {
		var rec struct {
			Msg, Type, Target string
			Chan              uint64
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "direct-tcpip dial failed" {
			if rec.Chan == 0 || rec.Type != "direct-tcpip" || rec.Target != target {
				t.Errorf("logged %s, want chan, type direct-tcpip and target %s", line, target)
			}
			return
		}
	}
	t.Errorf("no \"direct-tcpip dial failed\" line in the log:\n%s", logs.String())
}

// TestDialFailure: the reasons a refused direct-tcpip open gives are
// sshd's words for the causes.
func TestDialFailure(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, "Connection refused"},
		{&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ENETUNREACH)}, "Network is unreachable"},
		{&net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}}, "Name or service not known"},
		{&net.OpError{Op: "dial", Err: &net.DNSError{Err: "server misbehaving", Name: "x", IsTemporary: true}}, "Temporary failure in name resolution"},
		{&net.OpError{Op: "dial", Err: context.DeadlineExceeded}, "Connection timed out"},
		{errors.New("something else"), "connect failed"},
	} {
		if got := dialFailure(tc.err); got != tc.want {
			t.Errorf("dialFailure(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestServerRemoteForward(t *testing.T) {
	t.Parallel()
	ts := srvStartServer(t, nil)
	c := srvDialServer(t, ts)
	echo := srvStartEcho(t)
	// Asking for all interfaces still binds loopback without AllowRemoteBind.
	ln, err := c.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if port == 0 {
		t.Fatal("port 0 forward: no port reported")
	}
	accepted := make(chan error, 1)
	go func() {
		fc, err := ln.Accept()
		if err != nil {
			accepted <- err
			return
		}
		tc, err := net.Dial("tcp", echo)
		if err != nil {
			_ = fc.Close()
			accepted <- err
			return
		}
		go func() { _, _ = io.Copy(tc, fc); _ = tc.(*net.TCPConn).CloseWrite() }()
		_, _ = io.Copy(fc, tc)
		_ = fc.Close()
		_ = tc.Close()
		accepted <- nil
	}()
	conn, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	srvEchoRoundTrip(t, conn)
	_ = conn.Close()
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
	loopback := net.IPv4(127, 0, 0, 1)
	sock := srvListener(t, loopback, port)
	if sock == "" {
		t.Fatalf("the forward does not listen at 127.0.0.1:%d", port)
	}
	// Closing the client's listener cancels the forward on the server.
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	if srvListener(t, loopback, port) == sock {
		t.Fatal("forward still listening after cancel-tcpip-forward")
	}
}

func TestServerBindAddr(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr  string
		allow bool
		want  string
	}{
		{"", false, "127.0.0.1"},
		{"0.0.0.0", false, "127.0.0.1"},
		{"*", false, "127.0.0.1"},
		{"localhost", false, "127.0.0.1"},
		{"192.0.2.1", false, "127.0.0.1"},
		{"127.0.0.1", false, "127.0.0.1"},
		{"::1", false, "::1"},
		{"127.0.0.2", false, "127.0.0.1"},
		{"0:0::1", false, "127.0.0.1"},
		{"", true, ""},
		{"*", true, ""},
		{"localhost", true, "127.0.0.1"},
		{"192.0.2.1", true, "192.0.2.1"},
	} {
		c := &serverConn{srv: &Server{cfg: ServerConfig{AllowRemoteBind: tc.allow}}}
		if got := c.bindAddr(tc.addr); got != tc.want {
			t.Errorf("bindAddr(%q, allow=%v) = %q, want %q", tc.addr, tc.allow, got, tc.want)
		}
	}
}

// TestServerDirectTCPIPGarbage: a short forwarded connection costs the
// server no per-connection copy buffers (io.Copy through *net.TCPConn's
// ReadFrom/WriteTo would allocate 32 KiB each way). Counted over many
// connections, client and server together (both in this process). Not
// parallel: other tests' allocations would count.
func TestServerDirectTCPIPGarbage(t *testing.T) {
	ts := srvStartServer(t, nil)
	c := srvDialServer(t, ts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		b := make([]byte, 1)
		for {
			s, err := ln.Accept()
			if err != nil {
				return
			}
			if _, err := io.ReadFull(s, b); err == nil {
				_, _ = s.Write(b)
			}
			_ = s.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-served })
	exchange := func() {
		conn, err := c.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(conn)
		if err != nil || string(got) != "x" {
			t.Fatalf("read %q, %v", got, err)
		}
	}
	exchange() // warm up pools and the connection
	if per := bytesPerRun(200, exchange); per > 40<<10 {
		t.Errorf("%d bytes allocated per forwarded connection, want under 40 KiB (no 32 KiB copy buffers)", per)
	}
}

// TestServerDirectTCPIPConcurrentIntegrity runs several echo channels and a
// command writing to stderr at once on one connection, reading the echoes
// in random sizes, so that received data
// packets are split across reads and interleave between channels: both
// ends recycle the buffers of data packets once read (x/crypto's
// dataPackets, third_party/golang.org/x/crypto/HOSTGATE.md), and a buffer
// given back too early would show here as corrupted bytes.
func TestServerDirectTCPIPConcurrentIntegrity(t *testing.T) {
	t.Parallel()
	ts := srvStartServer(t, nil)
	c := srvDialServer(t, ts)
	echo := srvStartEcho(t)
	const chans, size = 6, 2 << 20
	var wg sync.WaitGroup
	errs := make(chan error, chans+1)
	for range chans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- echoRandomReads(c, echo, size)
		}()
	}
	// And extended data: a command's stderr, which its own buffer holds.
	wg.Add(1)
	go func() {
		defer wg.Done()
		data := make([]byte, size)
		_, _ = rand.Read(data)
		s, err := c.NewSession()
		if err != nil {
			errs <- err
			return
		}
		defer func() { _ = s.Close() }()
		var errOut bytes.Buffer
		s.Stdin, s.Stderr = &srvRandomChunks{b: data}, &errOut
		err = s.Run("cat >&2")
		if err == nil && !bytes.Equal(errOut.Bytes(), data) {
			err = fmt.Errorf("stderr returned %d bytes, want the %d sent unchanged", errOut.Len(), len(data))
		}
		errs <- err
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// echoRandomReads runs srvEchoCheck through a new direct-tcpip channel to
// the echo server at addr.
func echoRandomReads(c *ssh.Client, addr string, size int) error {
	conn, err := c.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	return srvEchoCheck(conn, size)
}

// TestServerLargeRequestPackets sends requests between 24 and 40 KiB, the
// sizes whose packets AES-GCM decrypts into a recycled buffer before their
// type is known (HOSTGATE.md change 4). A request is not channel data, so
// it must be handed on as a copy and the buffer given back. Data streams
// through an echo channel meanwhile, so a buffer given back while its
// request is still read would be refilled by data packets and the command
// line would arrive changed.
func TestServerLargeRequestPackets(t *testing.T) {
	t.Parallel()
	ts := srvStartServer(t, nil)
	c := srvDialServer(t, ts)
	echo := srvStartEcho(t)
	echoErr := make(chan error, 1)
	go func() { echoErr <- echoRandomReads(c, echo, 8<<20) }()
	for i := range 30 {
		n := []int{24 << 10, 30000, 40<<10 - 600}[i%3]
		arg := strings.Repeat(string(rune('a'+i%26)), n)
		s, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		out, err := s.Output("printf %s " + arg + " | wc -c; printf %s " + arg + " | tr -d " + arg[:1] + " | wc -c")
		_ = s.Close()
		if err != nil {
			t.Fatalf("%d-byte argument: %v", n, err)
		}
		if got, want := strings.Fields(string(out)), []string{strconv.Itoa(n), "0"}; !slices.Equal(got, want) {
			t.Fatalf("%d-byte argument: the command counted %q bytes and %q changed, want %q", n, got[:min(1, len(got))], got[min(1, len(got)):], want)
		}
	}
	if err := <-echoErr; err != nil {
		t.Fatal(err)
	}
}

// TestServerStreamLocal: Unix-socket forwarding, as ssh -L /sock:/path and
// -R /path:target ask it (direct-streamlocal@openssh.com and
// streamlocal-forward@openssh.com). The agent refused both ("unknown
// channel type"; "remote port forwarding failed"), where sshd allows them
// by default.
func TestServerStreamLocal(t *testing.T) {
	t.Parallel()
	ts := srvStartServer(t, nil)
	c := srvDialServer(t, ts)
	dir := t.TempDir()

	// Local: a connection to a Unix socket on the host.
	sock := filepath.Join(dir, "echo.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer conn.Close(); _, _ = io.Copy(conn, conn) }()
		}
	}()
	conn, err := c.Dial("unix", sock)
	if err != nil {
		t.Fatalf("direct-streamlocal: %v", err)
	}
	if err := srvEchoCheck(conn, 100<<10); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close()
	var oce *ssh.OpenChannelError
	if _, err := c.Dial("unix", filepath.Join(dir, "missing.sock")); !errors.As(err, &oce) || oce.Message != "No such file or directory" {
		t.Fatalf("direct-streamlocal to a missing socket: %v", err)
	}

	// Remote: a socket on the host whose connections come back to the client.
	rsock := filepath.Join(dir, "remote.sock")
	rl, err := c.ListenUnix(rsock)
	if err != nil {
		t.Fatalf("streamlocal-forward: %v", err)
	}
	if fi, err := os.Stat(rsock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("forwarded socket: %v %v, want mode 0600", fi, err)
	}
	if _, err := c.ListenUnix(rsock); err == nil {
		t.Fatal("a second forward of the same path succeeded")
	}
	go func() {
		conn, err := rl.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = io.Copy(conn, conn)
	}()
	hc, err := net.Dial("unix", rsock)
	if err != nil {
		t.Fatal(err)
	}
	if err := srvEchoCheck(hc, 100<<10); err != nil {
		t.Fatal(err)
	}
	_ = hc.Close()
	// Cancelled, the socket is gone from the host.
	if err := rl.Close(); err != nil {
		t.Fatalf("cancel-streamlocal-forward: %v", err)
	}
	for i := 0; ; i++ {
		if _, err := os.Lstat(rsock); os.IsNotExist(err) {
			break
		}
		if i == 1000 {
			t.Fatal("the forwarded socket outlived its cancel")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A symlink at the path is an existing file: refused, its target left
	// alone (a chmod after the listen followed it). An abstract name is
	// not a file's path. The socket's making leaves nothing beside it.
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.sock")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListenUnix(link); err == nil {
		t.Fatal("a forward over a symlink succeeded")
	}
	if fi, err := os.Stat(target); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("the symlink's target: %v %v, want mode 0644 untouched", fi, err)
	}
	if _, err := c.ListenUnix("@hostgate-abstract-test"); err == nil {
		t.Fatal("a forward of an abstract socket name succeeded")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".hostgate-socket-*")); len(left) != 0 {
		t.Fatalf("left beside the sockets: %v", left)
	}
}

// A client that never answers the forwarded-tcpip open of a remote
// forward's connection does not hold that connection until the SSH
// connection ends: the wait is bounded (channelOpenTimeout), the
// connection is closed, and a late acceptance gets its channel closed.
func TestRemoteForwardUnansweredOpen(t *testing.T) {
	t.Parallel()
	addr, hostKey, client := srvStartTweakedConfig(t, ServerConfig{}, func(s *Server) { s.channelOpenTimeout = time.Millisecond })
	c, err := srvDialWith(addr, hostKey, ssh.PublicKeys(client))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	held := c.HandleChannelOpen("forwarded-tcpip")
	ok, reply, err := c.SendRequest("tcpip-forward", true, ssh.Marshal(struct {
		Addr string
		Port uint32
	}{"127.0.0.1", 0}))
	if err != nil || !ok {
		t.Fatalf("tcpip-forward: %v, %v", ok, err)
	}
	var bound struct{ Port uint32 }
	if err := ssh.Unmarshal(reply, &bound); err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(bound.Port))))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var nc ssh.NewChannel
	select {
	case nc = <-held: // left unanswered
	case <-time.After(srvTestWait):
		t.Fatal("no forwarded-tcpip open reached the client")
	}
	waitEOF(t, conn, "a forwarded connection whose open the client never answered")
	acceptLate(t, nc, "forwarded-tcpip")
}

// srvEchoRoundTrip writes random data through c, half-closes, and checks the
// same bytes come back.
func srvEchoRoundTrip(t testing.TB, c net.Conn) {
	t.Helper()
	if err := srvEchoCheck(c, 1<<20); err != nil {
		t.Fatal(err)
	}
}

// TestRemoteForwardLocalhostAddr: a remote forward asked on "localhost"
// listens on the host's loopback (sshd's rule, whatever its GatewayPorts),
// and its listener's Addr says so. x/crypto reported 0.0.0.0:PORT, as if
// the host listened on every interface.
func TestRemoteForwardLocalhostAddr(t *testing.T) {
	t.Parallel()
	c := connectEmbedded(t, srvStartServer(t, nil))
	ln, err := c.Listen(srvTestCtx(t), "tcp", "localhost:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, ok := ln.Addr().(*net.TCPAddr)
	if !ok || !a.IP.Equal(net.IPv4(127, 0, 0, 1)) || a.Port == 0 {
		t.Fatalf("Addr %v, want 127.0.0.1 and the port taken", ln.Addr())
	}
	if srvListener(t, a.IP, a.Port) == "" {
		t.Fatalf("nothing listens at %v", a)
	}
}
