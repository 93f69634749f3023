package bicopy

import (
	"errors"
	"net"
	"sync/atomic"
)

// ErrWatch is a connection handed to Copy whose Read and Write report
// the errors Match takes to Seen as they return them, once per connection.
// An early dial's refused connect (hostgate.ErrConnectFailed) comes from
// its first Read or Write, and Copy closes the other side before it
// returns that error: a forward that recorded it from Copy's error let
// its client see the close before the failure was counted, so a program
// asking right after its failed request found none. Wrap only an early
// dial's conn (an SSH channel, never a socket Copy would splice): the
// wrapper hides a socket from the kernel copy.
type ErrWatch struct {
	net.Conn
	Match func(error) bool
	Seen  func(error)
	seen  atomic.Bool
}

func (w *ErrWatch) Read(p []byte) (int, error) {
	n, err := w.Conn.Read(p)
	if err != nil {
		w.Check(err)
	}
	return n, err
}

func (w *ErrWatch) Write(p []byte) (int, error) {
	n, err := w.Conn.Write(p)
	if err != nil {
		w.Check(err)
	}
	return n, err
}

// CloseWrite half-closes the connection where it can; an error otherwise,
// on which Copy closes it, as it does a connection without one.
func (w *ErrWatch) CloseWrite() error {
	if cw, ok := w.Conn.(closeWriter); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// Check reports err to Seen when Match takes it and none was reported
// yet: give it Copy's error, which a Read or Write may not have returned
// (the other side's failure, ctx's end).
func (w *ErrWatch) Check(err error) {
	if w.Match(err) && w.seen.CompareAndSwap(false, true) {
		w.Seen(err)
	}
}
