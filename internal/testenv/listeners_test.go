package testenv

import (
	"net"
	"runtime"
	"testing"
)

// ListenerSocket finds a listener while it listens, and not once it is
// closed, even with another listener at its address since.
func TestListenerSocket(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().(*net.TCPAddr)
	sock := ListenerSocket(t, a)
	if sock == "" {
		t.Fatalf("no socket found listening at %v", a)
	}
	if other := ListenerSocket(t, &net.TCPAddr{IP: net.IPv6loopback, Port: a.Port}); other != "" {
		t.Errorf("%v listens at [::1]:%d too: %s", a, a.Port, other)
	}
	_ = ln.Close()
	if got := ListenerSocket(t, a); got != "" {
		t.Fatalf("closed listener at %v found: %s", a, got)
	}
	again, err := net.Listen("tcp", a.String())
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if got := ListenerSocket(t, a); got == "" || got == sock {
		t.Errorf("a new listener at %v is %q, the closed one's was %s", a, got, sock)
	}
}
