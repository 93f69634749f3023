package gateway

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/hostgate/hostgate/internal/proxyproto"
)

// maxForwardedHops bounds how many X-Forwarded-For entries are looked at.
const maxForwardedHops = 32

// ParseTrustedProxies parses comma-separated CIDRs or addresses (an
// address is its own /32 or /128), as --trusted-proxy takes them.
func ParseTrustedProxies(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			// Peers are matched unmapped, so "::ffff:10.0.0.0/104" is
			// 10.0.0.0/8: kept mapped, it matched no peer at all.
			if p.Addr().Is4In6() && p.Bits() >= 96 {
				p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, &net.ParseError{Type: "CIDR or IP address", Text: f}
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// clientIP is the IP of the client a request comes from. A request from a
// trusted proxy (Config.TrustedProxies: the TLS-terminating proxy the
// README puts in front) comes from the last X-Forwarded-For entry that is
// not itself a trusted proxy; anything else is the peer itself, so a
// client cannot pick its own address (and rate-limit bucket) by sending
// the header. Behind a proxy without this, every caller would share the
// proxy's address: one source of bad tokens would lock everyone out.
func (s *Server) clientIP(r *http.Request) string {
	if c, ok := s.forwardedFor(r); ok {
		return c.Addr().String()
	}
	return peerIP(r)
}

// ClientIP is the IP of the client r comes from: named by a trusted
// proxy's X-Forwarded-For when r comes through one, else r's peer. Routes
// added on the gateway that tell others who the caller is (the preview's
// X-Forwarded-For to a dev server) say this.
func (s *Server) ClientIP(r *http.Request) string { return s.clientIP(r) }

// forwardedFor is the client a trusted proxy in front of r's peer named
// (forwardedEntry), with its entry's port; false when the peer is no
// trusted proxy or named none.
func (s *Server) forwardedFor(r *http.Request) (netip.AddrPort, bool) {
	if len(s.cfg.TrustedProxies) == 0 {
		return netip.AddrPort{}, false
	}
	a, err := netip.ParseAddr(peerIP(r))
	if err != nil || !trusted(s.cfg.TrustedProxies, a.Unmap()) {
		return netip.AddrPort{}, false
	}
	return forwardedEntry(r.Header.Values("X-Forwarded-For"), s.cfg.TrustedProxies)
}

// remote is what logs and the audit log record as the caller: the
// request's peer, and the forwarded client when it differs.
func (s *Server) remote(r *http.Request) string {
	c := s.clientIP(r)
	if c == peerIP(r) {
		return r.RemoteAddr
	}
	return c + " (via " + r.RemoteAddr + ")"
}

func peerIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func trusted(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// forwardedEntry walks X-Forwarded-For from the right (the entry the
// nearest proxy added) past trusted proxies and returns the first other
// address, with that entry's port where it has the "v4:port" or
// "[v6]:port" form (0 where it has none: not the port of an entry the
// client prepended naming its own address), looking at most
// maxForwardedHops entries: only the right end is the proxies' own, so a
// client that pads the left cannot push the answer back to the proxy's
// address. A malformed entry ends the walk with no answer: what lies left
// of it cannot be trusted either.
func forwardedEntry(values []string, proxies []netip.Prefix) (netip.AddrPort, bool) {
	hops := 0
	for i := len(values) - 1; i >= 0; i-- {
		v := values[i]
		for v != "" && hops < maxForwardedHops {
			var e string
			if j := strings.LastIndexByte(v, ','); j >= 0 {
				v, e = v[:j], v[j+1:]
			} else {
				v, e = "", v
			}
			hops++
			e = strings.TrimSpace(e)
			var port uint16
			a, err := netip.ParseAddr(e)
			if err != nil {
				// "[v6]:port" and "v4:port" forms.
				ap, perr := netip.ParseAddrPort(e)
				if perr != nil {
					return netip.AddrPort{}, false
				}
				a, port = ap.Addr(), ap.Port()
			}
			a = a.Unmap().WithZone("")
			if !trusted(proxies, a) {
				return netip.AddrPortFrom(a, port), true
			}
		}
	}
	return netip.AddrPort{}, false
}

// callerHeader is the request's client as a host is told it (a stream's
// caller preamble): clientIP's address with the port it came from (the
// peer's, or the port of the X-Forwarded-For entry that named a forwarded
// client, 0 where it has none), and the gateway's address it reached. Src
// is not valid when the peer is not an address.
func (s *Server) callerHeader(r *http.Request) proxyproto.Header {
	var h proxyproto.Header
	src, ok := s.forwardedFor(r)
	if !ok {
		peer, err := netip.ParseAddrPort(r.RemoteAddr)
		if err != nil {
			return h
		}
		src = peer
	}
	h.Src = netip.AddrPortFrom(src.Addr().Unmap().WithZone(""), src.Port())
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if ap, err := netip.ParseAddrPort(la.String()); err == nil {
			h.Dst = ap
		}
	}
	return h
}

type callerKey struct{}

// WithCaller returns ctx carrying r's client as the caller a stream opened
// under it names to the host (Tunnels.Open, HostClients.Dial): a host
// whose agent reads caller preambles reports it in SSH_CONNECTION and its
// logs. A stream opened without one names no caller (PROXY UNKNOWN).
func (s *Server) WithCaller(ctx context.Context, r *http.Request) context.Context {
	return context.WithValue(ctx, callerKey{}, s.callerHeader(r))
}

// callerOf is the caller WithCaller put in ctx, or an unknown one.
func callerOf(ctx context.Context) proxyproto.Header {
	h, _ := ctx.Value(callerKey{}).(proxyproto.Header)
	return h
}
