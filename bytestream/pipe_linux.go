//go:build linux

package bytestream

import (
	"os"
	"syscall"

	"github.com/hostgate/hostgate/internal/rawio"
)

// rawStream is x's raw reader or writer (internal/rawio says why) where x
// is an *os.File the runtime polls, a pipe or a socket in non-blocking
// mode (Stdio's, os/exec's): `gateway proxy` and `agent serve --stdio`
// move a tunnel's bytes through them. Nil for anything else: a raw call
// on a blocking descriptor (a terminal, a file) would hold its thread's P
// while it waited.
func rawStream(x any) *rawio.Stream {
	f, ok := x.(*os.File)
	if !ok {
		return nil
	}
	raw, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	nonblocking := false
	if err := raw.Control(func(fd uintptr) {
		flags, _, e := syscall.RawSyscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
		nonblocking = e == 0 && flags&syscall.O_NONBLOCK != 0
	}); err != nil || !nonblocking {
		return nil
	}
	return rawio.NewStream(raw)
}
