package hostgate

import (
	"context"
	"errors"
	"fmt"
	"syscall"
)

// ErrClosed is returned by every method of a Host after Close.
var ErrClosed = errors.New("hostgate: host closed")

// ErrNotSupported is returned when a host's connection lacks a capability
// (forwarding, the synchronous filesystem). errors.Is matches it against
// errors.ErrUnsupported and syscall.ENOTSUP too.
var ErrNotSupported error = notSupported{}

type notSupported struct{}

func (notSupported) Error() string { return "hostgate: not supported by this host" }
func (notSupported) Is(target error) bool {
	return target == errors.ErrUnsupported || target == syscall.ENOTSUP
}

// ErrOutputLimit is matched by Host.Exec's error when a process wrote
// more than the output limit (ExecOptions.MaxOutput, which the error
// names); the process is killed. ExecProvider's calls match it too when
// the host's answer passes the most they read.
var ErrOutputLimit = errors.New("hostgate: output limit exceeded")

// ErrConnectionEnded is why a forward stopped when its host connection
// ended, and what every error of a Host matches once its connection has
// ended by itself (the host's agent stopped or restarted, the gateway
// restarted, keepalives failed, a sandbox ended): those of its methods
// and of the processes, files, connections and listeners it handed out,
// for a connection that tells its end (Connection.Done, as the SSH
// client's does). Such an error keeps its type (a *fs.PathError stays
// one); on a named host its text starts "host NAME: connection ended
// (connect again): ". Dial the host again, or make it with Reconnect. An error
// after the caller's own Close is ErrClosed instead.
var ErrConnectionEnded = errors.New("hostgate: host connection ended")

// ErrConnectFailed is why a connection from the host to an address could
// not be made: the host refused the forwarded channel or could not connect
// (the SSH client wraps the SSH open failure too). Forwarder.Dial returns
// it; with EarlyDialer.DialEarly it comes from the connection's first Read
// or Write.
var ErrConnectFailed = errors.New("hostgate: host could not connect")

// ctxErr is why ctx ended, as every call of a Host reports it: the cause
// the caller gave (context.WithCancelCause, WithTimeoutCause), which
// ctx.Err() alone loses, still matching ctx.Err() (context.Canceled or
// DeadlineExceeded) for a caller that checks that; nil while ctx lives.
func ctxErr(ctx context.Context) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	cause := context.Cause(ctx)
	if cause == nil || errors.Is(cause, err) {
		return err
	}
	return fmt.Errorf("%w (%w)", cause, err)
}
