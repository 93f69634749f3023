//go:build linux

package bytestream

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// rawPipeConns returns two pipe conns over two os.Pipes, each end's pipe
// shrunk to one page so that writes are cut short and wait again and
// again; both read and write raw.
func rawPipeConns(t *testing.T) (a, b *pipeConn) {
	t.Helper()
	x, y := pipePair(t)
	a, b = x.(*pipeConn), y.(*pipeConn)
	for _, f := range []io.WriteCloser{a.w, b.w} {
		raw, err := f.(*os.File).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		_ = raw.Control(func(fd uintptr) { _, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, 4096) })
	}
	if a.rs == nil || a.ws == nil || b.rs == nil || b.ws == nil {
		t.Fatal("os.Pipe's pipes are not read and written raw")
	}
	return a, b
}

// TestPipeConnRaw: 4 MiB each way at once through one-page pipes, in
// writes and reads of odd sizes, arrive whole and in order; the writer's
// CloseWrite is the reader's io.EOF.
func TestPipeConnRaw(t *testing.T) {
	a, b := rawPipeConns(t)
	send := func(c *pipeConn, data []byte) <-chan error {
		done := make(chan error, 1)
		go func() {
			for rest, i := data, 0; len(rest) > 0; i++ {
				n := min(len(rest), []int{1, 5000, 65536, 300000}[i%4])
				if m, err := c.Write(rest[:n]); err != nil || m != n {
					done <- err
					return
				}
				rest = rest[n:]
			}
			done <- c.CloseWrite()
		}()
		return done
	}
	recv := func(c *pipeConn) ([]byte, error) {
		var buf bytes.Buffer
		p := make([]byte, 70001)
		for {
			n, err := c.Read(p)
			buf.Write(p[:n])
			if err == io.EOF {
				return buf.Bytes(), nil
			}
			if err != nil {
				return buf.Bytes(), err
			}
		}
	}
	ab, ba := randomData(1, 4<<20), randomData(2, 4<<20)
	sa, sb := send(a, ab), send(b, ba)
	gotB, errB := recv(b)
	gotA, errA := recv(a)
	if err := errors.Join(<-sa, <-sb, errA, errB); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gotB, ab) || !bytes.Equal(gotA, ba) {
		t.Fatalf("got %d and %d bytes, not the %d and %d sent", len(gotB), len(gotA), len(ab), len(ba))
	}
}

// TestPipeConnRawErrors: the raw path keeps what the files' own Read and
// Write said: a read deadline is os.ErrDeadlineExceeded, a write to a
// pipe whose reader left is EPIPE having written what fit, and a conn
// closed while a Read waits is net.ErrClosed.
func TestPipeConnRawErrors(t *testing.T) {
	a, b := rawPipeConns(t)
	if err := a.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Read(make([]byte, 10)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v, want os.ErrDeadlineExceeded", err)
	}
	if err := a.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	// b's reader is the pipe a writes into.
	b.rOnce.Do(func() { b.rErr = b.r.Close() })
	n, err := a.Write(make([]byte, 1<<20))
	if !errors.Is(err, syscall.EPIPE) || n >= 1<<20 {
		t.Fatalf("a write to a pipe nobody reads: %d bytes, %v; want EPIPE", n, err)
	}
	read := make(chan error, 1)
	go func() {
		_, err := a.Read(make([]byte, 10))
		read <- err
	}()
	time.Sleep(20 * time.Millisecond) // the Read waits in the poller, most likely
	a.Close()
	select {
	case err := <-read:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("a Read the conn's Close ended: %v, want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end a waiting Read")
	}
	if _, err := a.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("a Write after Close: %v, want net.ErrClosed", err)
	}
}

// TestPipeConnBlockingNotRaw: a file in blocking mode (a regular file
// here; a terminal likewise) is read by its own Read: a raw call would
// hold its P while the descriptor waited.
func TestPipeConnBlockingNotRaw(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	c := NewPipeConn(f, f).(*pipeConn)
	defer c.Close()
	if c.rs != nil || c.ws != nil {
		t.Fatal("a regular file is read or written raw")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	if err := syscall.SetNonblock(int(r.Fd()), false); err != nil { // Fd does so too
		t.Fatal(err)
	}
	if c := NewPipeConn(r, nopWriteCloser{io.Discard}).(*pipeConn); c.rs != nil {
		t.Error("a pipe in blocking mode is read raw")
	}
	_ = r.Close()
}
