//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/bicopy"
	"github.com/hostgate/hostgate/internal/testenv"
)

// testSSHVersion is the version line of the test's own ssh client, which
// splitForwarder takes for ssh's.
const testSSHVersion = "SSH-2.0-HostgateTestSSH"

// splitForwarder listens for the direct path of a hostile machine: it
// forwards the proxy's probe (x/crypto's version line, "SSH-2.0-Go") to
// probeTo (the host's own listener: the probe sees the pinned key) and
// ssh's connection (any other version line) to sshTo (another server).
// It answers its address.
func splitForwarder(t *testing.T, probeTo, sshTo string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				br := bufio.NewReader(c)
				line, err := br.ReadString('\n')
				if err != nil {
					return
				}
				to := sshTo
				if strings.TrimRight(line, "\r\n") == "SSH-2.0-Go" {
					to = probeTo
				}
				up, err := net.Dial("tcp", to)
				if err != nil {
					return
				}
				if _, err := io.WriteString(up, line); err != nil {
					_ = up.Close()
					return
				}
				_, _ = bicopy.Copy(ctx, readerConn{c, br}, up)
			})
		}
	})
	t.Cleanup(func() { _ = ln.Close(); cancel(); wg.Wait() })
	return ln.Addr().String()
}

// readerConn is a conn whose reads come through r (what a bufio.Reader
// holds of it first).
type readerConn struct {
	net.Conn
	r io.Reader
}

func (c readerConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// freeAddr is a loopback address nothing listens on, to listen on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// proxyKeyExchange runs gateway proxy for host box (--verbose) and an
// SSH client through it that checks box's key is pinned: it answers
// whether the client's check met the pinned key (its key exchange got
// that far) and the proxy's stderr. Authentication, for which the client
// has no key, is not asked to succeed.
func proxyKeyExchange(t *testing.T, ctx context.Context, b *directBox, pinned ssh.PublicKey) (keyOK bool, stderr string) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var errb bytes.Buffer
	perr := make(chan error, 1)
	go func() {
		perr <- run(ctx, stdio{in: inR, out: outW, err: &errb}, []string{"proxy", "--url", b.base, "--token", b.clientTok, "--verbose", "box"})
		_ = outW.Close()
		_ = inR.Close()
	}()
	conn := bytestream.NewPipeConn(outR, inW)
	var seen ssh.PublicKey
	_, _, _, err := ssh.NewClientConn(conn, "box", &ssh.ClientConfig{
		User:          "me",
		ClientVersion: testSSHVersion,
		HostKeyCallback: func(_ string, _ net.Addr, key ssh.PublicKey) error {
			seen = key
			return ssh.FixedHostKey(pinned)("box", nil, key)
		},
	})
	_ = conn.Close()
	if err := <-perr; err != nil {
		t.Logf("proxy: %v", err)
	}
	t.Logf("client: %v", err)
	return seen != nil && bytes.Equal(seen.Marshal(), pinned.Marshal()), errb.String()
}

// TestProxyDirectRefusedBySSHIsRemembered: a direct address where a
// machine forwards the proxy's probe to the host, and shows ssh's own
// connection another server (its own key), passes the probe; ssh's host
// key check then fails. The proxy remembered the direct path as working
// and took it again on every run, each failing, until --relay-only. It
// now remembers a direct session that ended before ssh took the host's
// key as a failed direct path: the next run goes through the relay, and
// the host's key is met there. A run stopped during its key exchange
// (ssh's SIGHUP as it exits: the proxy's ctx) is remembered too.
func TestProxyDirectRefusedBySSHIsRemembered(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	ctx := testCtx(t)
	b := startDirectGateway(t)
	other := b.runDirectAgent(t, "other", t.TempDir(), "", io.Discard)
	boxListen := freeAddr(t)
	hostile := splitForwarder(t, boxListen, other[0])
	b.runDirectAgentOn(t, "box", t.TempDir(), boxListen, hostile, io.Discard)
	code, body := apiDo(t, ctx, b.base, "GET", "/v1/hosts/box", b.clientTok, "")
	var rec struct{ HostPublicKey string }
	if err := json.Unmarshal([]byte(body), &rec); code != 200 || err != nil {
		t.Fatalf("host record: %d %s %v", code, body, err)
	}
	pinned, _, _, _, err := ssh.ParseAuthorizedKey([]byte(rec.HostPublicKey))
	if err != nil {
		t.Fatal(err)
	}

	ok, stderr := proxyKeyExchange(t, ctx, b, pinned)
	if ok || !strings.Contains(stderr, "direct session to "+hostile) {
		t.Fatalf("first run: host key met %v, proxy said %q; want the direct path taken and the client shown another key", ok, stderr)
	}
	ok, stderr = proxyKeyExchange(t, ctx, b, pinned)
	if !ok || !strings.Contains(stderr, "the direct path failed from here (direct address "+hostile+": the session ended before ssh took the host's key") {
		t.Errorf("second run: host key met %v, proxy said %q; want the relay, for the direct path failed, and box's key", ok, stderr)
	}
}

// TestOpenSSHProxyDirectRefusedIsRemembered: as
// TestProxyDirectRefusedBySSHIsRemembered, with OpenSSH's ssh, which
// fails with 'Host key verification failed' and stops the proxy by its
// SIGHUP as it exits: the next ssh goes through the relay and works.
func TestOpenSSHProxyDirectRefusedIsRemembered(t *testing.T) {
	sshPath, err := exec.LookPath("ssh")
	testenv.RequirePeer(t, "openssh (ssh)", err == nil)
	ctx := testCtx(t)
	b := startDirectGateway(t)
	other := b.runDirectAgent(t, "other", t.TempDir(), "", io.Discard)
	boxListen := freeAddr(t)
	hostile := splitForwarder(t, boxListen, other[0])
	box := b.runDirectAgentOn(t, "box", t.TempDir(), boxListen, hostile, io.Discard)
	home, config, env := sshConfig(t, ctx, b.base, b.clientTok, "box")
	cache := filepath.Join(home, "cache")

	// The proxy writes its I/O counts to this FIFO once it has ended
	// (TestMain): the memo is written by then.
	ended := filepath.Join(home, "ended")
	if err := syscall.Mkfifo(ended, 0o600); err != nil {
		t.Fatal(err)
	}
	fifo, err := os.OpenFile(ended, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fifo.Close()
	if d, ok := ctx.Deadline(); ok {
		_ = fifo.SetReadDeadline(d)
	}
	cmd := exec.CommandContext(ctx, sshPath, "-F", config, "box", "true")
	cmd.Env = append(env, "HOSTGATE_VERBOSE=1", "HOSTGATE_TEST_PROC_IO="+ended, "XDG_CACHE_HOME="+cache)
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Run(); err == nil || !strings.Contains(errb.String(), "direct session to "+hostile) || !strings.Contains(errb.String(), "Host key verification failed") {
		t.Fatalf("first ssh: %v\n%s\nwant the direct path taken and ssh's host key check failing", err, errb.String())
	}
	if _, err := fifo.Read(make([]byte, 4096)); err != nil {
		t.Fatalf("the first run's proxy did not end: %v", err)
	}

	port, stderr := b.sshConnection(t, "XDG_CACHE_HOME="+cache)
	if port == portOf(t, box[0]) || port == portOf(t, other[0]) || port == portOf(t, boxListen) {
		t.Errorf("second ssh reached port %s, a direct listener's; want the relay", port)
	}
	if want := "the direct path failed from here (direct address " + hostile + ": the session ended before ssh took the host's key"; !strings.Contains(stderr, want) {
		t.Errorf("second ssh: proxy said %q, want %q", stderr, want)
	}
}

// TestKexWatchReadsNewKeys: the watch finds ssh's NEWKEYS after its
// version line and a packet, however the bytes are cut, and gives up on
// a stream that is not SSH's.
func TestKexWatchReadsNewKeys(t *testing.T) {
	packet := func(msg byte, payload int) []byte {
		pad := 4
		body := append([]byte{byte(pad), msg}, make([]byte, payload+pad)...)
		return append([]byte{0, 0, 0, byte(len(body))}, body...)
	}
	stream := append([]byte("SSH-2.0-OpenSSH_9.2p1 Debian\r\n"), packet(20, 100)...) // KEXINIT
	stream = append(stream, packet(30, 40)...)                                       // KEX_ECDH_INIT
	stream = append(stream, packet(sshMsgNewKeys, 0)...)
	for _, step := range []int{1, 3, 7, len(stream)} {
		var w kexWatch
		v, done := kexVerdict(-1), false
		for i := 0; i < len(stream) && !done; i += step {
			v, done = w.feed(stream[i:min(i+step, len(stream))])
		}
		if !done || v != kexAccepted {
			t.Errorf("fed %d bytes at a time: verdict %d, done %v; want NEWKEYS seen", step, v, done)
		}
	}
	for _, bad := range []string{"GET / HTTP/1.1\r\n", "SSH-2.0-x\r\n\xff\xff\xff\xff\x04\x14"} {
		var w kexWatch
		if v, done := w.feed([]byte(bad)); !done || v != kexUnknown {
			t.Errorf("%q: verdict %d, done %v; want unknown", bad, v, done)
		}
	}
	var w kexWatch
	if _, done := w.feed(stream[:len(stream)-len(packet(sshMsgNewKeys, 0))+5]); done {
		t.Errorf("a verdict before NEWKEYS's message byte")
	}
}
