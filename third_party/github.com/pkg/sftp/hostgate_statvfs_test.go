package sftp

import (
	"context"
	"errors"
	"io"
	"testing"
)

// TestHostgateStatVFSContext: StatVFSContext answers as StatVFS with a
// live ctx, and with one ended fails with its error, sending nothing.
func TestHostgateStatVFSContext(t *testing.T) {
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	srv, err := NewServer(struct {
		io.Reader
		io.WriteCloser
	}{sr, sw})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	c, err := NewClientPipe(cr, cw)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cw.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		_ = sw.Close()
		_ = c.Close()
	}()
	dir := t.TempDir()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.StatVFSContext(ended, dir); !errors.Is(err, context.Canceled) {
		t.Errorf("StatVFSContext with an ended ctx: %v; want context.Canceled", err)
	}
	st, err := c.StatVFSContext(context.Background(), dir)
	if err != nil {
		t.Fatalf("StatVFSContext: %v", err)
	}
	if st.Frsize == 0 || st.Blocks == 0 {
		t.Errorf("StatVFSContext: %+v; want the filesystem's sizes", st)
	}
}
