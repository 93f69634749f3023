package bytestream

import (
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
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
// On Linux a pipe also grows to 1 MiB (growPipe).
//
// A peer that closes its end makes a write fail with EPIPE, an error the
// caller sees as the peer leaving. Without this, the Go runtime kills a
// process whose write to a broken pipe on fd 1 fails, with SIGPIPE: an
// agent serving a mux tunnel died so, answering a peer that had closed
// (TestServeStdioMux, under load). Children still start with SIGPIPE at
// its default: the runtime resets the signals it handles when it forks.
func Stdio() net.Conn { return stdio() }

var stdio = sync.OnceValue(func() net.Conn {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	return NewPipeConn(pollable(os.Stdin, 0, "stdin"), pollable(os.Stdout, 1, "stdout"))
})
