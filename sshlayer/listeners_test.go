package sshlayer

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

// The listening sockets a test checks are looked up by who holds them,
// not dialed: once a listener is closed, its port is free for any other
// test's bind(0) on the machine, and a dial would reach that one. Nor by
// port alone: the kernel chooses a port for the address asked, so
// another server may listen at that port number on another address.

// listener is a listening TCP socket: its address, and its inode as fds'
// links read ("socket:[INODE]"), which tells it from a socket another
// server opened at the same address after it was closed.
type listener struct {
	ip   net.IP
	sock string
}

// listeners is the listening TCP sockets at port among socks, from
// /proc/net/tcp and tcp6.
func listeners(t testing.TB, socks map[string]bool, port int) []listener {
	t.Helper()
	var ls []listener
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
			ls = append(ls, listener{net.IP(raw), "socket:[" + fields[9] + "]"})
		}
	}
	return ls
}

// at is the socket of ls listening at ip, or "".
func at(ls []listener, ip net.IP) string {
	for _, l := range ls {
		if l.ip.Equal(ip) {
			return l.sock
		}
	}
	return ""
}

// tcpListeners is the addresses an sshd process listens on at port on
// this machine: what sshd really bound.
func tcpListeners(t testing.TB, port int) []net.IP {
	t.Helper()
	var ips []net.IP
	for _, l := range listeners(t, sshdSockets(t), port) {
		ips = append(ips, l.ip)
	}
	return ips
}

// sshdListener is the socket an sshd process listens on at a, or "".
// Off Linux (no /proc) it dials a instead, and names a if that connects.
func sshdListener(t testing.TB, a *net.TCPAddr) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		c, err := net.Dial("tcp", a.String())
		if err != nil {
			return ""
		}
		_ = c.Close()
		return a.String()
	}
	return at(listeners(t, sshdSockets(t), a.Port), a.IP)
}

// srvListener is the socket this process listens on at ip and port, or
// "".
func srvListener(t testing.TB, ip net.IP, port int) string {
	t.Helper()
	return at(listeners(t, fdSockets(t, "self"), port), ip)
}

// sshdSockets is the sockets open in this machine's sshd processes (sshd,
// and sshd-session where OpenSSH splits it off).
func sshdSockets(t testing.TB) map[string]bool {
	t.Helper()
	socks := map[string]bool{}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		comm, err := os.ReadFile("/proc/" + p.Name() + "/comm")
		if err != nil || !strings.HasPrefix(string(comm), "sshd") {
			continue // gone meanwhile, or not sshd
		}
		for l := range fdSockets(t, p.Name()) {
			socks[l] = true
		}
	}
	return socks
}

// fdSockets is the sockets open in process pid ("self" for this one);
// none when it is gone.
func fdSockets(t testing.TB, pid string) map[string]bool {
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
