//go:build unix

package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hostgate/hostgate/bytestream"
)

// TestRelayOnOneSocketEndsWithTheHost: --fdpass's relay runs with one
// socket as its standard input and output (ssh holds the other end, as
// its connection). When the host ended its SSH stream (the gateway closes
// the relay normally: a server that hung up without a disconnect
// message), the relay closed only its standard output, the socket stayed
// open through its input, and ssh, never reading the end, waited for ever
// ("Connection closed by remote host" through a plain ProxyCommand). ssh's
// end reads the host's bytes, then EOF.
func TestRelayOnOneSocketEndsWithTheHost(t *testing.T) {
	ctx, cancel := context.WithTimeout(testCtx(t), 20*time.Second)
	defer cancel()
	const banner = "SSH-2.0-host\r\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := bytestream.Accept(w, r, nil)
		if err != nil {
			return
		}
		_, _ = io.WriteString(c, banner)
		_ = c.Close() // normal closure: the proxy reads io.EOF
	}))
	defer srv.Close()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	sshEnd, relayEnd := os.NewFile(uintptr(fds[0]), "ssh's end"), os.NewFile(uintptr(fds[1]), "the relay's end")
	defer sshEnd.Close()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	relay := exec.CommandContext(ctx, self, "proxy", "--relay-only", "--url", srv.URL, "box")
	relay.Env = append(os.Environ(), "HOSTGATE_TEST_BE_GATEWAY=1", "HOSTGATE_TOKEN=tok")
	relay.Stdin, relay.Stdout, relay.Stderr = relayEnd, relayEnd, os.Stderr
	if err := relay.Start(); err != nil {
		_ = relayEnd.Close()
		t.Fatal(err)
	}
	_ = relayEnd.Close()
	defer func() { _ = relay.Process.Kill(); _ = relay.Wait() }()
	// The guard against the hang: ssh's end closed when ctx ends.
	stop := context.AfterFunc(ctx, func() { _ = unix.Shutdown(fds[0], unix.SHUT_RDWR) })
	defer stop()
	got, err := io.ReadAll(sshEnd)
	if ctx.Err() != nil {
		t.Fatalf("ssh's end read %q and no end within 20s: the relay held the socket open after the host's stream ended", got)
	}
	if err != nil || string(got) != banner {
		t.Fatalf("ssh's end read %q, %v; want the host's %q, then EOF", got, err, banner)
	}
}
