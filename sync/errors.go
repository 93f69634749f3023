package syncfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/hostgate/hostgate/third_party/github.com/pkg/sftp"

	"github.com/hostgate/hostgate"
)

// ErrTimeout is the error of a call that got no answer within the timeout.
// errors.Is(err, ErrTimeout), errors.Is(err, syscall.ETIMEDOUT) and
// errors.Is(err, os.ErrDeadlineExceeded) hold for it, and it has a Timeout
// method returning true, like a net.Error. A call's error says the bound
// it waited and what sets it.
var ErrTimeout error = timeoutError{}

// timeoutError is ErrTimeout, d the bound a call waited (zero in
// ErrTimeout itself).
type timeoutError struct{ d time.Duration }

func (e timeoutError) Error() string {
	if e.d <= 0 {
		return "syncfs: no answer within the timeout"
	}
	return fmt.Sprintf("syncfs: no answer within %v: the host or the path to it stopped answering, or the call needs longer (Options.Timeout); the next call connects again", e.d)
}
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }
func (timeoutError) Is(target error) bool {
	_, ours := target.(timeoutError)
	return ours || target == syscall.ETIMEDOUT || target == os.ErrDeadlineExceeded
}

// errNoSpec is the error of every call of an FS made without a sync spec.
// hostgate.ErrNotSupported matches syscall.ENOTSUP and errors.ErrUnsupported.
var errNoSpec = fmt.Errorf("%w: this synchronous filesystem was made without a sync spec to connect with (New with a nil SyncSpec or one without Connect): make it with FromHost, or New with the host's SyncSpec", hostgate.ErrNotSupported)

// errHostNoConnect is the error of every call of FromHost's FS whose host
// gave a sync spec without Connect.
var errHostNoConnect = fmt.Errorf("%w: the host's sync spec has no Connect (its Connection.Sync)", hostgate.ErrNotSupported)

// healthy reports whether err leaves the connection usable: nil or a
// filesystem answer (an io/fs sentinel, an errno the host returned, an SFTP
// status, a command's *hostgate.ExitError, hostgate.ErrOutputLimit: a
// provider's bound on one answer, past which ExecProvider kills that
// call's command and no other). The end of a file never gets here (reads
// handle it), so io.EOF means the connection ended. Anything else — a
// closed pipe, a lost SFTP connection, an error the provider did not map
// — is taken as a broken connection: the connection is abandoned and the
// next call opens a fresh one. A spurious reconnect costs one connect;
// keeping a dead connection would fail every later call.
func healthy(err error) bool {
	if err == nil {
		return true
	}
	for _, transport := range []error{
		io.EOF, io.ErrUnexpectedEOF, io.ErrClosedPipe, net.ErrClosed, os.ErrDeadlineExceeded,
		syscall.EPIPE, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.ENOTCONN,
		syscall.ETIMEDOUT,
	} {
		if errors.Is(err, transport) {
			return false
		}
	}
	for _, answer := range []error{
		fs.ErrNotExist, fs.ErrExist, fs.ErrPermission, fs.ErrInvalid, errors.ErrUnsupported,
		hostgate.ErrOutputLimit,
	} {
		if errors.Is(err, answer) {
			return true
		}
	}
	// An SFTP status is the server's answer (pkg/sftp reports a lost
	// connection with another type).
	var status *sftp.StatusError
	if errors.As(err, &status) {
		return true
	}
	// So is a command's exit (ExecProvider's, where the tool's words name
	// no errno it maps: mv refusing to move a directory into itself, a
	// busy or over-quota file): the host ran it, and a lost connection is
	// another error. Taken for a broken connection, it gave up the
	// connection and every call and open file on it.
	var exit *hostgate.ExitError
	if errors.As(err, &exit) {
		return true
	}
	var errno syscall.Errno
	return errors.As(err, &errno)
}

// unwrapPath strips the provider's own *fs.PathError or link error, whose
// path is the host's, so that the error we return names the io/fs name once.
func unwrapPath(err error) error {
	switch e := err.(type) {
	case *fs.PathError:
		return e.Err
	case *hostgate.LinkError:
		return e.Err
	case *os.LinkError:
		return e.Err
	}
	return err
}
