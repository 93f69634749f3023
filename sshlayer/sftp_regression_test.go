//go:build unix

package sshlayer

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/hostgate/hostgate/third_party/github.com/pkg/sftp"
)

// TestSFTPReadAllOfLargeFile: io.ReadAll on a file from our own server
// returned 825664 of 3 MiB with no error — pkg/sftp's concurrent reader
// takes a short read for EOF, and the server answered at most 32 KiB per
// read while the client asked for 255 KiB.
func TestSFTPReadAllOfLargeFile(t *testing.T) {
	_, c := startEmbedded(t)
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
// given back too early would hand one download's bytes to another. Six
// downloads from our server and three from OpenSSH's sftp-server, through
// io.Copy (WriteTo), ReadAt and 64 KiB Reads, share the pool at once; each
// must match.
func TestSFTPConcurrentDownloadsIntact(t *testing.T) {
	_, c := startEmbedded(t)
	ours := c.rawSFTP(t)
	openssh := startSFTPServer(t)

	dir := t.TempDir()
	const size = 6<<20 + 4097 // not a multiple of the 255 KiB read size
	type download struct {
		cl   *sftp.Client
		path string
		want []byte
		how  string // "WriteTo", "ReadAt" or "Read" (64 KiB reads: readChunkAt)
	}
	var dls []download
	hows := []string{"WriteTo", "ReadAt", "Read"}
	for i, cl := range []*sftp.Client{ours, ours, ours, ours, ours, ours, openssh, openssh, openssh} {
		want := make([]byte, size)
		_, _ = rand.Read(want)
		path := filepath.Join(dir, fmt.Sprint(i))
		if err := os.WriteFile(path, want, 0o600); err != nil {
			t.Fatal(err)
		}
		dls = append(dls, download{cl, path, want, hows[i%3]})
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
			switch d.how {
			case "ReadAt":
				got = make([]byte, size)
				var n int
				n, err = f.ReadAt(got, 0)
				got = got[:n]
				if err == io.EOF && n == size {
					err = nil
				}
			case "Read":
				var b bytes.Buffer
				_, err = io.CopyBuffer(&b, struct{ io.Reader }{f}, make([]byte, 64<<10))
				got = b.Bytes()
			default:
				var b bytes.Buffer
				_, err = io.Copy(&b, f) // File.WriteTo
				got = b.Bytes()
			}
			switch {
			case err != nil:
				errs <- fmt.Errorf("%s: %w", d.path, err)
			case !bytes.Equal(got, d.want):
				errs <- fmt.Errorf("%s (%s): %d bytes read, differ from the file at byte %d", d.path, d.how, len(got), firstDiff(got, d.want))
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

// TestSFTPSmallReadsReusePages: a Read of 32 KiB (readChunkAt, what the
// sync bridge does) gives its reply's page back, so small reads do not
// each leave a 256 KiB page to the GC (review found 304 KB allocated per
// read when they did, 82 KB with upstream's allocation per reply).
func TestSFTPSmallReadsReusePages(t *testing.T) {
	_, c := startEmbedded(t)
	cli := c.rawSFTP(t)
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, make([]byte, 8<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := cli.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 32<<10)
	read := func() {
		if _, err := io.ReadFull(f, buf); err != nil {
			t.Fatal(err)
		}
	}
	for range 16 { // warm the pool
		read()
	}
	// The whole process counts (server included). Without the race
	// detector a read allocates about 42 KB; with it about 120 KB, since
	// sync.Pool then drops a quarter of what is put back. Leaving every
	// page to the GC costs 300 KB and more.
	if per := bytesPerRun(128, read); per > 200<<10 {
		t.Fatalf("%d bytes allocated per 32 KiB read: replies' pages are not given back", per)
	}
}

// rawSFTP opens c's SFTP client and returns the pkg/sftp client under it.
func (c *Client) rawSFTP(t *testing.T) *sftp.Client {
	t.Helper()
	if _, err := c.SFTP(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c.sftp.cli
}
