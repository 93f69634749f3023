package sftp

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// handleSession is a Client of a Server of this package over pipes; end
// ends its session as a client gone away does, and waits for its Serve.
func handleSession(t *testing.T) (c *Client, end func()) {
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
	c, err = NewClientPipe(cr, cw)
	if err != nil {
		t.Fatal(err)
	}
	var done bool
	end = func() {
		if done {
			return
		}
		done = true
		_ = cw.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		_ = sw.Close()
		_ = c.Close()
	}
	t.Cleanup(end)
	return c, end
}

// hostgate: change 37. The sessions of a process together hold at most
// processHandleMax handles (lowered here to 10): past it an open is a
// Failure that says so, and changes no file, while every session goes
// on; a close in one session, or a session's end, makes room in another.
// Without the bound, a caller with many sessions (64 on one SSH
// connection of hostgate's) held MaxOpenHandles in each.
func TestHostgateProcessHandlesBounded(t *testing.T) {
	defer func(f func() int) { processHandleMax = f }(processHandleMax)
	processHandles.Lock()
	base := processHandles.n // the tests' own handles left open, if any
	processHandles.Unlock()
	processHandleMax = func() int { return base + 10 }

	dir := t.TempDir()
	at := func(name string) string { return filepath.Join(dir, name) }
	for _, name := range []string{"f", "keep"} {
		if err := os.WriteFile(at(name), []byte("kept"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a, endA := handleSession(t)
	b, _ := handleSession(t)
	open := func(c *Client, n int) []*File {
		t.Helper()
		var fs []*File
		for range n {
			f, err := c.Open(at("f"))
			if err != nil {
				t.Fatalf("open %d of %d: %v", len(fs)+1, n, err)
			}
			fs = append(fs, f)
		}
		return fs
	}
	refused := func(c *Client) {
		t.Helper()
		f, err := c.OpenFile(at("keep"), os.O_WRONLY|os.O_TRUNC)
		if err == nil {
			_ = f.Close()
			t.Fatal("an open past the process's bound succeeded")
		}
		var se *StatusError
		if !errors.As(err, &se) || se.FxCode() != ErrSSHFxFailure || !strings.Contains(err.Error(), "sftp sessions hold") {
			t.Fatalf("open past the process's bound: %v; want a Failure saying the sessions hold the most they may", err)
		}
		if b, err := os.ReadFile(at("keep")); err != nil || string(b) != "kept" {
			t.Fatalf("the refused open's file holds %q, %v; want it untouched", b, err)
		}
	}

	inA := open(a, 6)
	inB := open(b, 4)
	refused(b)
	if _, err := b.Stat(at("f")); err != nil {
		t.Fatalf("stat after the refusal: %v", err)
	}
	if err := inA[0].Close(); err != nil {
		t.Fatal(err)
	}
	inB = append(inB, open(b, 1)...)
	refused(a)

	endA() // its 5 handles left open are closed with it
	inB = append(inB, open(b, 5)...)
	refused(b)
	for _, f := range inB {
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	processHandles.Lock()
	n := processHandles.n
	processHandles.Unlock()
	if n != base {
		t.Errorf("with every handle closed the process counts %d; want %d", n-base, 0)
	}
}
