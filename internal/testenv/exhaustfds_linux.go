//go:build linux

package testenv

import (
	"errors"
	"os"
	"strconv"
	"syscall"
	"testing"
)

// ExhaustFDs lowers the process's descriptor limit and fills every
// descriptor under it but one, and returns what puts it back (also run at
// cleanup). Only for tests that run alone: every goroutine of the process
// meets the limit.
func ExhaustFDs(t testing.TB) (restore func()) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	high := 0
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			high = max(high, n)
		}
	}
	lim := old
	lim.Cur = uint64(high + 1)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	var held []*os.File
	done := false
	restore = func() {
		if done {
			return
		}
		done = true
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
			t.Error(err)
		}
		for _, f := range held {
			f.Close()
		}
	}
	t.Cleanup(restore)
	for len(held) < 1<<14 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) {
				restore()
				t.Fatal(err)
			}
			break
		}
		held = append(held, f)
	}
	if len(held) == 0 {
		restore()
		t.Fatal("no descriptor under the limit to give back")
	}
	held[len(held)-1].Close()
	held = held[:len(held)-1]
	return restore
}
