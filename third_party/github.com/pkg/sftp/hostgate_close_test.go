package sftp

import (
	"io"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// TestHostgateCloseEndsSendOnWindow: while a File's write waits on a
// channel window the server does not grant (a host that stopped reading),
// holding the conn's send lock, with a Stat waiting behind it for the
// lock, the client's Close returns, and the write and the Stat fail
// (change 31). Before, Close waited for the send lock as long as the
// window stayed shut: for ever.
func TestHostgateCloseEndsSendOnWindow(t *testing.T) {
	dir := t.TempDir()
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	ww := newWindowWriter(cw)
	srv, err := NewServer(struct {
		io.Reader
		io.WriteCloser
	}{sr, sw}, WithServerWorkingDirectory(dir))
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve()
		_ = sw.Close()
	}()
	c, err := NewClientPipe(cr, ww, UseConcurrentWrites(true))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ww.grant(-1) // after a failure, so that everything below ends
		_ = c.Close()
		<-served
		_ = srv.Close()
	}()
	name := filepath.Join(dir, "f")
	f, err := c.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	ww.grant(100 << 10) // the window runs out inside the write's first requests
	written := make(chan error, 1)
	go func() { _, err := f.Write(make([]byte, 4<<20)); written <- err }()
	<-ww.waiting // the write holds the send lock, waiting on window
	statted := make(chan error, 1)
	go func() { _, err := c.Stat(name); statted <- err }()

	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	// The guards only end a hang; nothing here is timed.
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("Close with a send waiting on window: still waiting 20 s on")
	}
	for what, ch := range map[string]chan error{"the write waiting on window": written, "a Stat behind it": statted} {
		select {
		case err := <-ch:
			if err == nil {
				t.Errorf("%s after Close: no error", what)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: still waiting 20 s after Close returned", what)
		}
	}
}

// blockingWriteCloser's Write blocks until Close.
type blockingWriteCloser struct{ closed chan struct{} }

func (w *blockingWriteCloser) Write(p []byte) (int, error) {
	<-w.closed
	return 0, io.ErrClosedPipe
}

func (w *blockingWriteCloser) Close() error { close(w.closed); return nil }

// TestHostgateServerCloseBesideStuckSend: a server conn's Close while a
// reply's send is stuck in its writer (a client that stopped reading)
// does not touch the reply batch the send holds (change 31): it read the
// batch's buffer as the send wrote it, a data race under -race (sshlayer's
// TestSFTPConcurrentDownloadsIntact in CI), and put the buffer back in
// the pool while the send still used it.
func TestHostgateServerCloseBesideStuckSend(t *testing.T) {
	w := &blockingWriteCloser{closed: make(chan struct{})}
	c := newServerConn(struct {
		io.Reader
		io.WriteCloser
	}{eofReader{}, w})
	b := c.WriteCloser.(*replyBatch)
	c.sendMu.lock()
	if _, err := b.Write(make([]byte, 100)); err != nil { // gathered: the batch holds a buffer
		t.Fatal(err)
	}
	c.sendMu.unlock()
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		c.sendMu.lock()
		defer c.sendMu.unlock()
		_, _ = b.Write(make([]byte, replyBatchMax)) // flushes the batch, then blocks
	}()
	// Until the send holds the lock; a failed tryLock makes no
	// happens-before edge, as nothing between the send and a Close
	// beside it does.
	for c.sendMu.tryLock() {
		c.sendMu.unlock()
		runtime.Gosched()
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	<-sent
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }
