package hostgate

import (
	"context"
	"net"
	"time"
)

// Connection is what a Host's connect function returns.
type Connection struct {
	// Transport spawns processes. Required.
	Transport Transport
	// FS is the filesystem provider. Optional: nil means ExecProvider over
	// Transport.
	FS Provider
	// Forward carries port forwarding. Optional: without it Host.Forward,
	// Host.Dial and Host.Listen fail with ErrNotSupported.
	Forward Forwarder
	// Sync opens the separate connection the synchronous filesystem uses.
	// Optional: without it the synchronous filesystem fails with ENOTSUP.
	Sync *SyncSpec
	// Close releases the connection. Required. Called once, by Host.Close.
	Close func() error
	// Info is what the host is, when connecting learnt it (a gateway's
	// record of the host): Host.Info answers it from then on. Optional:
	// nil keeps the Info the Host was made with.
	Info *Info
	// Name names the host (its gateway id) in every error the Host's
	// methods return from then on, and in those of the processes, files,
	// connections and listeners they hand out: "host build-01: …".
	// Optional: empty keeps NewNamed's name, if any, else leaves errors as
	// the connection makes them.
	Name string
	// Done, when set, is closed once the connection has ended by itself
	// (the host's agent restarted, the gateway stopped, keepalives
	// failed): a Host made with Reconnect connects again on its next use,
	// and the errors met on this connection from then on match
	// ErrConnectionEnded. Close it before the operations cut by the loss
	// return their errors (the SSH client does), so that theirs match too.
	// Optional: nil means the loss cannot be seen, and such a Host keeps
	// the connection.
	Done <-chan struct{}

	// fs and fwd are FS and Forward naming the host in their errors; set
	// by the Host that made the connection, before it is shared.
	fs  Provider
	fwd Forwarder
}

// lost reports whether c has ended by itself (Done closed).
func (c *Connection) lost() bool {
	if c.Done == nil {
		return false
	}
	select {
	case <-c.Done:
		return true
	default:
		return false
	}
}

// Forwarder is the port-forwarding capability of a connection.
type Forwarder interface {
	// Dial opens a connection from the host to addr (SSH direct-tcpip).
	// A host that refuses it, or cannot connect, is ErrConnectFailed.
	Dial(ctx context.Context, network, addr string) (net.Conn, error)
	// Listen makes the host listen on addr (SSH tcpip-forward); connections
	// to it arrive through the returned listener. Closing the listener
	// cancels the forward on the host.
	Listen(ctx context.Context, network, addr string) (net.Listener, error)
}

// EarlyDialer is a Forwarder that can also open a connection whose first
// bytes need not wait for the host's connect (the SSH client to a hostgate
// server: early data). DialEarly returns before the host has connected;
// a refused connect then fails the connection's first Read or Write with
// ErrConnectFailed, and a connection to the host lost before its answer
// with the forwarder's connection-end error, not io.EOF. ctx bounds only
// the dial. Host.Forward and Host.DialEarly use it where the forwarder has
// it.
type EarlyDialer interface {
	DialEarly(ctx context.Context, network, addr string) (net.Conn, error)
}

// ConnectTimeout bounds a hostgate agent's connect to the target of a
// forwarded connection. A connection from DialEarly has no other bound on
// that connect (its ctx ends with the dial), and the connection's
// keepalive bounds the wait for the host's answer; a caller that needs a
// shorter bound dials with Dial and a ctx deadline.
const ConnectTimeout = 10 * time.Second

// SyncSpec tells the synchronous filesystem how to open its own, separate
// connection to the host. It must never reuse the host's main connection.
type SyncSpec struct {
	// Connect opens a new connection and returns its filesystem.
	Connect func(ctx context.Context) (*SyncConnection, error)
	// Timeout bounds each call; zero means 30 s.
	Timeout time.Duration
	// Name names the host in the synchronous filesystem's errors, as
	// Connection.Name does in a Host's: "host build-01: stat etc/x: …".
	// Optional: syncfs.FromHost falls back on the Host's Name.
	Name string
}

// SyncConnection is one connection of the synchronous filesystem.
type SyncConnection struct {
	FS    Provider
	Close func() error // optional
	// Done, when set, is closed once the connection has ended by itself
	// (the host's agent or the gateway restarted): the synchronous
	// filesystem's next call then connects again instead of failing on
	// it. Optional: nil means the loss is seen only by the call it fails.
	Done <-chan struct{}
	// Err, when set, says why the connection ended once Done is closed
	// (the SSH client's Wait): the calls that were under way on it fail
	// with that reason. Optional.
	Err func() error
}
