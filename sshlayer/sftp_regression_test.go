package sshlayer

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// TestSFTPReadAllOfLargeFile: io.ReadAll on a file from our own server
// returned 825664 of 3 MiB with no error — pkg/sftp's concurrent reader
// takes a short read for EOF, and the server answered at most 32 KiB per
// read while the client asked for 255 KiB.
func TestSFTPReadAllOfLargeFile(t *testing.T) {
	ts, err := StartTestServer()
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	conn, err := net.Dial("tcp", ts.Addr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Connect(context.Background(), conn, Auth{PrivateKey: ts.ClientKey, HostKey: ts.HostKey})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, err := c.SFTP(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 3<<20+17)
	_, _ = rand.Read(data)
	path := filepath.Join(t.TempDir(), "f")
	w, err := p.Create(context.Background(), path, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != int64(len(data)) {
		t.Fatalf("on disk: %v %v", fi, err)
	}
	r, err := p.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d of %d bytes, %v", len(got), len(data), err)
	}
}
