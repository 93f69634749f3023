//go:build linux

package rawio

import (
	"os"
	"syscall"
	"testing"
)

// TestReadableAndSplice: Readable tells an empty pipe from one with bytes
// or at its end, which is what a splice's EAGAIN leaves to ask; Splice
// moves a pipe's bytes to another pipe, says EAGAIN for an empty one and
// 0 at its end.
func TestReadableAndSplice(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r2, w2, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	defer w2.Close()
	var rfd, wfd uintptr
	withFDs := func(f func()) {
		t.Helper()
		rr, _ := r.SyscallConn()
		ww, _ := w2.SyscallConn()
		if err := rr.Control(func(a uintptr) {
			if err := ww.Control(func(b uintptr) { rfd, wfd = a, b; f() }); err != nil {
				t.Fatal(err)
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	withFDs(func() {
		if Readable(rfd) {
			t.Error("an empty pipe is readable")
		}
		if n, e := Splice(rfd, wfd, 1<<20); e != syscall.EAGAIN {
			t.Errorf("splice from an empty pipe: %d, %v; want EAGAIN", n, e)
		}
	})
	if _, err := w.Write([]byte("hostgate")); err != nil {
		t.Fatal(err)
	}
	withFDs(func() {
		if !Readable(rfd) {
			t.Error("a pipe with bytes is not readable")
		}
		if n, e := Splice(rfd, wfd, 1<<20); n != 8 || e != 0 {
			t.Errorf("splice: %d, %v; want the 8 bytes written", n, e)
		}
	})
	got := make([]byte, 16)
	if n, err := r2.Read(got); err != nil || string(got[:n]) != "hostgate" {
		t.Errorf("the other pipe read %q, %v", got[:n], err)
	}
	w.Close()
	withFDs(func() {
		if !Readable(rfd) {
			t.Error("a pipe at its end is not readable")
		}
		if n, e := Splice(rfd, wfd, 1<<20); n != 0 || e != 0 {
			t.Errorf("splice at the end: %d, %v; want 0", n, e)
		}
	})
}
