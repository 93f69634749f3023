package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/internal/dialfirst"
	"github.com/hostgate/hostgate/internal/gateway/wire"
)

// The proxy's direct path: for a host whose agent listens for SSH itself
// (agent connect --direct), the gateway answers the proxy's request
// (wire.DirectPrefer) with the agent's addresses and the host's pinned
// key instead of relaying, and the proxy joins ssh to the agent straight,
// as the Go client does: ssh's session is the same one (ssh checks the
// host key and presents the gateway's certificate either way), and the
// agent asks the gateway to admit it. The proxy has no key to
// authenticate with, so before it hands an address to ssh it probes it:
// an SSH key exchange that stops as soon as the server has shown the
// host key. Only the pinned key proves the address is the host: an
// agent's LAN address, seen from another LAN, may be another machine,
// even another SSH server, and ssh would then stop at its known_hosts
// check instead of falling back to the relay.

// proxyDirectDialTimeout bounds the TCP connect to a host's direct
// addresses (all at once), and again to the one that answered; short, as
// the Go client's, since direct sessions are for callers near the host.
// proxyProbeTimeout bounds the probe's key exchange. Variables for tests.
var (
	proxyDirectDialTimeout = 500 * time.Millisecond
	proxyProbeTimeout      = 3 * time.Second
)

// dialDirect dials the address of answer's that answers first, probes it
// for the pinned key, and dials it again for ssh: the probe's connection
// is spent (its key exchange ran), and ssh's own must start with its
// version line. It fails, saying why, when any step does.
func dialDirect(ctx context.Context, answer wire.DirectAnswer, pinned ssh.PublicKey) (net.Conn, error) {
	conn, err := dialfirst.Dial(ctx, answer.Direct, proxyDirectDialTimeout)
	if err != nil {
		return nil, err
	}
	addr := conn.RemoteAddr().String()
	if err := probeHostKey(ctx, conn, pinned, proxyProbeTimeout); err != nil {
		return nil, fmt.Errorf("direct address %s: %w", addr, err)
	}
	dctx, cancel := context.WithTimeout(ctx, proxyDirectDialTimeout)
	defer cancel()
	var d net.Dialer
	conn, err = d.DialContext(dctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("direct address %s, again after its probe: %w", addr, err)
	}
	return conn, nil
}

// errProbeDone stops a probe's handshake once the server showed its key.
var errProbeDone = errors.New("host key seen")

// probeHostKey runs an SSH key exchange over conn as far as the server's
// host key, whose signature of the exchange proves the server holds it,
// and reports whether that key is pinned; it closes conn. No
// authentication is attempted: the handshake stops before it.
func probeHostKey(ctx context.Context, conn net.Conn, pinned ssh.PublicKey, timeout time.Duration) error {
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	seen := make(chan ssh.PublicKey, 1) // the callback runs once, before NewClientConn returns
	_, _, _, err := ssh.NewClientConn(probeConn{conn}, conn.RemoteAddr().String(), &ssh.ClientConfig{
		User: "probe",
		HostKeyCallback: func(_ string, _ net.Addr, key ssh.PublicKey) error {
			seen <- key
			return errProbeDone
		},
		HostKeyAlgorithms: hostKeyAlgorithms(pinned),
	})
	select {
	case key := <-seen:
		if !bytes.Equal(key.Marshal(), pinned.Marshal()) {
			return fmt.Errorf("its SSH server showed host key %s, not the host's pinned %s: another machine answers at that address from here", ssh.FingerprintSHA256(key), ssh.FingerprintSHA256(pinned))
		}
		return nil
	default:
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return fmt.Errorf("no SSH key exchange: %w", err)
}

// probeConn is a probe's connection, which NewClientConn closes when the
// probe stops its handshake. It hangs up as a client leaving cleanly
// does, so that the server reads the end of its input, which the agent
// logs at debug level only (sshlayer): a close with the server's last
// packet unread sent a reset, and the agent logged "ssh handshake
// failed" at each ssh run. The probe's deadline bounds the wait for the
// server's own close.
type probeConn struct{ net.Conn }

func (c probeConn) Close() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		_, _ = io.Copy(io.Discard, c.Conn)
	}
	return c.Conn.Close()
}

// hostKeyAlgorithms asks the server for a signature by a key of pinned's
// type, so that a server with several host keys shows that one.
func hostKeyAlgorithms(pinned ssh.PublicKey) []string {
	if pinned.Type() == ssh.KeyAlgoRSA {
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256}
	}
	return []string{pinned.Type()}
}
