//go:build linux

package bicopy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hostgate/hostgate/bytestream"
)

// sshPipes are a ProxyCommand's stdio as ssh sees them: ssh writes to
// in and reads from out; conn is the proxy's side, a pipe conn over the
// other ends, as bytestream.Stdio makes of fds 0 and 1.
type sshPipes struct {
	in   *os.File // ssh's end of the proxy's stdin
	out  *os.File // ssh's end of the proxy's stdout
	conn net.Conn
}

func newSSHPipes(t *testing.T, pipeSize int) *sshPipes {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []*os.File{inR, outR} {
		// Through the RawConn: Fd would make the pipe blocking.
		raw, err := f.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		if cerr := raw.Control(func(fd uintptr) { _, err = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, pipeSize) }); cerr != nil || err != nil {
			t.Fatal(cerr, err)
		}
	}
	t.Cleanup(func() { inW.Close(); outR.Close() })
	return &sshPipes{in: inW, out: outR, conn: bytestream.NewPipeConn(inR, outW)}
}

func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(seed)})
	_, _ = r.Read(b)
	return b
}

// TestCopySplicesPipesAndTCP: a pipe conn over real pipes (a ProxyCommand's
// stdio) joined to a TCP conn moves 8 MiB each way intact with splice,
// and each direction's end reaches its reader while the other still
// flows: ssh's EOF on stdin is the TCP peer's EOF, the peer's EOF is
// ssh's on stdout. Pipes of one page and small socket buffers make every
// splice wait on a full or an empty side again and again.
func TestCopySplicesPipesAndTCP(t *testing.T) {
	ssh := newSSHPipes(t, 4096)
	near, far := tcpPair(t)
	t.Cleanup(func() { far.Close() })
	for _, c := range []*net.TCPConn{near, far} {
		if err := c.SetWriteBuffer(16 << 10); err != nil {
			t.Fatal(err)
		}
		if err := c.SetReadBuffer(16 << 10); err != nil {
			t.Fatal(err)
		}
	}
	up, down := randomBytes(8<<20, 1), randomBytes(8<<20, 2)
	type result struct {
		st  Stats
		err error
	}
	copied := make(chan result, 1)
	go func() {
		st, err := Copy(context.Background(), ssh.conn, near)
		copied <- result{st, err}
	}()

	// Upload: ssh writes and closes its stdin; the peer reads it all,
	// then EOF, while the download has not begun.
	before := splices.Load()
	wrote := make(chan error, 1)
	go func() {
		_, err := ssh.in.Write(up)
		wrote <- errors.Join(err, ssh.in.Close())
	}()
	got, err := io.ReadAll(far)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, up) {
		t.Fatalf("the TCP peer read %d bytes, not the %d ssh wrote", len(got), len(up))
	}
	upSplices := splices.Load() - before
	if upSplices == 0 {
		t.Error("no splice moved the upload: it was copied")
	}

	// Download: the half-closed join still carries the peer's bytes, and
	// its EOF reaches ssh.
	before = splices.Load()
	go func() {
		_, err := far.Write(down)
		wrote <- errors.Join(err, far.CloseWrite())
	}()
	got, err = io.ReadAll(ssh.out)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, down) {
		t.Fatalf("ssh read %d bytes, not the %d the TCP peer wrote", len(got), len(down))
	}
	downSplices := splices.Load() - before
	if downSplices == 0 {
		t.Error("no splice moved the download: it was copied")
	}
	r := <-copied
	if r.err != nil {
		t.Fatalf("Copy: %v", r.err)
	}
	if r.st.AToB != int64(len(up)) || r.st.BToA != int64(len(down)) {
		t.Errorf("Copy counted %+v, want %d up and %d down", r.st, len(up), len(down))
	}
	t.Logf("%d splices up, %d down", upSplices, downSplices)
}

// TestCopySplicesBothWaysAtOnce: both directions at once, each side
// reading what the other writes as it goes, as an ssh session's window
// updates and data cross; then both half-close.
func TestCopySplicesBothWaysAtOnce(t *testing.T) {
	ssh := newSSHPipes(t, 1<<20)
	near, far := tcpPair(t)
	t.Cleanup(func() { far.Close() })
	up, down := randomBytes(32<<20, 3), randomBytes(32<<20, 4)
	copied := make(chan error, 1)
	go func() { _, err := Copy(context.Background(), ssh.conn, near); copied <- err }()
	errs := make(chan error, 2)
	go func() { _, err := ssh.in.Write(up); errs <- errors.Join(err, ssh.in.Close()) }()
	go func() { _, err := far.Write(down); errs <- errors.Join(err, far.CloseWrite()) }()
	gotUp := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(far); gotUp <- b }()
	gotDown, err := io.ReadAll(ssh.out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gotDown, down) {
		t.Errorf("ssh read %d bytes, not the %d the peer wrote", len(gotDown), len(down))
	}
	if b := <-gotUp; !bytes.Equal(b, up) {
		t.Errorf("the peer read %d bytes, not the %d ssh wrote", len(b), len(up))
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if err := <-copied; err != nil {
		t.Fatalf("Copy: %v", err)
	}
}

// TestCopySpliceSSHGone: ssh closing its end of stdout while the host
// sends is a broken pipe (which gateway proxy takes for ssh gone), and
// Copy returns with both ends closed; the TCP peer sees its conn end.
func TestCopySpliceSSHGone(t *testing.T) {
	ssh := newSSHPipes(t, 4096)
	near, far := tcpPair(t)
	t.Cleanup(func() { far.Close() })
	copied := make(chan error, 1)
	go func() { _, err := Copy(context.Background(), ssh.conn, near); copied <- err }()
	wrote := make(chan error, 1)
	go func() { _, err := far.Write(randomBytes(8<<20, 5)); wrote <- err }()
	if _, err := io.ReadFull(ssh.out, make([]byte, 64<<10)); err != nil {
		t.Fatal(err)
	}
	ssh.out.Close()
	if err := <-copied; !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("Copy: %v, want a broken pipe", err)
	}
	if err := <-wrote; err == nil {
		t.Error("the TCP peer wrote 8 MiB to a join that had ended")
	}
	if _, err := ssh.conn.Write([]byte("x")); err == nil {
		t.Error("the pipe conn still writes after Copy returned")
	}
}

// TestCopySpliceCancelIdle: ctx ending while neither side sends (ssh idle,
// the host silent) ends the join: Copy closes both ends, whose closes wait
// for the splices' calls in flight, and returns the cause.
func TestCopySpliceCancelIdle(t *testing.T) {
	ssh := newSSHPipes(t, 4096)
	near, far := tcpPair(t)
	t.Cleanup(func() { far.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	copied := make(chan error, 1)
	go func() { _, err := Copy(ctx, ssh.conn, near); copied <- err }()
	// Some bytes each way first, so both halves are in their splices.
	if _, err := ssh.in.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(far, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	if _, err := far.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(ssh.out, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-copied:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Copy: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Copy did not return after its ctx ended")
	}
	if n, err := ssh.out.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("ssh read %d bytes, %v from stdout after the end, want EOF", n, err)
	}
	if n, err := far.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the TCP peer read %d bytes, %v after the end, want EOF", n, err)
	}
}

// TestSpliceOnlyPipes: a pipe conn over sockets (stdio on a socketpair)
// has no pipe to splice through, nor does a pipe conn over non-pollable
// readers: copyHalf copies.
func TestSpliceOnlyPipes(t *testing.T) {
	near, far := tcpPair(t)
	t.Cleanup(func() { near.Close(); far.Close() })
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, b := os.NewFile(uintptr(fds[0]), "a"), os.NewFile(uintptr(fds[1]), "b")
	t.Cleanup(func() { a.Close(); b.Close() })
	for _, c := range []net.Conn{
		bytestream.NewPipeConn(a, a),
		bytestream.NewPipeConn(io.NopCloser(bytes.NewReader(nil)), nopCloser{io.Discard}),
	} {
		if _, ok, _ := spliceHalf(near, c); ok {
			t.Errorf("%T over no pipes: spliced", c)
		}
		if _, ok, _ := spliceHalf(c, near); ok {
			t.Errorf("%T over no pipes: spliced", c)
		}
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
