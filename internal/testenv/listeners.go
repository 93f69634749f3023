package testenv

import (
	"encoding/hex"
	"errors"
	"io/fs"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// A test that a listener was released checks the very socket that
// listened, not its port: once closed, the port is free for any other
// test's bind(0) on the machine, which a dial would reach; and the
// kernel chooses a port for the address asked, so another server may
// listen at that port number on another address.

// Listener is a listening TCP socket: its address, and its inode as fds'
// links read ("socket:[INODE]"), which tells it from a socket opened at
// the same address after it was closed.
type Listener struct {
	IP   net.IP
	Sock string
}

// TCPListeners is the listening TCP sockets at port among socks (as
// Sockets returns them), from /proc/net/tcp and tcp6. Linux only.
func TCPListeners(t testing.TB, socks map[string]bool, port int) []Listener {
	t.Helper()
	var ls []Listener
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) && f == "/proc/net/tcp6" {
			continue // no IPv6
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) < 4 || fields[3] != "0A" { // TCP_LISTEN
				continue
			}
			hexIP, hexPort, _ := strings.Cut(fields[1], ":")
			if p, err := strconv.ParseUint(hexPort, 16, 16); err != nil || int(p) != port {
				continue
			}
			if len(fields) < 10 || !socks["socket:["+fields[9]+"]"] {
				continue
			}
			raw, err := hex.DecodeString(hexIP)
			if err != nil {
				t.Fatalf("%s: %q: %v", f, fields[1], err)
			}
			// The kernel prints each 32-bit word in host order
			// (little-endian here).
			for i := 0; i+4 <= len(raw); i += 4 {
				raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
			}
			ls = append(ls, Listener{net.IP(raw), "socket:[" + fields[9] + "]"})
		}
	}
	return ls
}

// SocketAt is the socket of ls listening at ip, or "".
func SocketAt(ls []Listener, ip net.IP) string {
	for _, l := range ls {
		if l.IP.Equal(ip) {
			return l.Sock
		}
	}
	return ""
}

// Sockets is the sockets open in process pid ("self" for this one), as
// their fds' links read: none when it is gone. Linux only.
func Sockets(t testing.TB, pid string) map[string]bool {
	t.Helper()
	socks := map[string]bool{}
	fds, err := os.ReadDir("/proc/" + pid + "/fd")
	if pid == "self" && err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if l, err := os.Readlink("/proc/" + pid + "/fd/" + fd.Name()); err == nil && strings.HasPrefix(l, "socket:[") {
			socks[l] = true
		}
	}
	return socks
}

// ListenerSocket is the socket this process listens on at a, or "". Off
// Linux (no /proc) it dials a instead, and names a if that connects.
func ListenerSocket(t testing.TB, a *net.TCPAddr) string {
	t.Helper()
	return ListenerSocketAmong(t, a, func(t testing.TB) map[string]bool { return Sockets(t, "self") })
}

// ListenerSocketAmong is ListenerSocket for the sockets socks returns
// (another process's, as Sockets reads them); socks is called on Linux
// only.
func ListenerSocketAmong(t testing.TB, a *net.TCPAddr, socks func(testing.TB) map[string]bool) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		c, err := net.Dial("tcp", a.String())
		if err != nil {
			return ""
		}
		_ = c.Close()
		return a.String()
	}
	return SocketAt(TCPListeners(t, socks(t), a.Port), a.IP)
}
