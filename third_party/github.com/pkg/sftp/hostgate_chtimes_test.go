package sftp

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// hostgate: change 30 (HOSTGATE.md). ChtimesContext sets both times as
// Chtimes does, and returns ctx's error once ctx ends before a server
// that took the request answers it.
func TestHostgateChtimesContext(t *testing.T) {
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
	name := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(name, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	atime, mtime := time.Unix(1_000_000_000, 0), time.Unix(1_500_000_000, 0)
	if err := c.ChtimesContext(context.Background(), name, atime, mtime); err != nil {
		t.Fatalf("ChtimesContext: %v", err)
	}
	if fi, err := os.Stat(name); err != nil || !fi.ModTime().Equal(mtime) {
		t.Errorf("after ChtimesContext: %v, %v; want mtime %v", fi.ModTime(), err, mtime)
	}
	_ = cw.Close()
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	_ = sw.Close()
	_ = c.Close()

	// A server that answers the handshake and then nothing.
	cr, sw = io.Pipe()
	sr, cw = io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		var hdr [4]byte
		if _, err := io.ReadFull(sr, hdr[:]); err != nil {
			return
		}
		n := int64(hdr[0])<<24 | int64(hdr[1])<<16 | int64(hdr[2])<<8 | int64(hdr[3])
		if _, err := io.CopyN(io.Discard, sr, n); err != nil {
			return
		}
		_, _ = sw.Write([]byte{0, 0, 0, 5, 2, 0, 0, 0, 3}) // SSH_FXP_VERSION 3
		_, _ = io.Copy(io.Discard, sr)
	}()
	c, err = NewClientPipe(cr, cw)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = sw.Close()
		_ = c.Close()
		_ = sr.Close()
		<-done
	}()
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() { res <- c.ChtimesContext(ctx, name, atime, mtime) }()
	cancel()
	select {
	case err := <-res:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("ChtimesContext on a silent server, ctx cancelled: %v, want context.Canceled", err)
		}
	case <-time.After(time.Minute): // a guard against a hang, not a timing
		t.Fatal("ChtimesContext on a silent server: still waiting a minute after its ctx ended")
	}
}
