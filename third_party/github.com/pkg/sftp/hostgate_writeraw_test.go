//go:build linux

package sftp

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestHostgateWriteAtRaw (change 19): a handle's writes to a file on a
// local file system are raw pwrites, which leave the same bytes as
// os.File.WriteAt, in order or not, at and past the end; a slow write
// sends the handle's writes back to os.File.WriteAt; a file in append
// mode, a pipe and a closed file get os.File.WriteAt's own answers.
func TestHostgateWriteAtRaw(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !rawWritable(f) {
		if os.Getenv("HOSTGATE_E2E") == "require" {
			t.Fatalf("%s is on no file system change 19 writes raw (ext4, xfs, btrfs, tmpfs, overlayfs, f2fs): set TMPDIR to one", dir)
		}
		t.Skipf("%s is on no file system change 19 writes raw", dir)
	}
	if !rawPwrite {
		t.Skip("no raw pwrite on 32-bit Linux: TestHostgateWriteAtPast4GiB checks its writes")
	}
	defer func(d time.Duration, f func(int64, int64) bool) { rawWriteSlow, slept = d, f }(rawWriteSlow, slept)
	// None of the first writes is slow: on a loaded machine one could
	// really sleep past 2 ms, and its back-off would fail the check that
	// they were raw.
	rawWriteSlow = time.Hour
	h := &serialWrites{file: f}
	const size = 1<<20 + 77
	want := make([]byte, size)
	for i := range want {
		want[i] = byte(i*7 + i>>12)
	}
	// Back to front, in 255 KiB pieces and a short last one.
	const chunk = 255 << 10
	for off := (size - 1) / chunk * chunk; off >= 0; off -= chunk {
		end := min(off+chunk, size)
		if n, err := h.WriteAt(want[off:end], int64(off)); n != end-off || err != nil {
			t.Fatalf("WriteAt(%d bytes at %d): %d, %v", end-off, off, n, err)
		}
	}
	if h.raw != rawYes || h.rawBackoff.skip != 0 {
		t.Fatalf("the handle's writes were not raw (state %d, skip %d)", h.raw, h.rawBackoff.skip)
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the file holds %d bytes (%v), not the %d written", len(got), err, len(want))
	}

	// A slow write whose thread slept sends the next 64 writes through
	// os.File.WriteAt, then 128 after the next; a slow one only
	// preempted keeps them raw.
	rawWriteSlow = -1
	slept = func(int64, int64) bool { return false }
	if n, err := h.WriteAt(want[:10], 0); n != 10 || err != nil || h.rawBackoff.skip != 0 {
		t.Fatalf("a slow write whose thread did not sleep: %d, %v; %d writes to skip", n, err, h.rawBackoff.skip)
	}
	slept = func(int64, int64) bool { return true }
	for _, wantSkip := range []int{64, 128} {
		if n, err := h.WriteAt([]byte("xyz"), size); n != 3 || err != nil {
			t.Fatalf("WriteAt past the end: %d, %v", n, err)
		}
		if h.rawBackoff.skip != wantSkip {
			t.Fatalf("after a slow write that slept: %d writes to skip, want %d", h.rawBackoff.skip, wantSkip)
		}
		for range wantSkip {
			if _, err := h.WriteAt([]byte("xyz"), size); err != nil {
				t.Fatal(err)
			}
		}
		if h.rawBackoff.skip != 0 {
			t.Fatalf("%d writes left to skip after %d", h.rawBackoff.skip, wantSkip)
		}
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, append(want, "xyz"...)) {
		t.Fatal("the writes past the end are not in the file")
	}

	// Append mode: os.File.WriteAt's refusal.
	af, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer af.Close()
	_, want1 := af.WriteAt([]byte("a"), 0)
	if _, err := (&serialWrites{file: af}).WriteAt([]byte("a"), 0); err == nil || err.Error() != want1.Error() {
		t.Fatalf("WriteAt in append mode: %v, want os.File's %v", err, want1)
	}
	// A pipe: ESPIPE, as os.File.WriteAt says it.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	if _, err := (&serialWrites{file: pw}).WriteAt([]byte("a"), 0); !errors.Is(err, syscall.ESPIPE) {
		t.Fatalf("WriteAt to a pipe: %v, want ESPIPE", err)
	}
	// Closed: os.ErrClosed.
	cf, err := os.Create(filepath.Join(dir, "g"))
	if err != nil {
		t.Fatal(err)
	}
	ch := &serialWrites{file: cf}
	if _, err := ch.WriteAt([]byte("a"), 0); err != nil {
		t.Fatal(err)
	}
	_ = cf.Close()
	if _, err := ch.WriteAt([]byte("a"), 0); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("WriteAt to a closed file: %v, want os.ErrClosed", err)
	}
}

// TestHostgateFileWritevRaw (change 19, the client's side): a download's
// gathered replies reach a regular file by raw writev, and after a write
// whose thread slept by the runtime's, with the same bytes either way.
func TestHostgateFileWritevRaw(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !rawWritable(f) {
		if os.Getenv("HOSTGATE_E2E") == "require" {
			t.Fatalf("%s is on no file system change 19 writes raw: set TMPDIR to one", path)
		}
		t.Skipf("%s is on no file system change 19 writes raw", path)
	}
	defer func(d time.Duration, fn func(int64, int64) bool) { rawWriteSlow, slept = d, fn }(rawWriteSlow, slept)
	// No raw write is slow before write 50: on a loaded machine one of
	// them really slept past 2 ms (CI), and its back-off moved every
	// later raw write.
	rawWriteSlow = time.Hour
	writev := fileWritev(f)
	var want []byte
	sleeps := 0 // raw writes that were slow
	for i := range 200 {
		if i == 50 {
			// Every raw write from here is slow and slept: write 50
			// raw, 64 by the runtime, write 115 raw, 128 by the
			// runtime.
			rawWriteSlow = -1
			slept = func(int64, int64) bool { sleeps++; return true }
		}
		var bufs [][]byte
		for j := range 1 + i%5 {
			b := bytes.Repeat([]byte{byte(i*7 + j)}, 1+(i*131+j*977)%70000)
			bufs = append(bufs, b)
			want = append(want, b...)
		}
		n := 0
		for _, b := range bufs {
			n += len(b)
		}
		if got, err := writev(bufs); err != nil || got != int64(n) {
			t.Fatalf("write %d: %d of %d bytes, %v", i, got, n, err)
		}
	}
	if sleeps != 2 {
		t.Errorf("%d raw writes after the first slow one, want 2 (writes 50 and 115)", sleeps)
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the file holds %d bytes (%v), not the %d written", len(got), err, len(want))
	}
}

// TestHostgateWriteAtPast4GiB: a handle's writes land at their offsets,
// 4 GiB and past included (the file is sparse: two pages written). On
// 32-bit Linux a raw pwrite64 passed the offset as 64-bit Linux takes it,
// and wrote at the offset's low word on 386 (here: at 4096) and at offset
// 0 on ARM.
func TestHostgateWriteAtPast4GiB(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sparse")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := &serialWrites{file: f}
	const high = int64(1)<<32 + 4096
	for _, w := range []struct {
		off  int64
		data string
	}{{4096, "low"}, {high, "HIGH"}} {
		if n, err := h.WriteAt([]byte(w.data), w.off); n != len(w.data) || err != nil {
			t.Fatalf("WriteAt(%q at %d): %d, %v", w.data, w.off, n, err)
		}
	}
	for _, w := range []struct {
		off  int64
		data string
	}{{0, "\x00\x00\x00"}, {4096, "low\x00"}, {high, "HIGH"}} {
		b := make([]byte, len(w.data))
		if _, err := f.ReadAt(b, w.off); err != nil || string(b) != w.data {
			t.Errorf("the file at %d holds %q (%v), want %q", w.off, b, err, w.data)
		}
	}
}
