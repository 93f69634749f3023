//go:build linux

package rawio

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// countingFile is what *os.File's WriteTo hands io.Copy's ReaderFrom: a
// wrapper embedding the file, here counting the reads that reach it.
type countingFile struct {
	*os.File
	reads int
}

func (f *countingFile) Read(p []byte) (int, error) {
	f.reads++
	return f.File.Read(p)
}

// havePreadv2 says whether this kernel reads at an offset by preadv2 with
// RWF_NOWAIT: a kernel before 4.14 and qemu-user (where the test command
// runs its 32-bit stage on a kernel that cannot run 386 binaries) answer
// ENOSYS or EOPNOTSUPP, and CachedReader then reads as the file does.
func havePreadv2(t *testing.T) bool {
	t.Helper()
	path, _ := testFile(t, 10)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, e := ReadCached(f.Fd(), make([]byte, 10), 0)
	if e == syscall.ENOSYS || e == syscall.EOPNOTSUPP {
		t.Logf("no preadv2 with RWF_NOWAIT here: %v", e)
		return false
	}
	return true
}

func testFile(t *testing.T, n int) (string, []byte) {
	t.Helper()
	want := make([]byte, n)
	r := rand.NewChaCha8([32]byte{1})
	_, _ = r.Read(want)
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, want, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, want
}

// TestCachedReader: a cached regular file reads whole through the raw
// path at the file position, which the file's own reads then go on from;
// its Read is left only the end.
func TestCachedReader(t *testing.T) {
	path, want := testFile(t, 3<<20+123)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Some bytes by the file's own Read first: the raw reads go on from
	// the position it left.
	head := make([]byte, 1000)
	if _, err := io.ReadFull(f, head); err != nil {
		t.Fatal(err)
	}
	cf := &countingFile{File: f}
	r := CachedReader(cf)
	if r == io.Reader(cf) {
		t.Fatal("a regular file was not wrapped")
	}
	buf := make([]byte, 255<<10)
	got, err := io.CopyBuffer(struct{ io.Writer }{new(bytes.Buffer)}, struct{ io.Reader }{r}, buf)
	if err != nil || got != int64(len(want)-len(head)) {
		t.Fatalf("read %d bytes (%v), want %d", got, err, len(want)-len(head))
	}
	if raw := havePreadv2(t); raw && cf.reads != 1 {
		t.Errorf("the file's own Read was called %d times, want once (the end)", cf.reads)
	} else if !raw && cf.reads < 2 {
		t.Errorf("the file's own Read was called %d times without preadv2, want every read", cf.reads)
	}
	// Reads interleaved with the file's own: one position.
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	var all bytes.Buffer
	p := make([]byte, 64<<10+7)
	for i := 0; ; i++ {
		var n int
		if i%3 == 0 {
			n, err = f.Read(p)
		} else {
			n, err = r.Read(p)
		}
		all.Write(p[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(all.Bytes(), want) {
		t.Errorf("interleaved reads gave %d bytes, not the file's %d", all.Len(), len(want))
	}
}

// TestCachedReaderEvicted: pages not in the cache (evicted with
// FADV_DONTNEED) are read by the file's Read, with the same bytes.
func TestCachedReaderEvicted(t *testing.T) {
	path, want := testFile(t, 2<<20)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	cf := &countingFile{File: f}
	got, err := io.ReadAll(CachedReader(cf))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes (%v), want the file's %d", len(got), err, len(want))
	}
	if cf.reads < 2 {
		// tmpfs has no disk to wait for: every page is cached.
		t.Logf("the file's own Read was called %d times (a file system without a disk behind it?)", cf.reads)
	}
}

// TestCachedReaderNotAFile: what is no regular file is given back as it
// is, and a closed file's error is the file's own.
func TestCachedReaderNotAFile(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	if r := CachedReader(pr); r != io.Reader(pr) {
		t.Error("a pipe was wrapped")
	}
	br := bytes.NewReader([]byte("x"))
	if r := CachedReader(br); r != io.Reader(br) {
		t.Error("a bytes.Reader was wrapped")
	}
	path, _ := testFile(t, 10)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	r := CachedReader(f)
	_ = f.Close()
	if _, err := r.Read(make([]byte, 10)); err == nil || !bytes.Contains([]byte(err.Error()), []byte("closed")) {
		t.Errorf("reading a closed file: %v, want the file's own error", err)
	}
}

// TestReadCachedErrors: a pipe cannot be read at an offset (ESPIPE), the
// errno the reader takes as "never".
func TestReadCachedErrors(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	if _, err := pw.Write([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	if !havePreadv2(t) {
		t.Skip("no preadv2 to fail")
	}
	if _, e := ReadCached(pr.Fd(), make([]byte, 3), 0); e != syscall.ESPIPE {
		t.Errorf("preadv2 of a pipe at 0: %v, want ESPIPE", e)
	}
}

// TestReadCachedOffsets: the offset reaches the kernel whole. On 32-bit
// Linux only its low word went: -1 (the file position) read at 4 GiB - 1
// (nothing: every read fell back to the file's own), and 4 GiB + 4096 read
// at 4096. The file is sparse: two pages written.
func TestReadCachedOffsets(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const high = int64(1)<<32 + 4096
	if _, err := f.WriteAt([]byte("low"), 4096); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("HIGH"), high); err != nil {
		t.Fatalf("a sparse file past 4 GiB in %s: %v", filepath.Dir(f.Name()), err)
	}
	b := make([]byte, 4)
	if n, e := ReadCached(f.Fd(), b, high); e == syscall.EOPNOTSUPP || e == syscall.ENOSYS {
		t.Skipf("no preadv2 with RWF_NOWAIT here (a kernel before 4.14, qemu-user): %v", e)
	} else if e != 0 || string(b[:n]) != "HIGH" {
		t.Errorf("ReadCached at %d: %q, %v; want \"HIGH\"", high, b[:max(n, 0)], e)
	}
	if _, err := f.Seek(4096, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if n, e := ReadCached(f.Fd(), b[:3], -1); e != 0 || string(b[:n]) != "low" {
		t.Errorf("ReadCached at the file position (4096): %q, %v; want \"low\"", b[:max(n, 0)], e)
	}
}
