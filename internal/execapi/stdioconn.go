package execapi

import (
	"io"
	"net"
	"os"
	"time"
)

// Stdio is a long-lived command's stdin and stdout (dockerhost.Stdio).
type Stdio interface {
	io.ReadWriteCloser
	// CloseWrite closes the command's stdin.
	CloseWrite() error
}

// stdioConn makes a Stdio the net.Conn the multiplexer takes. Deadlines
// are not supported (the mux bounds its writes with its own timer).
type stdioConn struct{ Stdio }

var _ net.Conn = stdioConn{}

func (stdioConn) LocalAddr() net.Addr              { return stdioAddr{} }
func (stdioConn) RemoteAddr() net.Addr             { return stdioAddr{} }
func (stdioConn) SetDeadline(time.Time) error      { return os.ErrNoDeadline }
func (stdioConn) SetReadDeadline(time.Time) error  { return os.ErrNoDeadline }
func (stdioConn) SetWriteDeadline(time.Time) error { return os.ErrNoDeadline }

type stdioAddr struct{}

func (stdioAddr) Network() string { return "docker-exec" }
func (stdioAddr) String() string  { return "docker-exec" }
