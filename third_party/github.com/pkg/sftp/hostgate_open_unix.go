//go:build unix

package sftp

import (
	"io/fs"
	"os"
	"syscall"
)

// hostgate: change 25 (HOSTGATE.md). openNoWait opens path as
// os.OpenFile does, but never waits in open(2): a FIFO opened for reading
// waits there for a writer, and one opened for writing for a reader, for
// as long as none comes (a terminal device, for its carrier). The server
// runs in the SSH server's process, and its worker then held an OS thread,
// and the session its goroutines, past the client's end, and the server's
// Close waited for them without end. With O_NONBLOCK such an open returns
// at once (for writing without a reader, ENXIO); a FIFO cannot be read or
// written at an offset anyway (ESPIPE), as with OpenSSH's sftp-server.
// Every other file is put back in blocking mode, as os.OpenFile leaves it.
func openNoWait(path string, flag int, mode fs.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NONBLOCK, mode)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && fi.Mode()&fs.ModeNamedPipe != 0 {
		return f, nil
	}
	if err == nil {
		var rc syscall.RawConn
		if rc, err = f.SyscallConn(); err == nil {
			cerr := rc.Control(func(fd uintptr) { err = syscall.SetNonblock(int(fd), false) })
			if err == nil {
				err = cerr
			}
		}
	}
	if err != nil {
		_ = f.Close()
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return f, nil
}
