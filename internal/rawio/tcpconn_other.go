//go:build !linux

package rawio

import "net"

// NewTCPConn returns c: raw calls are Linux's (tcpconn_linux.go).
func NewTCPConn(c net.Conn) net.Conn { return c }
