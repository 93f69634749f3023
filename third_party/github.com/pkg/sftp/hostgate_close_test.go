package sftp

import (
	"io"
	"path/filepath"
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
