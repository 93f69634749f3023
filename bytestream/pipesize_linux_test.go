package bytestream

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// A pipe on stdio grows to 1 MiB: ssh, writing to `gateway proxy` through
// a 64 KiB pipe, kept what the pipe would not take in buffers it
// reallocated and unmapped, a third of its system time in a bulk forward.
func TestStdioPipeGrows(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for _, f := range []*os.File{r, w} {
		// pollable returns a new *os.File for fd, as it does for fd 0
		// and 1 beside os.Stdin and os.Stdout: f stays the stat's source
		// and a dup is the fd, so that no two Files own one fd (a
		// second owner's finalizer would close the fd's next user).
		fd, err := unix.Dup(int(f.Fd()))
		if err != nil {
			t.Fatal(err)
		}
		p := pollable(f, fd, "pipe")
		size, err := unix.FcntlInt(uintptr(fd), unix.F_GETPIPE_SZ, 0)
		_ = p.Close()
		if err != nil {
			t.Fatal(err)
		}
		if size != pipeSize {
			t.Errorf("%s end: pipe holds %d bytes, want %d", f.Name(), size, pipeSize)
		}
	}
}
