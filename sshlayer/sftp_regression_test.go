package sshlayer

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/pkg/sftp"
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

// TestSFTPConcurrentDownloadsIntact: the client reads large replies into
// recycled pages (third_party/github.com/pkg/sftp, HOSTGATE.md) and
// WriteTo writes a reply's bytes without copying them first, so a page
// given back too early would hand one download's bytes to another. Four
// downloads from our server and two from OpenSSH's sftp-server, through
// io.Copy (WriteTo) and ReadAt, share the pool at once; each must match.
func TestSFTPConcurrentDownloadsIntact(t *testing.T) {
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
	if _, err := c.SFTP(context.Background()); err != nil {
		t.Fatal(err)
	}
	ours := c.sftpCli
	openssh := startSFTPServer(t)

	dir := t.TempDir()
	const size = 6<<20 + 4097 // not a multiple of the 255 KiB read size
	type download struct {
		cl     *sftp.Client
		path   string
		want   []byte
		readAt bool
	}
	var dls []download
	for i, cl := range []*sftp.Client{ours, ours, ours, ours, openssh, openssh} {
		want := make([]byte, size)
		_, _ = rand.Read(want)
		path := filepath.Join(dir, fmt.Sprint(i))
		if err := os.WriteFile(path, want, 0o600); err != nil {
			t.Fatal(err)
		}
		dls = append(dls, download{cl, path, want, i%2 == 1})
	}
	errs := make(chan error, len(dls))
	for _, d := range dls {
		go func() {
			f, err := d.cl.Open(d.path)
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			var got []byte
			if d.readAt {
				got = make([]byte, size)
				var n int
				n, err = f.ReadAt(got, 0)
				got = got[:n]
				if err == io.EOF && n == size {
					err = nil
				}
			} else {
				var b bytes.Buffer
				_, err = io.Copy(&b, f) // File.WriteTo
				got = b.Bytes()
			}
			switch {
			case err != nil:
				errs <- fmt.Errorf("%s: %w", d.path, err)
			case !bytes.Equal(got, d.want):
				errs <- fmt.Errorf("%s (ReadAt %v): %d bytes read, differ from the file at byte %d", d.path, d.readAt, len(got), firstDiff(got, d.want))
			default:
				errs <- nil
			}
		}()
	}
	for range dls {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
