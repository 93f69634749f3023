//go:build !unix

package testenv

import (
	"testing"
	"time"
)

// WaitGone skips the test off Unix, where the tests that wait for a
// process group's members do not run; this lets their packages vet and
// build for Windows.
func WaitGone(t testing.TB, pid int, within time.Duration) {
	t.Helper()
	t.Skip("testenv.WaitGone: waiting for a process by pid is only done on Unix")
}
