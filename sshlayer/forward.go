package sshlayer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

var (
	_ hostgate.Forwarder   = (*Client)(nil)
	_ hostgate.EarlyDialer = (*Client)(nil)
)

// Dial opens a connection from the host to addr over a direct-tcpip channel
// (direct-streamlocal@openssh.com for network "unix"). ctx bounds the dial
// only. The returned conn supports CloseWrite (half-close); once the host's
// side has ended (Read returned io.EOF), CloseWrite closes the channel.
func (c *Client) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6", "unix":
	default:
		return nil, fmt.Errorf("sshlayer: dial: unsupported network %q", network)
	}
	if err := checkPort("dial", network, addr); err != nil {
		return nil, err
	}
	conn, err := await(ctx, c, func() (net.Conn, error) { return c.ssh.Dial(network, addr) }, func(conn net.Conn) { _ = conn.Close() })
	if err != nil {
		return nil, c.dialErr(addr, err)
	}
	if _, ok := conn.(closeWriter); !ok {
		return conn, nil
	}
	return &dialConn{Conn: conn, c: c, addr: addr}, nil
}

// dialErr names a failed dial; the host's refusal of the channel is
// hostgate.ErrConnectFailed.
func (c *Client) dialErr(addr string, err error) error {
	if oe := (*ssh.OpenChannelError)(nil); errors.As(err, &oe) {
		return fmt.Errorf("sshlayer: dial %s: %w: %w", addr, hostgate.ErrConnectFailed, err)
	}
	return c.opErr("dial "+addr, err)
}

type closeWriter interface{ CloseWrite() error }

// checkPort refuses a TCP addr whose port is not a number from 0 to
// 65535 before anything is sent: SSH's requests carry a port number,
// and x/crypto's parse let 99999 and -1 through, which the host then
// refused as it would a port its policy forbids ("tcpip-forward request
// denied by peer"), and told a service name only as strconv's error.
func checkPort(op, network, addr string) error {
	if network == "unix" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("sshlayer: %s %s: %w", op, addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("sshlayer: %s %s: the port %q is not a number from 0 to 65535 (an SSH forward carries a port number; service names are not looked up)", op, addr, port)
	}
	return nil
}

// serverVersion is what the server announces. Its comments say that it
// takes early data (see DialEarly) and early requests (see
// earlyRequestsToken), and that its SFTP server names every errno of a
// failed lookup (see sftpErrnoToken); a client of ours counts on any of
// them only with a server that says so, since one without it would
// misread early data or requests, and an older agent's SFTP server
// answered a Rename or Symlink through a file "no such file".
//
// Its software version, serverSoftware, begins with "OpenSSH" for
// OpenSSH's ssh, which sends what only sshd understands to servers whose
// version matches "OpenSSH*" (compat.c): eow@openssh.com, without which
// `ssh host yes | head -1` never ended (the server never learns that
// ssh drops what it is sent), and no-more-sessions@openssh.com. It never
// holds "OpenSSH_", which x/crypto's clients read a version number after
// (isBrokenOpenSSHVersion: below 6, a remote forward on port 0 would be
// tried on random ports), as libssh and PuTTY match their quirks on it.
const serverVersion = "SSH-2.0-" + serverSoftware + " " + earlyDataToken + " " + earlyRequestsToken + " " + sftpErrnoToken

// serverSoftware is the server's software version (see serverVersion);
// clientSoftware, the client's, is what servers of ours were until
// OpenSSH's eow@openssh.com needed them to say "OpenSSH".
const (
	serverSoftware = "OpenSSH.hostgate"
	clientSoftware = "hostgate"
)

const earlyDataToken = "early-data@hostgate"

// earlyRequestsToken announces a server that takes a channel's requests
// before it has answered the open (x/crypto/ssh early requests,
// third_party HOSTGATE.md, change 26): against it a command, or an SFTP
// session, on a channel of its own sends its open, its request and its
// first bytes at once, and waits one round trip where it waited two.
const earlyRequestsToken = "early-requests@hostgate"

// sftpErrnoToken announces a server whose SFTP answers to the requests
// the provider looks names up after (STAT, LSTAT, OPEN, OPENDIR, MKDIR,
// SETSTAT, READLINK, SYMLINK, posix-rename) say "no such file" only for
// ENOENT: ENOTDIR and ELOOP are a Failure naming them, as pkg/sftp's
// server words every errno and, since it was so, the agent's SYMLINK and
// posix-rename. (Its REMOVE, RMDIR and REALPATH keep OpenSSH's words,
// which OpenSSH's sftp prints; the provider's Remove Lstats first.)
// Against it the SFTP provider takes "no such file" as said, with no
// lookups to learn which errno it was (lookupErr).
const sftpErrnoToken = "sftp-errno@hostgate"

// takesEarlyData reports whether a server's version string announces
// early data.
func takesEarlyData(version []byte) bool { return announces(version, earlyDataToken) }

// takesEarlyRequests reports whether a server's version string announces
// early requests, which go on channels opened early (early data).
func takesEarlyRequests(version []byte) bool {
	return announces(version, earlyRequestsToken) && takesEarlyData(version)
}

// announces reports whether a version string announces token: one of the
// comments after the software version.
func announces(version []byte, token string) bool {
	_, comments, ok := strings.Cut(string(version), " ")
	return ok && slices.Contains(strings.Fields(comments), token)
}

// TakesEarlyData reports whether DialEarly sends early data: the server
// announced it. Otherwise DialEarly is Dial, and a caller that would wait
// for a connection's first bytes to send them with the open
// (bicopy.DialLead) has no reason to.
func (c *Client) TakesEarlyData() bool { return c.earlyData }

// DialEarly is Dial for a connection whose first bytes need not wait for
// the host's connect. With a server of ours it returns at once: the
// connection's first writes (up to 32 KiB) travel right behind the
// channel open, as x/crypto/ssh early data (third_party HOSTGATE.md, change
// 5), which saves a round trip over every hop of the path before the host
// sees them; a connect the host refuses then shows as the error of the
// first Read or Write (hostgate.ErrConnectFailed, wrapping the
// *ssh.OpenChannelError) instead of DialEarly's, and a connection lost
// before the answer as ErrConnectionLost, not as the end of the stream.
// With any other server, or network, it is Dial. Callers that must know
// the connect's outcome before they go on (a SOCKS reply) use Dial.
func (c *Client) DialEarly(ctx context.Context, network, addr string) (net.Conn, error) {
	if !c.earlyData || (network != "tcp" && network != "tcp4" && network != "tcp6") {
		return c.Dial(ctx, network, addr)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkPort("dial", network, addr); err != nil {
		return nil, err
	}
	if err := c.usable(); err != nil {
		return nil, err
	}
	conn, err := c.ssh.DialEarly(network, addr)
	if err != nil {
		return nil, c.dialErr(addr, err)
	}
	return &dialConn{Conn: conn, c: c, addr: addr}, nil
}

// dialConn is a forwarded connection whose CloseWrite, when the host's side
// has already ended, sends CLOSE alone instead of EOF then CLOSE: both end
// the channel (RFC 4254 §5.3: data sent before CLOSE is delivered), and
// each message crosses every hop of the path (WebSocket, gateway relay,
// yamux, the agent's wakeups). A forwarded request whose server answers
// and closes first (HTTP with Connection: close) ends this way: one
// message fewer per connection.
type dialConn struct {
	net.Conn
	readEOF atomic.Bool // Read returned io.EOF: the host sent EOF or CLOSE
	c       *Client
	addr    string
}

func (c *dialConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if errors.Is(err, io.EOF) {
		c.readEOF.Store(true)
	}
	return n, c.earlyErr(err)
}

// Write is the channel's, with an early channel's refused open named as
// Dial would have named it.
func (c *dialConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	return n, c.earlyErr(err)
}

// earlyErr names the open failure an early channel's Read or Write
// returns (DialEarly) as Dial names it: a refusal is
// hostgate.ErrConnectFailed, a connection that ended before the answer
// the connection's end (ErrConnectionLost); other errors are as they are.
func (c *dialConn) earlyErr(err error) error {
	if err == nil {
		return nil
	}
	if oe := (*ssh.OpenChannelError)(nil); errors.As(err, &oe) || errors.Is(err, ssh.ErrOpenUnanswered) {
		return c.c.dialErr(c.addr, err)
	}
	return err
}

func (c *dialConn) CloseWrite() error {
	if c.readEOF.Load() {
		return c.Conn.Close()
	}
	return c.Conn.(closeWriter).CloseWrite()
}

// Listen asks the host to listen on addr (tcpip-forward, or
// streamlocal-forward@openssh.com for network "unix"); connections to it
// arrive through the returned listener as forwarded channels. Port 0 picks a
// port. Addr reports it, at the address the host listens on as far as the
// server tells (the reply carries only the port, RFC 4254 section 7.1; see
// remoteBindIP). ctx bounds the request only. Closing the listener
// cancels the forward on the host; when the connection ends, Accept fails and
// the host drops the forward with the connection. The listener must be
// served (Accept called) or the SSH connection may stall.
func (c *Client) Listen(ctx context.Context, network, addr string) (net.Listener, error) {
	switch network {
	case "tcp", "tcp4", "tcp6", "unix":
	default:
		return nil, fmt.Errorf("sshlayer: listen: unsupported network %q", network)
	}
	if err := checkPort("listen", network, addr); err != nil {
		return nil, err
	}
	ln, err := await(ctx, c, func() (net.Listener, error) { return c.ssh.Listen(network, addr) }, func(ln net.Listener) { _ = ln.Close() })
	if err != nil {
		return nil, c.opErr("listen "+addr, err)
	}
	fl := &forwardListener{Listener: ln, c: c}
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		// x/crypto reports the address asked, 0.0.0.0 for a name or
		// none: a caller printing Addr, or connecting to it, should get
		// where the host listens.
		if host, _, err := net.SplitHostPort(addr); err == nil {
			fl.addr = &net.TCPAddr{IP: c.remoteBindIP(host), Port: a.Port}
		}
	}
	return fl, nil
}

// remoteBindIP is where the host listens for a remote forward asked on
// host, as far as the server has told. The tcpip-forward reply carries
// only the port; what else is known:
//   - The agent binds by sshd's rule under its default GatewayPorts no
//     (sshlayer's bindAddr): 127.0.0.1 or ::1 when asked as written, else
//     loopback, 127.0.0.1 (and ::1).
//   - OpenSSH's sshd under GatewayPorts yes binds every address (0.0.0.0,
//     and :: where the host has IPv6) whatever is asked, and says so in a
//     debug message ("Forwarding listen address ... overridden by server
//     GatewayPorts") sent before its reply, for any address asked but "",
//     "0.0.0.0" and "*": 0.0.0.0 then, and for every forward after it on
//     the connection, since the setting holds for the connection.
//   - Otherwise sshd's rule under GatewayPorts no, which cannot be told
//     apart from the others by what sshd sends: under yes, a first forward
//     asked on "", "0.0.0.0" or "*" listens on every address, and under
//     clientspecified "" and "*" do too, "0.0.0.0" is every IPv4 address
//     and any other address but "localhost" is bound as asked. 127.0.0.1
//     reaches the forward in each of those but the last: a forward asked
//     on 127.0.0.2 or a non-loopback address of an sshd set to
//     clientspecified listens there only, where Addr says 127.0.0.1.
func (c *Client) remoteBindIP(host string) net.IP {
	if !c.ours && c.bindsAll.Load() {
		return net.IPv4zero
	}
	if host == "::1" {
		return net.IPv6loopback
	}
	return net.IPv4(127, 0, 0, 1)
}

// gatewayPortsOverride reports whether msg, a server's SSH_MSG_DEBUG, is
// OpenSSH's word that it bound a remote forward on every address instead
// of the one asked (channels.c, channel_fwd_bind_addr, GatewayPorts yes).
func gatewayPortsOverride(msg string) bool {
	return strings.HasPrefix(msg, "Forwarding listen address ") && strings.HasSuffix(msg, " overridden by server GatewayPorts")
}

// forwardListener makes Accept fail with the connection's end reason instead of a
// bare io.EOF once the connection is gone, and Close idempotent and bounded.
type forwardListener struct {
	net.Listener
	c    *Client
	once sync.Once
	err  error
	addr net.Addr // Addr, when not the Listener's
	// closed is set as Close starts: Accept's failure is then Close's
	// doing, with nothing to ask the host.
	closed atomic.Bool
}

// cancelForwardWait bounds how long a listener's Close waits for the
// host's answer to its cancel. A host answers in one round trip; one
// that stopped answering (but keeps the connection) would otherwise hold
// the Close, and a Forwarding's Close or ctx's end behind it, for as
// long as the connection lives (or until the keepalive gives up, never
// with it turned off). A var for the tests.
var cancelForwardWait = 5 * time.Second

func (l *forwardListener) Addr() net.Addr {
	if l.addr != nil {
		return l.addr
	}
	return l.Listener.Addr()
}

func (l *forwardListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		if l.closed.Load() {
			// No probe (lostErr's round trip): a host that stopped
			// answering, the cancel still waiting, would hold this
			// Accept for the probe's bound.
			if end := l.c.usable(); end != nil {
				return nil, &net.OpError{Op: "accept", Net: l.Addr().Network(), Addr: l.Addr(), Err: fmt.Errorf("%w (%w)", net.ErrClosed, end)}
			}
			return nil, &net.OpError{Op: "accept", Net: l.Addr().Network(), Addr: l.Addr(), Err: net.ErrClosed}
		}
		if end := l.c.lostErr(); end != nil {
			return nil, &net.OpError{Op: "accept", Net: l.Addr().Network(), Addr: l.Addr(), Err: fmt.Errorf("%w (%w)", net.ErrClosed, end)}
		}
		return nil, &net.OpError{Op: "accept", Net: l.Addr().Network(), Addr: l.Addr(), Err: net.ErrClosed}
	}
	return conn, nil
}

// Close cancels the forward. x/crypto's Close removes the forward on this
// side before it sends the cancel (no forwarded connection is accepted
// for it from then on: the host's later ones are refused) and then waits
// for the answer: that wait is given up after cancelForwardWait, or when
// the connection ends (the host drops the forward with it), and the
// request goes on in a goroutine of the client's until the host answers
// or the connection ends.
func (l *forwardListener) Close() error {
	l.once.Do(func() { l.closed.Store(true); l.err = l.cancel() })
	return l.err
}

func (l *forwardListener) cancel() error {
	if l.c.usable() != nil || !l.c.track() {
		// The connection has ended, or Close closes it first: the
		// request fails at once.
		return l.Listener.Close()
	}
	answered := make(chan error, 1)
	go func() {
		defer l.c.wg.Done()
		answered <- l.Listener.Close()
	}()
	t := time.NewTimer(cancelForwardWait)
	defer t.Stop()
	select {
	case err := <-answered:
		return err
	case <-l.c.done:
		return nil // the forward went with the connection
	case <-t.C:
		return fmt.Errorf("sshlayer: cancel forward %s: the host did not answer within %v (it stopped answering, or the connection is stalled): the forward is closed on this side, and the host drops it when the connection ends", l.Addr(), cancelForwardWait)
	}
}
