package bytestream

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// Predialed is a connection to a WebSocket server made ahead of the dial
// that will use it (PredialWebSocket).
type Predialed struct {
	addr string // host:port, as the transport dials it
	tls  bool
	at   time.Time

	mu   sync.Mutex
	conn net.Conn // *corkConn, or *tlsFrames over TLS; nil once taken or closed
}

// predialMaxAge is how long a predialed conn is used for: a server gives a
// new connection's request a while before it hangs up (the gateway 10 s,
// its ReadHeaderTimeout), and a handshake sent on a conn it hung up on
// fails where a new conn would have served.
const predialMaxAge = 5 * time.Second

// PredialWebSocket makes the connection a WebSocket dial of url with opts
// would make first (TCP, and TLS to a wss:// server) and sends nothing on
// it: a program that learns only later whether it dials (a client waiting
// for the certificate that may name a direct path to its host) makes the
// connection meanwhile, and the dial given it (WebSocketOptions.Predialed)
// sends its handshake at once, a round trip sooner, two over TLS. Where
// this package's transport would not dial the server itself (a caller's
// HTTPClient, a proxy), it dials nothing and returns a Predialed that no
// dial takes. Close it once the dial is done, or not to be: a dial that
// took the connection owns it.
func PredialWebSocket(ctx context.Context, rawURL string, opts *WebSocketOptions) (*Predialed, error) {
	var o WebSocketOptions
	if opts != nil {
		o = *opts
	}
	ws, err := websocketURL(rawURL)
	if err != nil {
		return nil, err
	}
	if o.HTTPClient != nil {
		return &Predialed{}, nil
	}
	u, _ := url.Parse(ws) // websocketURL parsed it
	secure := u.Scheme == "wss"
	hu := *u
	hu.Scheme = map[bool]string{false: "http", true: "https"}[secure]
	cd := defaultCork()
	if o.RootCAs != nil {
		cd = newCorkDialer(o.RootCAs)
	}
	if cd.tr.Proxy != nil {
		if pu, err := cd.tr.Proxy(&http.Request{URL: &hu}); err != nil || pu != nil {
			return &Predialed{}, nil // the proxy's to dial, through its CONNECT or not
		}
	}
	port := u.Port()
	if port == "" {
		port = map[bool]string{false: "80", true: "443"}[secure]
	}
	p := &Predialed{addr: net.JoinHostPort(u.Hostname(), port), tls: secure, at: time.Now()}
	if secure {
		p.conn, err = cd.dialTLS(ctx, "tcp", p.addr)
	} else {
		p.conn, err = cd.dialTCP(ctx, "tcp", p.addr)
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// take hands the conn to the dial of addr (over TLS or not) that is the
// first to ask, where it is the conn for that dial and still fresh.
func (p *Predialed) take(addr string, tls bool) net.Conn {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.conn
	if c == nil || addr != p.addr || tls != p.tls {
		return nil
	}
	p.conn = nil
	if time.Since(p.at) > predialMaxAge {
		_ = c.Close()
		return nil
	}
	return c
}

// Close closes the connection unless a dial took it.
func (p *Predialed) Close() error {
	p.mu.Lock()
	c := p.conn
	p.conn = nil
	p.mu.Unlock()
	if c == nil {
		return nil
	}
	return c.Close()
}

// predialed is the slot's predialed conn for a dial of addr, or nil.
func (s *corkSlot) predialed(addr string, tls bool) net.Conn {
	if s == nil {
		return nil
	}
	return s.pre.take(addr, tls)
}
