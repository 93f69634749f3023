package bytestream

import (
	"bufio"
	"net"
	"testing"
)

// Over a WebSocket, whose reads come out of coder/websocket's buffer,
// muxConn reads without a buffer of its own: one was 4 KiB of every idle
// agent tunnel on a gateway, for as long as the agent stayed. Over a conn
// that does not buffer (TCP, the pipes of a stdio mux) it keeps one, or
// every frame header would be a read syscall.
func TestMuxConnReadBuffer(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pair     pairFunc
		buffered bool
	}{
		{"websocket", wsPair, false},
		{"websocket+tls", wssPair, false},
		{"tcp", tcpPair, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := tc.pair(t)
			for _, conn := range []net.Conn{a, b} {
				mc := newMuxConn(conn, 0, 0)
				_, own := mc.br.(*bufio.Reader)
				if own != tc.buffered {
					t.Errorf("%T: muxConn has a read buffer of its own: %v, want %v", conn, own, tc.buffered)
				}
			}
		})
	}
}
