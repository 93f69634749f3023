//go:build unix

package testenv

import (
	"errors"
	"fmt"
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
	fd, port, err := holdPort(net.IPv4(127, 0, 0, 1), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// RefusedLocalhostPort returns a port that refuses connections on
// 127.0.0.1 and, where the machine has an IPv6 loopback, on ::1, for the
// whole test: "localhost" as the agent dials it (both addresses, a
// preview's dial among them). A port RefusedAddr holds on 127.0.0.1 alone
// may be another server's on ::1, which such a dial reaches.
func RefusedLocalhostPort(t testing.TB) int {
	t.Helper()
	// A port free on 127.0.0.1 may be taken on ::1: try others.
	for range 100 {
		fd4, port, err := holdPort(net.IPv4(127, 0, 0, 1), 0)
		if err != nil {
			t.Fatal(err)
		}
		fd6, _, err := holdPort(net.IPv6loopback, port)
		switch {
		case err == nil:
			t.Cleanup(func() { _ = syscall.Close(fd4); _ = syscall.Close(fd6) })
			return port
		case errors.Is(err, syscall.EADDRINUSE):
			_ = syscall.Close(fd4)
		case errors.Is(err, syscall.EAFNOSUPPORT) || errors.Is(err, syscall.EADDRNOTAVAIL):
			// No IPv6 loopback here: nothing listens on ::1.
			t.Cleanup(func() { _ = syscall.Close(fd4) })
			return port
		default:
			_ = syscall.Close(fd4)
			t.Fatal(err)
		}
	}
	t.Fatal("testenv.RefusedLocalhostPort: 100 ports free on 127.0.0.1 were all taken on ::1")
	return 0
}

// HoldRefusing holds addr, a loopback IP and port ("127.0.0.1:8000",
// "[::1]:8000"), bound but not listening until release is called or the
// test ends: a dial there is refused, and no other server takes the
// address meanwhile. A server listening on ::1 alone at a port is then
// reached by a dial of "localhost" at it, whatever else runs on the
// machine. The error is the bind's (EADDRINUSE: something holds addr).
func HoldRefusing(t testing.TB, addr string) (release func(), err error) {
	t.Helper()
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ip := net.ParseIP(host)
	port, err := strconv.Atoi(p)
	if ip == nil || err != nil || port == 0 {
		return nil, fmt.Errorf("testenv.HoldRefusing %q: want a loopback IP and a port other than 0", addr)
	}
	fd, _, err := holdPort(ip, port)
	if err != nil {
		return nil, err
	}
	closed := false
	release = func() {
		if !closed {
			closed = true
			_ = syscall.Close(fd)
		}
	}
	t.Cleanup(release)
	return release, nil
}

// holdPort binds a TCP socket to ip at port (0: the kernel picks one) and
// never listens on it; it returns the socket and its port.
func holdPort(ip net.IP, port int) (int, int, error) {
	var sa syscall.Sockaddr
	family := syscall.AF_INET
	if ip4 := ip.To4(); ip4 != nil {
		sa = &syscall.SockaddrInet4{Port: port, Addr: [4]byte(ip4)}
	} else {
		family = syscall.AF_INET6
		sa = &syscall.SockaddrInet6{Port: port, Addr: [16]byte(ip.To16())}
	}
	// Close-on-exec, set under ForkLock as package net does (SOCK_CLOEXEC
	// is not on every Unix): a child inheriting the socket would hold the
	// port past HoldRefusing's release (Chromium, started by a browser
	// test, kept a restarted dev server from binding it).
	syscall.ForkLock.RLock()
	fd, err := syscall.Socket(family, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return -1, 0, fmt.Errorf("testenv: socket for %v: %w", ip, err)
	}
	if family == syscall.AF_INET6 {
		// ::1 alone, not the IPv4 addresses a dual-stack socket takes.
		_ = syscall.SetsockoptInt(fd, syscall.IPPROTO_IPV6, syscall.IPV6_V6ONLY, 1)
	}
	if err := syscall.Bind(fd, sa); err != nil {
		_ = syscall.Close(fd)
		return -1, 0, fmt.Errorf("testenv: bind %s: %w", net.JoinHostPort(ip.String(), strconv.Itoa(port)), err)
	}
	got, err := syscall.Getsockname(fd)
	if err != nil {
		_ = syscall.Close(fd)
		return -1, 0, err
	}
	switch a := got.(type) {
	case *syscall.SockaddrInet4:
		port = a.Port
	case *syscall.SockaddrInet6:
		port = a.Port
	}
	return fd, port, nil
}
