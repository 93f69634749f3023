//go:build unix

package testenv

import (
	"errors"
	"net"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// RefusedAddr refuses every dial, promptly, and keeps doing so.
func TestRefusedAddr(t *testing.T) {
	addr := RefusedAddr(t)
	for range 3 {
		c, err := net.DialTimeout("tcp", addr, 30*time.Second)
		if err == nil {
			c.Close()
			t.Fatalf("dial %s succeeded", addr)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial %s: %v, want ECONNREFUSED", addr, err)
		}
	}
}

// RefusedLocalhostPort refuses on both loopbacks, and no server can take
// the port on either.
func TestRefusedLocalhostPort(t *testing.T) {
	port := strconv.Itoa(RefusedLocalhostPort(t))
	for _, host := range []string{"127.0.0.1", "::1"} {
		addr := net.JoinHostPort(host, port)
		c, err := net.DialTimeout("tcp", addr, 30*time.Second)
		if err == nil {
			c.Close()
			t.Fatalf("dial %s succeeded", addr)
		}
		if host == "::1" && (errors.Is(err, syscall.EADDRNOTAVAIL) || errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EAFNOSUPPORT)) {
			continue // no IPv6 loopback here
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial %s: %v, want ECONNREFUSED", addr, err)
		}
		if ln, err := net.Listen("tcp", addr); err == nil {
			ln.Close()
			t.Fatalf("listen on %s succeeded while it is held", addr)
		}
	}
}

// HoldRefusing holds the address until release, and then lets it go.
func TestHoldRefusing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if _, err := HoldRefusing(t, addr); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("hold of %s, where a server listens: %v, want EADDRINUSE", addr, err)
	}
	ln.Close()
	release, err := HoldRefusing(t, addr)
	if err != nil {
		t.Fatal(err)
	}
	// A child started meanwhile (a browser, a dev server) does not keep
	// the address once released.
	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	if c, err := net.DialTimeout("tcp", addr, 30*time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("dial %s while held: %v, want ECONNREFUSED", addr, err)
	}
	release()
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s once released: %v", addr, err)
	}
	ln.Close()
	release() // again, as the test's end does: a no-op
}
