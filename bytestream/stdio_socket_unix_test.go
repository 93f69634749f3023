//go:build unix

package bytestream

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestPipeConnSharedSocketHalfClose: with stdin and stdout one socket (a
// program started by socat's EXEC, inetd, systemd's Accept=yes, sshd's
// socketpair for a command without a pty), CloseWrite is the peer's EOF
// while the read side stays open, as it is over two pipes. Closing fd 1
// alone sent nothing: fd 0 still held the socket, and the peer (ssh
// through `gateway proxy`) waited for an end that never came.
func TestPipeConnSharedSocketHalfClose(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	peerFile := os.NewFile(uintptr(fds[1]), "peer")
	peer, err := net.FileConn(peerFile)
	_ = peerFile.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	outFD, err := syscall.Dup(fds[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range []int{fds[0], outFD} {
		if err := syscall.SetNonblock(fd, true); err != nil {
			t.Fatal(err)
		}
	}
	c := NewPipeConn(os.NewFile(uintptr(fds[0]), "stdin"), os.NewFile(uintptr(outFD), "stdout"))
	defer c.Close()

	if _, err := c.Write([]byte("reply")); err != nil {
		t.Fatal(err)
	}
	if err := c.(closeWriter).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	// A guard against the hang, not a measure: EOF comes at once or never.
	_ = peer.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(peer)
	if err != nil || string(got) != "reply" {
		t.Fatalf("peer read %q, %v; want reply then EOF", got, err)
	}
	// The read side is still open: the peer's request after the reply
	// still arrives, and then its own end.
	if _, err := peer.Write([]byte("more")); err != nil {
		t.Fatal(err)
	}
	if err := peer.(*net.UnixConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err = io.ReadAll(c)
	if err != nil || string(got) != "more" {
		t.Fatalf("half-closed conn read %q, %v; want more then EOF", got, err)
	}
}

// TestPipeConnSocketResetIsNoEOF: a socket read side whose peer reset it
// (closed with bytes it never read) fails the read, as an *os.File's own
// read does, and is not taken for the stream's end: the raw read met the
// reset, and the file's read it handed the error to found the socket
// already past it, at its end, a clean EOF (a half-close to bicopy).
func TestPipeConnSocketResetIsNoEOF(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.SetNonblock(fds[0], true); err != nil {
		t.Fatal(err)
	}
	outFD, err := syscall.Dup(fds[0])
	if err != nil {
		t.Fatal(err)
	}
	c := NewPipeConn(os.NewFile(uintptr(fds[0]), "stdin"), os.NewFile(uintptr(outFD), "stdout"))
	defer c.Close()
	if c.(*pipeConn).rs == nil {
		t.Skip("no raw reads here")
	}
	if _, err := c.Write([]byte("never read")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Close(fds[1]); err != nil { // with "never read" unread: a reset
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := c.Read(make([]byte, 16))
	if n != 0 || err == nil || err == io.EOF || !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read of a reset socket: %d, %v; want ECONNRESET", n, err)
	}
}
