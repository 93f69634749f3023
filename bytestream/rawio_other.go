//go:build !linux

package bytestream

import (
	"errors"
	"net"
)

// rawWriter is Linux's (rawio_linux.go); elsewhere a cork writes through
// the conn.
type rawWriter struct{ conn net.Conn }

func newRawWriter(net.Conn) *rawWriter { return nil }

func (*rawWriter) writev(net.Buffers) (int64, error) {
	return 0, errors.New("bytestream: raw writes are not supported here")
}
