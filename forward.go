package hostgate

import (
	"fmt"
	"net"
	"strconv"
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
	if err := checkForwardPort("listen", s.Listen, 0); err != nil {
		return err
	}
	return checkForwardPort("connect", s.Connect, 1)
}

// checkForwardPort refuses an address whose port is no number from lo to
// 65535. An SSH forward carries a port number: a service name (":http")
// would be looked up where the caller listens or dials but refused by the
// host, so a spec's meaning would depend on its kind; and port 0, which
// picks a port to listen on, reaches nothing when dialed.
func checkForwardPort(field, addr string, lo uint64) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("hostgate: forward %s address %q: %w", field, addr, err)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n < lo {
		return fmt.Errorf("hostgate: forward %s address %q: the port %q is not a number from %d to 65535 (service names are not looked up)", field, addr, port, lo)
	}
	return nil
}
