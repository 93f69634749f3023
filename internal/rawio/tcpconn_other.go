//go:build !linux

package rawio

import "net"

// TCPConn is Linux's (tcpconn_linux.go); elsewhere there is none.
type TCPConn struct{ net.Conn }

// Raw returns nil: raw calls are Linux's.
func Raw(any) *TCPConn { return nil }

// NewTCPConn returns c: raw calls are Linux's.
func NewTCPConn(c net.Conn) net.Conn { return c }
