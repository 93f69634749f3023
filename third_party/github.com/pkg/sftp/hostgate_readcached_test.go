//go:build linux

package sftp

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestHostgateReadAtCached (change 18): a handle's ReadAt takes what the
// page cache holds by one raw preadv2(RWF_NOWAIT), and gives the same
// bytes and errors as os.File.ReadAt however much of the file is cached:
// all of it, none (evicted), the first half only, and at and past its
// end. A pipe, which preadv2 cannot read at an offset, is marked so and
// read as before.
func TestHostgateReadAtCached(t *testing.T) {
	const size = 1 << 20
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*31 + i>>10)
	}
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := &serialWrites{file: f}

	readAll := func(what string, chunk int) {
		t.Helper()
		got := make([]byte, 0, size)
		b := make([]byte, chunk)
		for off := 0; off < size; off += chunk {
			n, err := h.ReadAt(b, int64(off))
			if err != nil && !(err == io.EOF && off+n == size) {
				t.Fatalf("%s: ReadAt(%d bytes at %d): %d, %v", what, chunk, off, n, err)
			}
			got = append(got, b[:n]...)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("%s: read %d bytes, not the file's", what, len(got))
		}
	}

	// Without preadv2 (a kernel before 4.14, or qemu-user, where the
	// test command runs its 32-bit stage on a kernel that cannot run 386
	// binaries): the handle marks itself and reads as os.File does.
	if _, _, unsupported := readAtCached(f, make([]byte, 1), 0); unsupported {
		t.Log("no preadv2 with RWF_NOWAIT here: checking the handle's fallback alone")
		readAll("no preadv2", 255<<10)
		if !h.noCached.Load() {
			t.Fatal("a handle whose preadv2 is unsupported was not marked so")
		}
		return
	}

	// Just written: cached, so the raw read takes all of it.
	if n, ok, unsupported := readAtCached(f, make([]byte, 64<<10), 4096); !ok || n != 64<<10 || unsupported {
		t.Fatalf("readAtCached of a cached file: %d, ok %v, unsupported %v; want 65536, ok", n, ok, unsupported)
	}
	readAll("cached", 255<<10)

	// Evicted (POSIX_FADV_DONTNEED drops clean pages; tmpfs keeps them,
	// as its pages are the file): the raw read says not cached, and the
	// bytes come as before.
	evict := func() bool {
		t.Helper()
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
			t.Fatal(err)
		}
		var st unix.Statfs_t
		if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
			t.Fatal(err)
		}
		return st.Type != unix.TMPFS_MAGIC
	}
	if evict() {
		n, ok, unsupported := readAtCached(f, make([]byte, 64<<10), 4096)
		// FADV_DONTNEED is advice: a page it meets locked or under
		// writeback stays (a CI run found one, on a loaded machine).
		// A few more tries, bounded, before the cached answer counts as
		// readAtCached's mistake.
		for i := 0; i < 10 && ok && !unsupported; i++ {
			evict()
			n, ok, unsupported = readAtCached(f, make([]byte, 64<<10), 4096)
		}
		if ok || unsupported {
			t.Fatalf("readAtCached of a file evicted 11 times: %d, ok %v, unsupported %v; want not ok, supported", n, ok, unsupported)
		}
	}
	readAll("evicted", 255<<10)

	// The first half cached: a read across the middle takes the cached
	// part raw and the rest as before.
	evict()
	if _, err := f.ReadAt(make([]byte, size/2), 0); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 255<<10)
	off := int64(size/2 - 100<<10)
	if n, err := h.ReadAt(b, off); n != len(b) || err != nil || !bytes.Equal(b, data[off:off+int64(len(b))]) {
		t.Fatalf("ReadAt across the cached half's end: %d, %v", n, err)
	}

	// At and past the end: what os.File.ReadAt says.
	if n, err := h.ReadAt(b, size-1000); n != 1000 || err != io.EOF || !bytes.Equal(b[:n], data[size-1000:]) {
		t.Fatalf("ReadAt over the end: %d, %v; want 1000, io.EOF", n, err)
	}
	if n, err := h.ReadAt(b, size+5); n != 0 || err != io.EOF {
		t.Fatalf("ReadAt past the end: %d, %v; want 0, io.EOF", n, err)
	}
	if h.noCached.Load() {
		t.Fatal("a regular file was marked as one readAtCached cannot read")
	}

	// A pipe: preadv2 at an offset fails (ESPIPE); the handle stops trying.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	hp := &serialWrites{file: r}
	if _, err := hp.ReadAt(make([]byte, 10), 0); err == nil {
		t.Fatal("ReadAt of a pipe succeeded")
	}
	if !hp.noCached.Load() {
		t.Fatal("a pipe was not marked as one readAtCached cannot read")
	}
}

// TestHostgateReadAtCachedPast4GiB: an offset of 4 GiB or more reads the
// bytes there. On 32-bit Linux the raw preadv2 passed only the offset's
// low word, so a download of a big file from a 32-bit agent got the bytes
// 4 GiB before (the file is sparse: two pages written).
func TestHostgateReadAtCachedPast4GiB(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const high = int64(1)<<32 + 4096
	if _, err := f.WriteAt([]byte("low low low"), 4096); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("HIGH HIGH H"), high); err != nil {
		t.Skipf("this file system takes no file past 4 GiB: %v", err)
	}
	b := make([]byte, 11)
	n, ok, unsupported := readAtCached(f, b, high)
	if unsupported {
		t.Skip("no preadv2 with RWF_NOWAIT here (a kernel before 4.14, qemu-user, or a file system without it)")
	}
	if ok && string(b[:n]) != "HIGH HIGH H" {
		t.Fatalf("readAtCached at %d read %q, want %q", high, b[:n], "HIGH HIGH H")
	}
	if !ok {
		t.Fatalf("readAtCached at %d of a page just written: not read", high)
	}
}
