package hostgate

import (
	"fmt"
	"net"
)

// ForwardKind says which side listens.
type ForwardKind string

const (
	// ForwardLocal listens on the caller's side and connects on the host
	// (ssh -L).
	ForwardLocal ForwardKind = "local"
	// ForwardRemote listens on the host and connects on the caller's side
	// (ssh -R).
	ForwardRemote ForwardKind = "remote"
)

// ForwardSpec describes one port forward.
type ForwardSpec struct {
	Kind ForwardKind
	// Listen is the address to listen on ("127.0.0.1:0" picks a port). For
	// ForwardRemote an empty host part means loopback on the host.
	Listen string
	// Connect is the address each accepted connection is dialed to.
	Connect string
}

// Validate checks the spec's shape.
func (s ForwardSpec) Validate() error {
	switch s.Kind {
	case ForwardLocal, ForwardRemote:
	default:
		return fmt.Errorf("hostgate: forward kind %q: want %q or %q", s.Kind, ForwardLocal, ForwardRemote)
	}
	if _, _, err := net.SplitHostPort(s.Listen); err != nil {
		return fmt.Errorf("hostgate: forward listen address %q: %w", s.Listen, err)
	}
	if _, _, err := net.SplitHostPort(s.Connect); err != nil {
		return fmt.Errorf("hostgate: forward connect address %q: %w", s.Connect, err)
	}
	return nil
}
