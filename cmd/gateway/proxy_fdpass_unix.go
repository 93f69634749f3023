//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/gateway/wire"
)

// proxyFdpass is gateway proxy --fdpass: OpenSSH's ProxyUseFdpass, where
// ssh gives its ProxyCommand a Unix socket as standard output, takes one
// descriptor sent over it for its connection, and waits for the command
// to exit. To a host whose agent answers at a direct address the proxy
// sends that TCP socket: ssh then talks to the agent with no process
// between them, where the pipes of a plain ProxyCommand put the proxy on
// every byte's path (the fwdbulk rows of bench/HISTORY.md, round 53).
// Otherwise it sends one end of a socket pair and leaves the relay to a
// `gateway proxy --relay-only` of its own, started on the other end,
// which ends when ssh closes its end. The gateway is asked with
// wire.DirectAsk, so a host without direct addresses costs no relay here
// that the one started would then repeat.
func proxyFdpass(ctx context.Context, stdout, stderr io.Writer, gw, token, host string, o proxyOptions) error {
	fail := func(err error) error { return fdpassFail(stderr, err) }
	say := proxySay(stderr, host, o)
	f, ok := stdout.(*os.File)
	if !ok {
		return fail(errors.New("proxy: --fdpass: standard output is not a socket: ssh passes one only with ProxyUseFdpass yes in its config"))
	}
	out := int(f.Fd()) // ssh's socket
	if sa, err := unix.Getsockname(out); err != nil {
		return fail(fmt.Errorf("proxy: --fdpass: standard output is not a socket (%w): ssh passes one only with ProxyUseFdpass yes in its config", err))
	} else if _, ok := sa.(*unix.SockaddrUnix); !ok {
		return fail(errors.New("proxy: --fdpass: standard output is not a Unix socket: ssh passes one only with ProxyUseFdpass yes in its config"))
	}
	memo := directMemoFor(gw, host)
	if o.relayOnly {
		say("through the gateway's relay (--relay-only)")
		return fdpassRelay(stderr, out, gw, token, host, o, "")
	}
	if !memo.usable(say) {
		return fdpassRelay(stderr, out, gw, token, host, o, "")
	}
	u, h, err := proxyRequest(gw, token, host, o)
	if err != nil {
		return fail(err)
	}
	h.Set(wire.HeaderDirect, wire.DirectAsk)
	wsOpts := &bytestream.WebSocketOptions{Header: h, HandshakeTimeout: proxyHandshakeTimeout, RootCAs: o.roots}
	remote, _, err := bytestream.DialWebSocket(ctx, u, wsOpts)
	if err == nil {
		// A gateway older than DirectAsk relays at once: this relay
		// cannot be handed to another process, so it ends unused.
		_ = remote.Close()
		say("through the gateway's relay: the gateway is older than --fdpass's question (a relay opened and closed unused)")
		return fdpassRelay(stderr, out, gw, token, host, o, "")
	}
	var he *bytestream.HandshakeError
	switch {
	case errors.As(err, &he) && he.StatusCode == http.StatusNoContent:
		say(sayNoDirectAddress)
		return fdpassRelay(stderr, out, gw, token, host, o, "")
	case errors.As(err, &he) && he.StatusCode == http.StatusOK:
	default:
		return fail(proxyDialError(gw, host, err))
	}
	conn, derr := dialAnswer(ctx, stderr, he.Body, host, o)
	if derr == nil {
		defer conn.Close()
		if err := sendConnFD(out, conn); err != nil {
			return fail(fmt.Errorf("proxy: --fdpass: handing ssh its connection: %w", err))
		}
		memo.worked()
		say("direct session to %s, its agent's listener; ssh holds the socket", conn.RemoteAddr())
		return nil
	}
	if ctx.Err() != nil {
		return fail(fmt.Errorf("proxy: host %s: %w", host, context.Cause(ctx)))
	}
	memo.failed(derr)
	say("no direct session (%v); through the gateway's relay", derr)
	return fdpassRelay(stderr, out, gw, token, host, o, wire.DirectFailedValue(derr))
}

// fdpassRelay sends ssh (on out) one end of a socket pair and starts
// `gateway proxy --relay-only` on the other end, in the background: that
// process dials the relay and joins it to ssh's socket until either ends.
// Its errors reach ssh's standard error, which it shares. directFailed,
// when not empty, is why the direct path failed, for its request.
func fdpassRelay(stderr io.Writer, out int, gw, token, host string, o proxyOptions, directFailed string) error {
	// Close-on-exec, under the fork lock as Go's own descriptors are
	// made: the relay must not inherit ssh's end, or it would hold it
	// open and never see ssh close it.
	syscall.ForkLock.RLock()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err == nil {
		unix.CloseOnExec(fds[0])
		unix.CloseOnExec(fds[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return fdpassFail(stderr, fmt.Errorf("proxy: --fdpass: socket pair: %w", err))
	}
	sshEnd, relayEnd := os.NewFile(uintptr(fds[0]), "ssh's end"), os.NewFile(uintptr(fds[1]), "the relay's end")
	defer sshEnd.Close()
	defer relayEnd.Close()
	exe, err := os.Executable()
	if err != nil {
		return fdpassFail(stderr, fmt.Errorf("proxy: --fdpass: finding this program to run the relay: %w", err))
	}
	// Not --verbose: this process said which path; the relay would add
	// only "--relay-only". What ends the relay it still says.
	args := []string{"proxy", "--relay-only", "--fdpass=false", "--verbose=false"}
	if o.knownHosts != "" {
		args = append(args, "--known-hosts", o.knownHosts)
	}
	if o.caFile != "" {
		args = append(args, "--ca-file", o.caFile)
	}
	cmd := exec.Command(exe, append(args, host)...)
	// The URL and token by the environment: flags would show the token
	// in ps.
	// directFailed set empty too: one inherited from ssh's environment is
	// not this run's.
	cmd.Env = append(os.Environ(), EnvName("url")+"="+gw, EnvName("token")+"="+token, envDirectFailed+"="+directFailed)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = relayEnd, relayEnd, os.Stderr
	if err := cmd.Start(); err != nil {
		return fdpassFail(stderr, fmt.Errorf("proxy: --fdpass: starting the relay: %w", err))
	}
	// Not waited for: ssh waits for this process to exit before it uses
	// the socket. The relay ends when ssh closes its end.
	_ = cmd.Process.Release()
	if err := sendFD(out, int(sshEnd.Fd())); err != nil {
		return fdpassFail(stderr, fmt.Errorf("proxy: --fdpass: handing ssh its connection: %w", err))
	}
	return nil
}

func fdpassFail(stderr io.Writer, err error) error {
	fmt.Fprintln(stderr, "gateway:", printable(err.Error()))
	return reportedError{err}
}

// sendConnFD sends conn's socket to ssh on out (sendFD), blocking as a
// socket ssh makes itself: the descriptor ssh gets shares the socket's
// file status flags, which Go's netpoller set non-blocking.
func sendConnFD(out int, conn net.Conn) error {
	tc, isTCP := conn.(*net.TCPConn)
	if !isTCP {
		return fmt.Errorf("not a TCP connection (%T)", conn)
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		if serr = unix.SetNonblock(int(fd), false); serr == nil {
			serr = sendFD(out, int(fd))
		}
	}); err != nil {
		return err
	}
	return serr
}

// sendFD sends descriptor fd over the Unix socket sock as OpenSSH's
// mm_receive_fd takes it: one byte of data, the descriptor in an
// SCM_RIGHTS message.
func sendFD(sock, fd int) error {
	return unix.Sendmsg(sock, []byte{0}, unix.UnixRights(fd), nil, 0)
}
