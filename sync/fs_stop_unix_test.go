//go:build unix

package syncfs

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestStoppedServerTimesOut: a server that stops answering (SIGSTOP) makes
// the call fail with ETIMEDOUT; the stuck connection is abandoned and
// reaped, and the next call connects afresh and works.
func TestStoppedServerTimesOut(t *testing.T) {
	root, _ := tree(t)
	sv := newServer(t)
	fsys := open(t, sv, root, 300*time.Millisecond)

	// Phase 1: calls in flight on a connection that stops answering all
	// time out — the first timer to fire abandons the connection for every
	// call on it. Reads of files opened on that connection cannot move to
	// another one, which keeps this deterministic.
	files := make([]fs.File, 6)
	before := eventually(t, func() error {
		for i := range files {
			f, err := fsys.Open("dir/sub/b.txt")
			if err != nil {
				for _, f := range files[:i] {
					_ = f.Close()
				}
				return err
			}
			files[i] = f
		}
		return nil
	})
	if err := sv.last().cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Go(func() {
			_, err := f.Read(make([]byte, 100))
			if !errors.Is(err, syscall.ETIMEDOUT) {
				t.Errorf("read %d = %v; want ETIMEDOUT", i, err)
			}
			var pe *fs.PathError
			if !errors.As(err, &pe) || pe.Op != "read" || pe.Path != "dir/sub/b.txt" {
				t.Errorf("error %#v is not a PathError naming the call", err)
			}
			// The error sticks rather than touching the abandoned connection.
			if _, err2 := f.Read(make([]byte, 100)); !errors.Is(err2, syscall.ETIMEDOUT) {
				t.Errorf("second read %d = %v", i, err2)
			}
			_ = f.Close()
		})
	}
	wg.Wait()

	// Phase 2: the next call connects afresh.
	retries := eventually(t, func() error {
		b, err := fsys.ReadFile("hello.txt")
		if err == nil && string(b) != "hello, world\n" {
			t.Fatalf("after timeout: %q", b)
		}
		return err
	})

	// Phase 3: a plain call on a stopped server, then recovery again.
	if err := sv.last().cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	_, err := fsys.Stat("hello.txt")
	if !errors.Is(err, syscall.ETIMEDOUT) {
		t.Fatalf("stat on a stopped server = %v; want ETIMEDOUT", err)
	}
	var te interface{ Timeout() bool }
	if !errors.As(err, &te) || !te.Timeout() {
		t.Fatalf("%v has no Timeout() true", err)
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Op != "stat" || pe.Path != "hello.txt" {
		t.Fatalf("error %#v is not a PathError naming the call", err)
	}
	retries += eventually(t, func() error { _, err := fsys.Stat("hello.txt"); return err })

	if n, want := sv.connects.Load(), 3+before+retries; n != want {
		t.Fatalf("connects = %d, want %d", n, want)
	}
	// The stopped children were killed and reaped (SIGKILL ends a stopped
	// process) when their connections were abandoned; the cleanup checks.
}

// TestCloseDuringStuckCall: Close releases a caller waiting on a stopped
// server and reaps the child; later calls fail with fs.ErrClosed.
func TestCloseDuringStuckCall(t *testing.T) {
	root, _ := tree(t)
	sv := newServer(t)
	fsys := New(sv.spec(), &Options{Root: root, Timeout: time.Hour})
	if _, err := fsys.Stat("hello.txt"); err != nil {
		t.Fatal(err)
	}
	stopped := sv.last()
	if err := stopped.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { _, err := fsys.ReadFile("hello.txt"); errc <- err }()
	// Close must not wait on the caller: it cancels the session, kills the
	// child and waits for the call's goroutine, which the kill releases.
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		// The call either raced ahead of Close (ErrClosed before the
		// call) or was cut off (ErrClosed from the session).
		if !errors.Is(err, fs.ErrClosed) {
			t.Fatalf("stuck call = %v; want fs.ErrClosed", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("stuck call not released by Close")
	}
	if stopped.cmd.ProcessState == nil {
		t.Fatal("child not reaped by Close")
	}
	if _, err := fsys.Stat("hello.txt"); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
	if err := fsys.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

// TestStoppedServerWrite: a WriteFile to a server that stops answering
// times out, and its data is released (the feeder goroutine ends: goleak).
func TestStoppedServerWrite(t *testing.T) {
	root, _ := tree(t)
	sv := newServer(t)
	fsys := open(t, sv, root, 300*time.Millisecond)
	eventually(t, func() error { return fsys.WriteFile("small", []byte("x"), 0o600) })
	if err := sv.last().cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte{'w'}, 8<<20) // more than the pipes hold
	if err := fsys.WriteFile("big", data, 0o600); !errors.Is(err, syscall.ETIMEDOUT) {
		t.Fatalf("write to a stopped server = %v; want ETIMEDOUT", err)
	}
	clear(data) // the bridge must no longer read it (the race detector watches)
	eventually(t, func() error { return fsys.WriteFile("big", data[:1000], 0o600) })
	if got, err := os.ReadFile(filepath.Join(root, "big")); err != nil || len(got) != 1000 {
		t.Fatalf("file = %d bytes, %v", len(got), err)
	}
}
