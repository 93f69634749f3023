//go:build unix

package sshlayer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/bicopy"
)

// maxForwardedConns bounds the forwarded-tcpip channels open at once on one
// connection (across its remote forwards); connections beyond are closed.
const maxForwardedConns = 256

// directTCPIPMsg is the direct-tcpip and forwarded-tcpip channel payload
// (RFC 4254 §7.2).
type directTCPIPMsg struct {
	Host     string
	Port     uint32
	OrigHost string
	OrigPort uint32
}

// tcpipForwardMsg is the tcpip-forward and cancel-tcpip-forward request
// payload (RFC 4254 §7.1).
type tcpipForwardMsg struct {
	Addr string
	Port uint32
}

// remoteForward is one tcpip-forward listener. Its accept loop is owned by
// the connection's wait group and ends when ln is closed.
type remoteForward struct {
	ln   net.Listener
	addr string // the address as the client asked, echoed in forwarded-tcpip
	port uint32 // the bound port
}

// directTCPIP dials the target first and only then accepts the channel, so
// a failed dial is a ConnectionFailed rejection (as sshd does) rather than
// an accepted channel that closes at once.
func (c *serverConn) directTCPIP(nc ssh.NewChannel, log *slog.Logger) {
	target, err := parseDirectTCPIP(nc.ExtraData())
	if err != nil {
		_ = nc.Reject(ssh.ConnectionFailed, "bad direct-tcpip request")
		return
	}
	dctx, cancel := context.WithTimeout(c.ctx, hostgate.ConnectTimeout)
	// No TCP keepalive on the target socket, as sshd: the target is
	// usually local, and its four setsockopt calls are a tenth of the
	// agent's syscalls for a short forwarded connection.
	d := net.Dialer{KeepAlive: -1}
	tc, err := d.DialContext(dctx, "tcp", target)
	cancel()
	if err != nil {
		log.Info("direct-tcpip dial failed", "target", target, "err", err)
		_ = nc.Reject(ssh.ConnectionFailed, dialFailure(err))
		return
	}
	ch, reqs, err := nc.Accept()
	if err != nil {
		_ = tc.Close()
		return
	}
	log.Debug("direct-tcpip", "target", target)
	c.wg.Add(1)
	go func() { defer c.wg.Done(); discardChannelRequests(reqs) }()
	_, _ = bicopy.Copy(c.ctx, ch, tc)
}

// dialFailure is the reason a refused direct-tcpip open gives for a failed
// dial, in sshd's words: strerror ("Connection refused") or gai_strerror
// ("Name or service not known"), which ssh prints ("channel 0: open failed:
// connect failed: Connection refused"). It was "connect failed" for every
// cause, so a user could not tell a closed port from a name that does not
// resolve.
func dialFailure(err error) string {
	var dnsErr *net.DNSError
	var errno syscall.Errno
	switch {
	case errors.As(err, &dnsErr):
		switch {
		case dnsErr.IsNotFound:
			return "Name or service not known"
		case dnsErr.IsTimeout, dnsErr.IsTemporary:
			return "Temporary failure in name resolution"
		}
		return capitalize(dnsErr.Err)
	case errors.As(err, &errno):
		return capitalize(errno.Error())
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return "Connection timed out"
	}
	return "connect failed"
}

// capitalize upper-cases the first letter of Go's strerror text
// ("connection refused"), as the C library writes it.
func capitalize(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// parseDirectTCPIP returns the host:port a direct-tcpip channel's extra
// data asks to connect to (RFC 4254 §7.2).
func parseDirectTCPIP(extra []byte) (string, error) {
	var m directTCPIPMsg
	if err := ssh.Unmarshal(extra, &m); err != nil {
		return "", fmt.Errorf("sshlayer: malformed direct-tcpip request: %w", err)
	}
	if m.Port > 65535 {
		return "", fmt.Errorf("sshlayer: direct-tcpip port %d is out of range", m.Port)
	}
	return net.JoinHostPort(m.Host, strconv.FormatUint(uint64(m.Port), 10)), nil
}

// parseTCPIPForward parses a tcpip-forward or cancel-tcpip-forward payload
// (RFC 4254 §7.1).
func parseTCPIPForward(payload []byte) (tcpipForwardMsg, error) {
	var m tcpipForwardMsg
	if err := ssh.Unmarshal(payload, &m); err != nil {
		return m, fmt.Errorf("sshlayer: malformed tcpip-forward request: %w", err)
	}
	if m.Port > 65535 {
		return m, fmt.Errorf("sshlayer: tcpip-forward port %d is out of range", m.Port)
	}
	return m, nil
}

// bindAddr maps the address a client asked to listen on to the one used:
// loopback unless AllowRemoteBind (sshd's GatewayPorts).
func (c *serverConn) bindAddr(addr string) string {
	if c.srv.cfg.AllowRemoteBind {
		switch addr {
		case "", "*", "0.0.0.0", "::":
			return ""
		case "localhost":
			return "127.0.0.1"
		}
		return addr
	}
	if ip := net.ParseIP(addr); ip != nil && ip.IsLoopback() {
		return addr
	}
	return "127.0.0.1"
}

// tcpipForward starts a remote forward; with port 0 the reply carries the
// port picked (RFC 4254 §7.1).
func (c *serverConn) tcpipForward(payload []byte) (bool, []byte) {
	m, err := parseTCPIPForward(payload)
	if err != nil {
		return false, nil
	}
	c.mu.Lock()
	full := len(c.forwards) >= c.srv.cfg.MaxForwards
	c.mu.Unlock()
	if full || c.ctx.Err() != nil {
		return false, nil
	}
	bind := net.JoinHostPort(c.bindAddr(m.Addr), strconv.FormatUint(uint64(m.Port), 10))
	var lc net.ListenConfig
	ln, err := lc.Listen(c.ctx, "tcp", bind)
	if err != nil {
		c.log.Info("tcpip-forward listen failed", "addr", bind, "err", err)
		return false, nil
	}
	port := uint32(ln.Addr().(*net.TCPAddr).Port)
	f := &remoteForward{ln: ln, addr: m.Addr, port: port}
	key := forwardKey(m.Addr, port)
	c.mu.Lock()
	if _, dup := c.forwards[key]; dup || c.ctx.Err() != nil {
		c.mu.Unlock()
		_ = ln.Close()
		return false, nil
	}
	c.forwards[key] = f
	c.mu.Unlock()
	c.activity(0) // a forward counts as activity for the idle timer
	c.log.Info("tcpip-forward", "listen", ln.Addr().String())
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.acceptForward(f)
	}()
	var reply []byte
	if m.Port == 0 {
		reply = ssh.Marshal(struct{ Port uint32 }{port})
	}
	return true, reply
}

func forwardKey(addr string, port uint32) string {
	return net.JoinHostPort(addr, strconv.FormatUint(uint64(port), 10))
}

func (c *serverConn) cancelTCPIPForward(payload []byte) bool {
	m, err := parseTCPIPForward(payload)
	if err != nil {
		return false
	}
	key := forwardKey(m.Addr, m.Port)
	c.mu.Lock()
	f, ok := c.forwards[key]
	delete(c.forwards, key)
	c.mu.Unlock()
	if !ok {
		return false
	}
	_ = f.ln.Close()
	c.activity(0)
	return true
}

// acceptForward opens a forwarded-tcpip channel to the client for every
// connection accepted on f, until f's listener closes.
func (c *serverConn) acceptForward(f *remoteForward) {
	for {
		tc, err := f.ln.Accept()
		if err != nil {
			return
		}
		c.mu.Lock()
		full := c.forwarded >= maxForwardedConns
		if !full {
			c.forwarded++
		}
		c.mu.Unlock()
		if full {
			c.log.Warn("forwarded connection dropped: too many open", "max", maxForwardedConns)
			_ = tc.Close()
			continue
		}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			defer func() { c.mu.Lock(); c.forwarded--; c.mu.Unlock() }()
			ra, _ := tc.RemoteAddr().(*net.TCPAddr)
			m := directTCPIPMsg{Host: f.addr, Port: f.port}
			if ra != nil {
				m.OrigHost, m.OrigPort = ra.IP.String(), uint32(ra.Port)
			}
			ch, reqs, err := c.sc.OpenChannel("forwarded-tcpip", ssh.Marshal(&m))
			if err != nil {
				c.log.Info("forwarded-tcpip refused by client", "err", err)
				_ = tc.Close()
				return
			}
			c.wg.Add(1)
			go func() { defer c.wg.Done(); ssh.DiscardRequests(reqs) }()
			_, _ = bicopy.Copy(c.ctx, ch, tc)
		}()
	}
}
