//go:build unix

package sshlayer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/accept"
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

// remoteForward is one tcpip-forward listener, or two. Their accept loops
// are owned by the connection's wait group and end when close closes them.
type remoteForward struct {
	ln   net.Listener
	ln6  net.Listener // [::1] at ln's port, when the forward is "localhost" (loopbackPair); else nil
	addr string       // the address as the client asked, echoed in forwarded-tcpip; a socket path for a Unix socket
	port uint32       // the bound port
	unix bool         // a streamlocal-forward@openssh.com forward: ln is a Unix socket at addr
	key  string       // its key in serverConn.forwards (forwardKey or streamLocalKey)
}

func (f *remoteForward) close() {
	_ = f.ln.Close()
	if f.ln6 != nil {
		_ = f.ln6.Close()
	}
}

// directTCPIP dials the target first and only then accepts the channel, so
// a failed dial is a ConnectionFailed rejection (as sshd does) rather than
// an accepted channel that closes at once.
//
// It serves direct-streamlocal@openssh.com the same way, dialing a Unix
// socket on the host: what ssh -L PORT:/path/to.sock and -L
// /local.sock:/path/to.sock open (a Docker or database socket), which
// sshd allows by default (AllowStreamLocalForwarding yes).
func (c *serverConn) directTCPIP(nc ssh.NewChannel, log func() *slog.Logger) {
	network, parse := "tcp", parseDirectTCPIP
	if nc.ChannelType() == directStreamLocal {
		network, parse = "unix", parseDirectStreamLocal
	}
	target, err := parse(nc.ExtraData())
	if err != nil {
		_ = nc.Reject(ssh.ConnectionFailed, "bad "+nc.ChannelType()+" request")
		return
	}
	dctx, cancel := context.WithTimeout(c.ctx, hostgate.ConnectTimeout)
	// No TCP keepalive on the target socket, as sshd: the target is
	// usually local, and its four setsockopt calls are a tenth of the
	// agent's syscalls for a short forwarded connection.
	d := net.Dialer{KeepAlive: -1}
	tc, err := dialTarget(dctx, &d, network, target)
	cancel()
	if err != nil {
		log().Info(nc.ChannelType()+" dial failed", "target", target, "err", err)
		_ = nc.Reject(ssh.ConnectionFailed, dialFailure(err))
		return
	}
	ch, reqs, err := nc.Accept()
	if err != nil {
		_ = tc.Close()
		return
	}
	if c.log.Enabled(c.ctx, slog.LevelDebug) {
		log().Debug("direct-tcpip", "target", target)
	}
	copyForwarded(c.ctx, ch, reqs, tc)
}

// copyForwarded copies between ch, a forwarded connection's channel, and
// conn, its socket on this host, as bicopy.Copy does, and closes conn
// once the client has closed the channel. A CLOSE reads as EOF, on which
// Copy only half-closes conn: a program at the other end that waits for
// data without writing (a silent server, a long poll) never ended the
// copy, so the connection, its goroutines and its place under the
// channel limits (MaxDirectTCPIP, maxForwardedConns, maxAgentConns) were
// held until the SSH connection ended, after the client had let go of
// them. sshd closes the socket once the peer's CLOSE has come.
func copyForwarded(ctx context.Context, ch ssh.Channel, reqs <-chan *ssh.Request, conn net.Conn) {
	// No peer sends requests or stderr on a forwarded connection: the
	// goroutines that refuse and drop them start only if one does.
	ssh.DiscardLazily(ch, reqs)
	w := &closeWatch{Channel: ch, reqs: reqs, conn: conn, done: make(chan struct{})}
	_, _ = bicopy.Copy(ctx, w, conn)
	close(w.done)
	w.wg.Wait()
}

// closeWatch is a forwarded connection's channel that, once its reads end
// while this side still sends, watches for the client's CLOSE (its
// requests' end) and closes conn then. Only then: a goroutine per
// forwarded connection is what DiscardLazily saves, and a copy whose
// other direction has ended ends without one.
type closeWatch struct {
	ssh.Channel
	reqs  <-chan *ssh.Request
	conn  net.Conn
	done  chan struct{} // closed once the copy returned
	ended atomic.Bool   // this side sent EOF or CLOSE
	once  sync.Once
	wg    sync.WaitGroup
}

func (w *closeWatch) Read(p []byte) (int, error) {
	n, err := w.Channel.Read(p)
	if err != nil && !w.ended.Load() {
		w.once.Do(func() { w.wg.Go(w.watch) })
	}
	return n, err
}

func (w *closeWatch) CloseWrite() error {
	w.ended.Store(true)
	return w.Channel.CloseWrite()
}

func (w *closeWatch) Close() error {
	w.ended.Store(true)
	return w.Channel.Close()
}

// watch closes conn when the channel's requests end (the client's CLOSE,
// or the connection's end), refusing any request meanwhile, until the
// copy returns.
func (w *closeWatch) watch() {
	for {
		select {
		case r, ok := <-w.reqs:
			if !ok {
				_ = w.conn.Close()
				return
			}
			if r.WantReply {
				_ = r.Reply(false, nil)
			}
		case <-w.done:
			return
		}
	}
}

// dialTarget dials a forwarded connection's target. "localhost" is
// loopback without asking the resolver (RFC 6761, as curl and browsers
// do), 127.0.0.1 first and then ::1: a dev server started on "localhost"
// listens on whichever address the host's resolver put first, which for
// Node 17 and later (Vite, Next) is often ::1 alone, and a resolver that
// knows only one of them (an /etc/hosts without the ::1 line) missed it.
// Previews dial localhost for that reason. The error is the IPv4 dial's
// (a refusal, usually), which is what the caller can act on.
func dialTarget(ctx context.Context, d *net.Dialer, network, target string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(target)
	if network != "tcp" || err != nil || !strings.EqualFold(host, "localhost") {
		return d.DialContext(ctx, network, target)
	}
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", port))
	if err == nil {
		return c, nil
	}
	if c, err6 := d.DialContext(ctx, "tcp", net.JoinHostPort("::1", port)); err6 == nil {
		return c, nil
	}
	return nil, err
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

// directStreamLocal is the channel type of a forwarded connection to a
// Unix socket (OpenSSH's PROTOCOL, §2.4).
const directStreamLocal = "direct-streamlocal@openssh.com"

// parseDirectStreamLocal returns the socket path a
// direct-streamlocal@openssh.com channel's extra data asks to connect to.
func parseDirectStreamLocal(extra []byte) (string, error) {
	var m struct {
		Path      string
		Reserved  string
		Reserved2 uint32
	}
	if err := ssh.Unmarshal(extra, &m); err != nil {
		return "", fmt.Errorf("sshlayer: malformed direct-streamlocal request: %w", err)
	}
	if !socketPath(m.Path) {
		return "", fmt.Errorf("sshlayer: direct-streamlocal path %q is not a socket path", m.Path)
	}
	return m.Path, nil
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
// loopback unless AllowRemoteBind (sshd's GatewayPorts). With loopbackPair
// it is also listened on at [::1]. Without AllowRemoteBind it is sshd's
// rule under GatewayPorts no (channel_fwd_bind_addr): 127.0.0.1 and ::1,
// as written, are taken as asked, for a client that wants one family;
// any other address, another loopback one (127.0.0.2) too, is
// "localhost", both.
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
	if addr == "127.0.0.1" || addr == "::1" {
		return addr
	}
	return "127.0.0.1"
}

// loopbackPair reports whether a forward the client asked at addr is
// sshd's "localhost": 127.0.0.1 and [::1] at one port. ssh -R PORT:… asks
// for "localhost" and, under GatewayPorts no, any address but 127.0.0.1
// and ::1 is taken for it; a program on the host that tries only ::1 for
// localhost (Node before 20 did) found nothing at 127.0.0.1 alone.
func (c *serverConn) loopbackPair(addr string) bool {
	return c.bindAddr(addr) == "127.0.0.1" && addr != "127.0.0.1"
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
	if w := c.srv.wrapForwardListener; w != nil {
		ln = w(ln)
	}
	port := uint32(ln.Addr().(*net.TCPAddr).Port)
	f := &remoteForward{ln: ln, addr: m.Addr, port: port}
	if c.loopbackPair(m.Addr) {
		// As sshd: the second address is best effort (a sandbox has no
		// IPv6, and ::1 may hold the port), the forward stands on the first.
		ln6, err := lc.Listen(c.ctx, "tcp", net.JoinHostPort("::1", strconv.FormatUint(uint64(port), 10)))
		if err != nil {
			c.log.Debug("tcpip-forward listen on ::1 failed", "port", port, "err", err)
		}
		f.ln6 = ln6
	}
	key := forwardKey(m.Addr, port)
	f.key = key
	c.mu.Lock()
	if _, dup := c.forwards[key]; dup || c.ctx.Err() != nil {
		c.mu.Unlock()
		f.close()
		return false, nil
	}
	c.forwards[key] = f
	c.mu.Unlock()
	c.activity(0) // a forward counts as activity for the idle timer
	c.log.Info("tcpip-forward", "listen", ln.Addr().String(), "ipv6", f.ln6 != nil)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.acceptForward(f, f.ln)
	}()
	if f.ln6 != nil {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.acceptForward(f, f.ln6)
		}()
	}
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
	return c.cancelForward(forwardKey(m.Addr, m.Port))
}

// cancelForward ends the remote forward with key (forwardKey or
// streamLocalKey), reporting whether there was one.
func (c *serverConn) cancelForward(key string) bool {
	c.mu.Lock()
	f, ok := c.forwards[key]
	delete(c.forwards, key)
	c.mu.Unlock()
	if !ok {
		return false
	}
	f.close()
	c.activity(0)
	return true
}

// dropForward ends remote forward f, whose listener failed for good, and
// takes it out of the connection's table: left there, a new forward of
// the same address and port (the client's ssh -R again) was refused as a
// duplicate until the client cancelled the dead one or disconnected. A
// cancel that came first took it out already, and a new forward may hold
// its key by now; that one stays.
func (c *serverConn) dropForward(f *remoteForward) {
	c.mu.Lock()
	if c.forwards[f.key] == f {
		delete(c.forwards, f.key)
	}
	c.mu.Unlock()
	f.close()
	c.activity(0)
}

// streamLocalForward starts a remote forward from a Unix socket on the host
// (streamlocal-forward@openssh.com: what ssh -R /path/on/host.sock:TARGET
// asks), as sshd does by default: the socket is made with mode 0600
// (StreamLocalBindMask 0177), an existing file at the path is an error
// (StreamLocalBindUnlink no), and the socket is removed when the forward
// ends.
func (c *serverConn) streamLocalForward(payload []byte) bool {
	path, err := parseStreamLocalForward(payload)
	if err != nil {
		return false
	}
	key := streamLocalKey(path)
	c.mu.Lock()
	_, dup := c.forwards[key]
	full := len(c.forwards) >= c.srv.cfg.MaxForwards
	c.mu.Unlock()
	if dup || full || c.ctx.Err() != nil {
		return false
	}
	ln, err := listenUnixPrivate(c.ctx, path)
	if err != nil {
		c.log.Info("streamlocal-forward listen failed", "path", path, "err", err)
		return false
	}
	f := &remoteForward{ln: ln, addr: path, unix: true, key: key}
	c.mu.Lock()
	if _, dup := c.forwards[key]; dup || c.ctx.Err() != nil {
		c.mu.Unlock()
		_ = ln.Close()
		return false
	}
	c.forwards[key] = f
	c.mu.Unlock()
	c.activity(0)
	c.log.Info("streamlocal-forward", "listen", path)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.acceptForward(f, f.ln)
	}()
	return true
}

// streamLocalKey is a Unix-socket forward's key in serverConn.forwards. A
// TCP forward's key never holds a NUL (its address could not be listened
// on), and a socket path never does (parseStreamLocalForward), so the two
// kinds never share a key.
func streamLocalKey(path string) string { return "unix\x00" + path }

func (c *serverConn) cancelStreamLocalForward(payload []byte) bool {
	path, err := parseStreamLocalForward(payload)
	if err != nil {
		return false
	}
	return c.cancelForward(streamLocalKey(path))
}

// parseStreamLocalForward returns the socket path of a
// streamlocal-forward@openssh.com or cancel-streamlocal-forward@openssh.com
// payload (OpenSSH's PROTOCOL, §2.4).
func parseStreamLocalForward(payload []byte) (string, error) {
	var m struct{ Path string }
	if err := ssh.Unmarshal(payload, &m); err != nil {
		return "", fmt.Errorf("sshlayer: malformed streamlocal-forward request: %w", err)
	}
	if !socketPath(m.Path) {
		return "", fmt.Errorf("sshlayer: streamlocal-forward path %q is not a socket path", m.Path)
	}
	return m.Path, nil
}

// socketPath reports whether p names a Unix socket in the file system. A
// leading '@' would reach Linux's abstract namespace, which sshd, taking
// every path as a file's, never does.
func socketPath(p string) bool {
	return p != "" && p[0] != '@' && strings.IndexByte(p, 0) < 0
}

// listenUnixPrivate listens on a new Unix socket at path that only this
// user may connect to from its first moment, as sshd's StreamLocalBindMask
// 0177 gives: the socket is made in a fresh 0700 directory beside path,
// set to 0600 there, and linked into place. Made at path directly, it had
// the umask's mode (group-writable under 002) until a chmod that followed
// whatever a symlink swapped in at path by then. The link fails on any
// existing file, symlinks included (sshd's StreamLocalBindUnlink no).
// Closing the listener removes path.
func listenUnixPrivate(ctx context.Context, path string) (net.Listener, error) {
	dir, err := os.MkdirTemp(filepath.Dir(path), ".hostgate-socket-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }() // the name inside; path keeps the socket
	tmp := filepath.Join(dir, "s")
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "unix", tmp)
	if err != nil {
		return nil, err
	}
	ul := ln.(*net.UnixListener)
	ul.SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, 0o600); err != nil {
		_ = ln.Close()
		return nil, err
	}
	if err := os.Link(tmp, path); err != nil {
		_ = ln.Close()
		return nil, err
	}
	return &unlinkingListener{UnixListener: ul, path: path}, nil
}

// unlinkingListener removes its socket's path when closed.
type unlinkingListener struct {
	*net.UnixListener
	path string
	once sync.Once
}

func (l *unlinkingListener) Close() error {
	err := l.UnixListener.Close()
	l.once.Do(func() { _ = os.Remove(l.path) })
	return err
}

// acceptForward opens a forwarded-tcpip (forwarded-streamlocal@openssh.com
// for a Unix socket) channel to the client for every connection accepted
// on ln, one of f's listeners, until it closes.
func (c *serverConn) acceptForward(f *remoteForward, ln net.Listener) {
	for {
		tc, err := accept.Next(c.ctx, ln, func(err error, wait time.Duration) {
			c.log.Warn("forward accept failed for now; trying again", "listen", ln.Addr().String(), "err", err, "retry", wait)
		})
		if err != nil {
			if c.ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				// The forward's port would stay bound with nothing
				// accepting: say so, and let it go.
				if ln == f.ln {
					c.dropForward(f)
				} else {
					_ = ln.Close() // [::1] is best effort: the forward stands on ln
				}
				c.log.Warn("forward listener failed; it is closed", "listen", ln.Addr().String(), "err", err)
			}
			return
		}
		c.mu.Lock()
		full := c.forwarded >= maxForwardedConns
		if !full {
			c.forwarded++
		}
		c.mu.Unlock()
		if full {
			if n, ok := c.fwdDrops.drop(time.Now()); ok {
				c.log.Warn("forwarded connection dropped: too many open (logged at most once a minute)", "max", maxForwardedConns, "dropped", n)
			}
			_ = tc.Close()
			continue
		}
		release := func() { c.mu.Lock(); c.forwarded--; c.mu.Unlock() }
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			var (
				typ     string
				payload []byte
			)
			if f.unix {
				typ, payload = "forwarded-streamlocal@openssh.com", ssh.Marshal(struct{ Path, Reserved string }{f.addr, ""})
			} else {
				ra, _ := tc.RemoteAddr().(*net.TCPAddr)
				m := directTCPIPMsg{Host: f.addr, Port: f.port}
				if ra != nil {
					m.OrigHost, m.OrigPort = ra.IP.String(), uint32(ra.Port)
				}
				typ, payload = "forwarded-tcpip", ssh.Marshal(&m)
			}
			// An open given up counts against maxForwardedConns until
			// the client answers it.
			c.carry(c.ctx, tc, typ, payload, release)
		}()
	}
}
