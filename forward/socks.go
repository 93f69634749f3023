package forward

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

// SOCKS5 constants (RFC 1928).
const (
	socksVersion   = 5
	methodNoAuth   = 0x00
	methodNoAccept = 0xff
	cmdConnect     = 0x01
	atypIPv4       = 0x01
	atypDomain     = 0x03
	atypIPv6       = 0x04
)

// Reply codes (RFC 1928 §6).
const (
	repSucceeded          = 0x00
	repGeneralFailure     = 0x01
	repNotAllowed         = 0x02
	repHostUnreachable    = 0x04
	repConnectionRefused  = 0x05
	repCmdNotSupported    = 0x07
	repAddrTypeNotSupport = 0x08
)

// socksError is a refused request and the reply code that tells the client.
type socksError struct {
	code byte
	msg  string
}

func (e *socksError) Error() string { return "forward: socks: " + e.msg }

// readGreeting reads the version/method-selection message (§3): at most
// 2+255 bytes. It reports whether "no authentication required" was offered.
func readGreeting(r io.Reader) (noAuth bool, err error) {
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return false, fmt.Errorf("forward: socks greeting: %w", err)
	}
	if hdr[0] != socksVersion {
		return false, fmt.Errorf("forward: socks greeting: version %d, want 5", hdr[0])
	}
	if hdr[1] == 0 {
		return false, errors.New("forward: socks greeting: no methods")
	}
	var methods [255]byte
	m := methods[:hdr[1]]
	if _, err := io.ReadFull(r, m); err != nil {
		return false, fmt.Errorf("forward: socks greeting: %w", err)
	}
	for _, b := range m {
		if b == methodNoAuth {
			return true, nil
		}
	}
	return false, nil
}

// readRequest reads a request (§4, §5): at most 4+1+255+2 bytes. It returns
// the target as host:port, or a *socksError carrying the reply code.
func readRequest(r io.Reader) (string, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return "", fmt.Errorf("forward: socks request: %w", err)
	}
	if hdr[0] != socksVersion {
		return "", &socksError{repGeneralFailure, fmt.Sprintf("request version %d, want 5", hdr[0])}
	}
	var host string
	switch hdr[3] {
	case atypIPv4:
		var a [4]byte
		if _, err := io.ReadFull(r, a[:]); err != nil {
			return "", fmt.Errorf("forward: socks request: %w", err)
		}
		host = netip.AddrFrom4(a).String()
	case atypIPv6:
		var a [16]byte
		if _, err := io.ReadFull(r, a[:]); err != nil {
			return "", fmt.Errorf("forward: socks request: %w", err)
		}
		host = netip.AddrFrom16(a).String()
	case atypDomain:
		var n [1]byte
		if _, err := io.ReadFull(r, n[:]); err != nil {
			return "", fmt.Errorf("forward: socks request: %w", err)
		}
		var buf [255]byte
		d := buf[:n[0]]
		if _, err := io.ReadFull(r, d); err != nil {
			return "", fmt.Errorf("forward: socks request: %w", err)
		}
		if err := checkDomain(d); err != nil {
			return "", &socksError{repGeneralFailure, err.Error()}
		}
		host = string(d)
	default:
		return "", &socksError{repAddrTypeNotSupport, fmt.Sprintf("address type %d", hdr[3])}
	}
	var p [2]byte
	if _, err := io.ReadFull(r, p[:]); err != nil {
		return "", fmt.Errorf("forward: socks request: %w", err)
	}
	// The command is checked after the whole request is read, so that the
	// reply is not sent into the middle of it.
	if hdr[1] != cmdConnect {
		return "", &socksError{repCmdNotSupported, fmt.Sprintf("command %d: only CONNECT is supported", hdr[1])}
	}
	port := binary.BigEndian.Uint16(p[:])
	if port == 0 {
		return "", &socksError{repGeneralFailure, "port 0"}
	}
	return net.JoinHostPort(host, strconv.Itoa(int(port))), nil
}

// checkDomain refuses names that would change meaning once joined with a
// port or handed to a resolver.
func checkDomain(d []byte) error {
	if len(d) == 0 {
		return errors.New("empty domain name")
	}
	for _, c := range d {
		if c <= ' ' || c >= 0x7f || c == ':' || c == '/' || c == '[' || c == ']' {
			return fmt.Errorf("domain name has byte %#x", c)
		}
	}
	return nil
}

// writeReply writes a reply (§6); bound names the dialed conn's local
// address on success, 0.0.0.0:0 otherwise.
func writeReply(w io.Writer, code byte, bound net.Addr) error {
	ap := netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
	if ta, ok := bound.(*net.TCPAddr); ok && ta != nil {
		ap = ta.AddrPort()
	}
	b := make([]byte, 0, 22)
	b = append(b, socksVersion, code, 0)
	if a := ap.Addr().Unmap(); a.Is4() {
		b = append(b, atypIPv4)
		b = append(b, a.AsSlice()...)
	} else {
		b = append(b, atypIPv6)
		b = append(b, a.AsSlice()...)
	}
	b = binary.BigEndian.AppendUint16(b, ap.Port())
	_, err := w.Write(b)
	return err
}

// replyCode maps a dial error to the SOCKS reply that explains it best.
func replyCode(err error) byte {
	var oce *ssh.OpenChannelError
	var ne net.Error
	switch {
	case errors.As(err, &oce) && oce.Reason == ssh.Prohibited:
		return repNotAllowed
	case errors.As(err, &oce) && oce.Reason == ssh.ConnectionFailed,
		errors.Is(err, syscall.ECONNREFUSED):
		return repConnectionRefused
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return repHostUnreachable
	}
	return repGeneralFailure
}

// socksServe runs the SOCKS5 handshake on c and dials the requested target
// through h. On success c is ready for copying and the target is returned;
// on failure the client has been told why (when it got that far) and the
// caller closes c.
func socksServe(ctx context.Context, c net.Conn, h Host, handshake, dialTimeout time.Duration) (net.Conn, error) {
	// A deadline on c bounds a client that stalls mid-handshake; ctx ending
	// unblocks the reads too.
	_ = c.SetDeadline(time.Now().Add(handshake))
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	ok, err := readGreeting(c)
	if err != nil {
		return nil, err
	}
	if !ok {
		_, _ = c.Write([]byte{socksVersion, methodNoAccept})
		return nil, errors.New("forward: socks: client offers no acceptable method (only no-auth is supported)")
	}
	if _, err := c.Write([]byte{socksVersion, methodNoAuth}); err != nil {
		return nil, fmt.Errorf("forward: socks: %w", err)
	}
	target, err := readRequest(c)
	if err != nil {
		var se *socksError
		if errors.As(err, &se) {
			_ = writeReply(c, se.code, nil)
		}
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	t, err := h.Dial(dctx, "tcp", target)
	cancel()
	// The handshake's deadline bounds the client's greeting and request,
	// not the dial (dialTimeout does): one that outlasted it left c past
	// its deadline, and the reply to a connect the host made failed. The
	// reply gets a bound of its own; should ctx have ended meanwhile, stop
	// below says so.
	_ = c.SetDeadline(time.Now().Add(handshake))
	if err != nil {
		_ = writeReply(c, replyCode(err), nil)
		return nil, fmt.Errorf("forward: socks dial %s: %w", target, err)
	}
	if err := writeReply(c, repSucceeded, t.LocalAddr()); err != nil {
		_ = t.Close()
		return nil, fmt.Errorf("forward: socks: %w", err)
	}
	if !stop() || c.SetDeadline(time.Time{}) != nil {
		_ = t.Close()
		return nil, fmt.Errorf("forward: socks: %w", context.Cause(ctx))
	}
	return t, nil
}
