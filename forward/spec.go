package forward

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/hostgate/hostgate"
)

// The kinds of forward. Local and Remote are the root package's kinds;
// Dynamic is SOCKS5.
const (
	Local                        = hostgate.ForwardLocal
	Remote                       = hostgate.ForwardRemote
	Dynamic hostgate.ForwardKind = "dynamic"
)

// Spec describes one forward.
type Spec struct {
	Kind hostgate.ForwardKind
	// Listen is the address to listen on ("127.0.0.1:0" picks a port): on the
	// caller's side for Local and Dynamic, on the host for Remote.
	Listen string
	// Connect is the address each accepted connection is dialed to. Empty for
	// Dynamic, where each SOCKS request names its own target.
	Connect string
}

// Validate checks the spec's shape.
func (s Spec) Validate() error {
	switch s.Kind {
	case Local, Remote:
		if _, _, err := net.SplitHostPort(s.Connect); err != nil {
			return fmt.Errorf("forward: connect address %q: %w", s.Connect, err)
		}
	case Dynamic:
		if s.Connect != "" {
			return fmt.Errorf("forward: dynamic forward takes no connect address (got %q)", s.Connect)
		}
	default:
		return fmt.Errorf("forward: kind %q: want %q, %q or %q", s.Kind, Local, Remote, Dynamic)
	}
	if _, _, err := net.SplitHostPort(s.Listen); err != nil {
		return fmt.Errorf("forward: listen address %q: %w", s.Listen, err)
	}
	return nil
}

// String renders the spec in OpenSSH's option syntax ("-L 8080:localhost:80").
func (s Spec) String() string {
	switch s.Kind {
	case Local:
		return "-L " + s.Listen + ":" + s.Connect
	case Remote:
		return "-R " + s.Listen + ":" + s.Connect
	case Dynamic:
		return "-D " + s.Listen
	}
	return fmt.Sprintf("%s %s %s", s.Kind, s.Listen, s.Connect)
}

// ParseSpec parses an OpenSSH forwarding argument: flag is "L", "R" or "D"
// and arg is "[bind_address:]port:host:hostport" (L, R) or
// "[bind_address:]port" (D). IPv6 addresses go in brackets. Without a bind
// address the forward listens on loopback, as OpenSSH does by default.
func ParseSpec(flag, arg string) (Spec, error) {
	if len(arg) > 1024 {
		return Spec{}, fmt.Errorf("forward: spec too long (%d bytes)", len(arg))
	}
	parts, err := splitColons(arg)
	if err != nil {
		return Spec{}, fmt.Errorf("forward: spec %q: %w", arg, err)
	}
	var kind hostgate.ForwardKind
	switch strings.TrimPrefix(flag, "-") {
	case "L":
		kind = Local
	case "R":
		kind = Remote
	case "D":
		kind = Dynamic
	default:
		return Spec{}, fmt.Errorf("forward: flag %q: want L, R or D", flag)
	}
	listenParts := 2
	if kind != Dynamic {
		switch len(parts) {
		case 3, 4:
			listenParts = len(parts) - 2
		default:
			return Spec{}, fmt.Errorf("forward: spec %q: want [bind_address:]port:host:hostport", arg)
		}
	} else if len(parts) > 2 {
		return Spec{}, fmt.Errorf("forward: spec %q: want [bind_address:]port", arg)
	}
	lp := parts[:min(listenParts, len(parts))]
	bind := "127.0.0.1"
	if len(lp) == 2 {
		bind = lp[0]
		if bind == "*" {
			bind = ""
		}
		lp = lp[1:]
	}
	if err := checkPort(lp[0]); err != nil {
		return Spec{}, fmt.Errorf("forward: spec %q: listen %w", arg, err)
	}
	s := Spec{Kind: kind, Listen: net.JoinHostPort(bind, lp[0])}
	if kind != Dynamic {
		host, port := parts[len(parts)-2], parts[len(parts)-1]
		if host == "" {
			return Spec{}, fmt.Errorf("forward: spec %q: empty connect host", arg)
		}
		if err := checkPort(port); err != nil {
			return Spec{}, fmt.Errorf("forward: spec %q: connect %w", arg, err)
		}
		s.Connect = net.JoinHostPort(host, port)
	}
	return s, s.Validate()
}

// splitColons splits at colons outside brackets and drops the brackets.
func splitColons(s string) ([]string, error) {
	var (
		parts []string
		cur   strings.Builder
		inBr  bool
	)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '[' && !inBr && cur.Len() == 0:
			inBr = true
		case c == ']' && inBr:
			inBr = false
			if i+1 < len(s) && s[i+1] != ':' {
				return nil, fmt.Errorf("text after ']'")
			}
		case c == ':' && !inBr:
			parts = append(parts, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	if inBr {
		return nil, fmt.Errorf("unclosed '['")
	}
	return append(parts, cur.String()), nil
}

func checkPort(p string) error {
	if _, err := strconv.ParseUint(p, 10, 16); err != nil {
		return fmt.Errorf("port %q: not a number in 0-65535", p)
	}
	return nil
}
