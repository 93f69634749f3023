package bytestream

import (
	"context"
	"fmt"
	"net"
	"strconv"
)

// TCP dials host:port over TCP and fails if it cannot connect. ctx bounds the
// dial only; the returned *net.TCPConn lives until Close and supports
// deadlines and CloseWrite.
func TCP(ctx context.Context, host string, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("bytestream: dial tcp: port %d out of range", port)
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("bytestream: dial tcp %s: %w", addr, err)
	}
	return c, nil
}
