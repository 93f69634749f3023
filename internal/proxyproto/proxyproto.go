// Package proxyproto is the caller preamble the gateway writes at the start
// of each stream to a host's SSH server, so that the server names the
// caller (SSH_CONNECTION, SSH_CLIENT, its logs) rather than the tunnel: the
// HAProxy PROXY protocol's version 1 line,
//
//	PROXY TCP4 203.0.113.7 192.0.2.1 51234 443\r\n
//
// (TCP6 for IPv6, "PROXY UNKNOWN\r\n" where no caller can be named), at
// most MaxLen bytes with its CRLF. Only a tunnel whose two ends agreed on it
// carries one (wire.HeaderCallerPreamble, agent.StdioKeys.CallerPreamble).
//
// The gateway's side (Stream) sends the line with the stream's first
// bytes, in one frame; the host's side (Accept) reads it strictly and
// bounded, and returns a conn whose RemoteAddr is the caller.
package proxyproto

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hostgate/hostgate/internal/yamux"
)

// MaxLen bounds a line, its CRLF included (the specification's longest,
// two full IPv6 addresses and ports).
const MaxLen = 107

const (
	prefix  = "PROXY "
	unknown = "UNKNOWN"
	crlf    = "\r\n"
)

// Header is what a line says: the caller (Src) and the address it reached
// (Dst). A Src that is not valid is UNKNOWN.
type Header struct {
	Src, Dst netip.AddrPort
}

// Known reports whether h names a caller.
func (h Header) Known() bool { return h.Src.IsValid() }

// Append appends h's line to b. Src and Dst are written unmapped; a Dst of
// another family than Src (or none) is written as that family's
// unspecified address and port 0, which the line's format needs and the
// host ignores.
func (h Header) Append(b []byte) []byte {
	src := netip.AddrPortFrom(h.Src.Addr().Unmap().WithZone(""), h.Src.Port())
	if !src.IsValid() {
		return append(b, prefix+unknown+crlf...)
	}
	dst := netip.AddrPortFrom(h.Dst.Addr().Unmap().WithZone(""), h.Dst.Port())
	fam := "TCP6 "
	if src.Addr().Is4() {
		fam = "TCP4 "
		if !dst.Addr().Is4() {
			dst = netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
		}
	} else if !dst.Addr().Is6() {
		dst = netip.AddrPortFrom(netip.IPv6Unspecified(), 0)
	}
	b = append(b, prefix+fam...)
	b = src.Addr().AppendTo(b)
	b = append(b, ' ')
	b = dst.Addr().AppendTo(b)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(src.Port()), 10)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(dst.Port()), 10)
	return append(b, crlf...)
}

// String is h's line without its CRLF.
func (h Header) String() string {
	b := h.Append(nil)
	return string(b[:len(b)-len(crlf)])
}

// ErrMalformed is wrapped by every error of a line that is not one.
var ErrMalformed = errors.New("proxyproto: malformed PROXY line")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
}

// Parse parses one line, CRLF included, strictly: "PROXY", one space, TCP4
// or TCP6 and exactly four fields each after one space (addresses of that
// family without zone, ports 0-65535 in decimal without leading zeros), or
// UNKNOWN followed by CRLF or by a space and anything up to CRLF (which
// the specification has the receiver ignore). Nothing may follow the CRLF.
func Parse(line []byte) (Header, error) {
	if len(line) > MaxLen {
		return Header{}, malformed("longer than %d bytes", MaxLen)
	}
	body, ok := bytes.CutSuffix(line, []byte(crlf))
	if !ok {
		return Header{}, malformed("no CRLF at its end")
	}
	if bytes.ContainsAny(body, "\r\n") {
		return Header{}, malformed("CR or LF inside the line")
	}
	rest, ok := bytes.CutPrefix(body, []byte(prefix))
	if !ok {
		return Header{}, malformed("does not start with %q", prefix)
	}
	if u, ok := bytes.CutPrefix(rest, []byte(unknown)); ok {
		if len(u) > 0 && u[0] != ' ' {
			return Header{}, malformed("unknown protocol %q", firstField(rest))
		}
		return Header{}, nil
	}
	fields := bytes.Split(rest, []byte(" "))
	if len(fields) != 5 {
		return Header{}, malformed("want 5 fields after PROXY, got %d", len(fields))
	}
	var want4 bool
	switch string(fields[0]) {
	case "TCP4":
		want4 = true
	case "TCP6":
	default:
		return Header{}, malformed("unknown protocol %q", fields[0])
	}
	src, err := parseAddr(fields[1], want4)
	if err != nil {
		return Header{}, malformed("source address: %v", err)
	}
	dst, err := parseAddr(fields[2], want4)
	if err != nil {
		return Header{}, malformed("destination address: %v", err)
	}
	sport, err := parsePort(fields[3])
	if err != nil {
		return Header{}, malformed("source port: %v", err)
	}
	dport, err := parsePort(fields[4])
	if err != nil {
		return Header{}, malformed("destination port: %v", err)
	}
	return Header{Src: netip.AddrPortFrom(src, sport), Dst: netip.AddrPortFrom(dst, dport)}, nil
}

func firstField(b []byte) []byte {
	f, _, _ := bytes.Cut(b, []byte(" "))
	return f
}

func parseAddr(b []byte, want4 bool) (netip.Addr, error) {
	a, err := netip.ParseAddr(string(b))
	switch {
	case err != nil:
		return netip.Addr{}, err
	case a.Zone() != "":
		return netip.Addr{}, fmt.Errorf("%q has a zone", b)
	case want4 && !a.Is4():
		return netip.Addr{}, fmt.Errorf("%q is not IPv4", b)
	case !want4 && !a.Is6():
		return netip.Addr{}, fmt.Errorf("%q is not IPv6", b)
	}
	return a, nil
}

func parsePort(b []byte) (uint16, error) {
	if len(b) == 0 || len(b) > 5 || (len(b) > 1 && b[0] == '0') {
		return 0, fmt.Errorf("%q: want 0-65535 without leading zeros", b)
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%q: want decimal digits", b)
		}
		n = n*10 + int(c-'0')
	}
	if n > 65535 {
		return 0, fmt.Errorf("%q: over 65535", b)
	}
	return uint16(n), nil
}

// Read reads one line from r and not much more: it reads at most MaxLen
// bytes, and rest is what came after the CRLF in them (the stream's own
// first bytes), which the caller must deliver before reading r again. An r
// that ends before its first byte is io.EOF; one that ends inside the line
// is io.ErrUnexpectedEOF. A line that cannot be one fails as soon as that
// shows, without waiting for more.
func Read(r io.Reader) (h Header, rest []byte, err error) {
	var buf [MaxLen]byte
	n := 0
	for {
		m, err := r.Read(buf[n:])
		n += m
		// The prefix, as far as it came: an SSH client's "SSH-2.0-…"
		// sent where a line was due fails at its first byte.
		if k := min(n, len(prefix)); string(buf[:k]) != prefix[:k] {
			return Header{}, nil, malformed("does not start with %q (got %q)", prefix, buf[:min(n, 16)])
		}
		if i := bytes.Index(buf[:n], []byte(crlf)); i >= 0 {
			h, perr := Parse(buf[:i+len(crlf)])
			if perr != nil {
				return Header{}, nil, perr
			}
			return h, bytes.Clone(buf[i+len(crlf) : n]), nil
		}
		if n == len(buf) {
			return Header{}, nil, malformed("no CRLF within %d bytes", MaxLen)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if n == 0 {
					return Header{}, nil, io.EOF
				}
				return Header{}, nil, fmt.Errorf("proxyproto: %w inside the PROXY line", io.ErrUnexpectedEOF)
			}
			return Header{}, nil, fmt.Errorf("proxyproto: read the PROXY line: %w", err)
		}
	}
}

// ReadTimeout bounds Accept's wait for a line: the gateway sends it with
// the stream's first bytes, or alone after flushDelay.
const ReadTimeout = 10 * time.Second

// Accept reads a stream's line (Read, within ReadTimeout) and returns the
// stream as the host's SSH server should see it: RemoteAddr is the caller
// (a *net.TCPAddr) when the line names one, and the stream's own
// otherwise. On an error the stream is closed.
func Accept(c net.Conn) (net.Conn, Header, error) {
	_ = c.SetReadDeadline(time.Now().Add(ReadTimeout))
	h, rest, err := Read(c)
	// An error here is a stream already closed, which its next Read says.
	_ = c.SetReadDeadline(time.Time{})
	if err != nil {
		_ = c.Close()
		return nil, Header{}, err
	}
	ac := &acceptedConn{Conn: c, rest: rest}
	if h.Known() {
		ac.remote = net.TCPAddrFromAddrPort(netip.AddrPortFrom(h.Src.Addr().Unmap(), h.Src.Port()))
	}
	return ac, h, nil
}

// acceptedConn is a stream after its line.
type acceptedConn struct {
	net.Conn
	remote net.Addr // nil: the stream's own
	rest   []byte   // read with the line, not yet delivered
}

func (c *acceptedConn) Read(p []byte) (int, error) {
	if len(c.rest) > 0 {
		n := copy(p, c.rest)
		c.rest = c.rest[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

func (c *acceptedConn) RemoteAddr() net.Addr {
	if c.remote != nil {
		return c.remote
	}
	return c.Conn.RemoteAddr()
}

// flushDelay is how long a stream whose first Read came before its first
// Write holds its line back for that Write: an SSH client sends its
// version at once, so the line rides with it; one that waits for the
// server's first (the server waits for the line) gets it this much later.
const flushDelay = 50 * time.Millisecond

// Stream is the gateway's end of a stream that carries a line: its first
// Write sends the line and the written bytes as one frame. Every other
// method is the yamux stream's (Shrink, SessionDone: the relay asks for
// them).
type Stream struct {
	*yamux.Stream

	sent    atomic.Bool // the line went (or failed to)
	mu      sync.Mutex  // held while the line is being sent
	pending []byte      // the line, until sent
	timer   *time.Timer // Read's flush, if armed
}

// NewStream returns st sending h's line first.
func NewStream(st *yamux.Stream, h Header) *Stream {
	return &Stream{Stream: st, pending: h.Append(make([]byte, 0, MaxLen))}
}

// Write sends p, after the line if it has not gone yet (in the same frame).
func (s *Stream) Write(p []byte) (int, error) {
	if s.sent.Load() {
		return s.Stream.Write(p)
	}
	s.mu.Lock()
	if s.pending == nil {
		s.mu.Unlock()
		return s.Stream.Write(p)
	}
	// Held across the write, so that no other Write goes ahead of the
	// line.
	defer s.mu.Unlock()
	if s.timer != nil {
		s.timer.Stop()
	}
	line := len(s.pending)
	b := append(s.pending, p...)
	s.pending = nil
	n, err := s.Stream.Write(b)
	s.sent.Store(true)
	return max(n-line, 0), err
}

// Read reads from the stream. The first one, while the line is held,
// sends the line alone flushDelay later unless a Write sends it first.
func (s *Stream) Read(p []byte) (int, error) {
	if !s.sent.Load() && s.mu.TryLock() { // held: the line is going
		if s.pending != nil && s.timer == nil {
			s.timer = time.AfterFunc(flushDelay, s.Flush)
		}
		s.mu.Unlock()
	}
	return s.Stream.Read(p)
}

// Flush sends the line now, alone, if it has not gone yet.
func (s *Stream) Flush() {
	if s.sent.Load() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == nil {
		return
	}
	b := s.pending
	s.pending = nil
	_, _ = s.Stream.Write(b) // a failed write fails the stream's next ones too
	s.sent.Store(true)
}
