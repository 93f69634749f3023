package sshlayer

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/hostgate/hostgate/internal/testenv"
)

// tcpListeners is the addresses an sshd process listens on at port on
// this machine: what sshd really bound (testenv.TCPListeners says why
// not the port alone).
func tcpListeners(t testing.TB, port int) []net.IP {
	t.Helper()
	var ips []net.IP
	for _, l := range testenv.TCPListeners(t, sshdSockets(t), port) {
		ips = append(ips, l.IP)
	}
	return ips
}

// sshdListener is the socket an sshd process listens on at a, or "".
// Off Linux (no /proc) it dials a instead, and names a if that connects.
func sshdListener(t testing.TB, a *net.TCPAddr) string {
	t.Helper()
	return testenv.ListenerSocketAmong(t, a, sshdSockets)
}

// srvListener is the socket this process listens on at ip and port, or
// "".
func srvListener(t testing.TB, ip net.IP, port int) string {
	t.Helper()
	return testenv.ListenerSocket(t, &net.TCPAddr{IP: ip, Port: port})
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
		for l := range testenv.Sockets(t, p.Name()) {
			socks[l] = true
		}
	}
	return socks
}
