package bytestream

import "golang.org/x/sys/unix"

// pipeSize is what growPipe asks for: Linux's default pipe-max-size, the
// most an unprivileged process may set.
const pipeSize = 1 << 20

// growPipe raises a pipe's capacity from Linux's default 64 KiB to
// pipeSize. A ProxyCommand's stdio are pipes to ssh: at 64 KiB, ssh's
// writes stop after each 64 KiB, its output buffer grows past malloc's
// mmap threshold, and every drain unmaps it again — two thirds of ssh's
// system time in a bulk forward through `gateway proxy`. A failure (a
// lowered pipe-max-size, the user's pipe quota spent) leaves the pipe as
// it was, which works, only slower.
func growPipe(fd int) {
	_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETPIPE_SZ, pipeSize)
}
