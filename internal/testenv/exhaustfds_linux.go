//go:build linux

package testenv

import (
	"errors"
	"os"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
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
	// A descriptor an earlier test's goroutines close after the limit is
	// set is one more free under it, which hands the EMFILE to another
	// part of the test than the one under test: wait until the set holds
	// still (bounded) before measuring it.
	fds, err := openFDs()
	for deadline := time.Now().Add(2 * time.Second); err == nil && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		var again []int
		if again, err = openFDs(); err == nil && slices.Equal(again, fds) {
			break
		}
		fds = again
	}
	if err != nil {
		t.Fatal(err)
	}
	high := 0
	if len(fds) > 0 {
		high = fds[len(fds)-1]
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

// openFDs lists the process's open descriptors, in order.
func openFDs() ([]int, error) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	var fds []int
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			fds = append(fds, n)
		}
	}
	slices.Sort(fds)
	return fds, nil
}
