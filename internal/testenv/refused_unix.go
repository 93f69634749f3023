//go:build unix

package testenv

import (
	"net"
	"strconv"
	"syscall"
	"testing"
)

// RefusedAddr returns a loopback address that refuses connections for the
// whole test: a socket bound to the port but never listening holds it, so
// no other test can take the port, as it could between closing a listener
// and dialing its old address.
func RefusedAddr(t testing.TB) string {
	t.Helper()
	// Plain syscall.Socket (no SOCK_CLOEXEC, which not every platform has):
	// a child that inherits the socket only keeps the port refusing longer.
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
}
