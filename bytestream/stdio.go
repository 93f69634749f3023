package bytestream

import (
	"net"
	"os"
	"sync"
)

// Stdio returns this process's stdin and stdout as one stream (for `agent
// serve --stdio` and `gateway proxy`). The conn owns file descriptors 0 and
// 1: Close closes them, CloseWrite closes fd 1 (EOF to the peer), and
// os.Stdin/os.Stdout must not be used afterwards. Every call returns the
// same conn.
//
// When fd 0 or 1 is a pipe or a socket it is switched to non-blocking mode so
// that the Go poller serves it: deadlines then work and Close interrupts a
// blocked Read. A terminal or a regular file is left as it is (non-blocking
// mode is shared with every process holding the same open file, so switching
// a terminal would disturb the shell); deadlines then return os.ErrNoDeadline.
func Stdio() net.Conn { return stdio() }

var stdio = sync.OnceValue(func() net.Conn {
	return NewPipeConn(pollable(os.Stdin, 0, "stdin"), pollable(os.Stdout, 1, "stdout"))
})
