//go:build !unix

package testenv

import "testing"

// RefusedAddr skips the test off Unix: holding a port bound but not
// listening takes a raw socket whose calls differ there, and the tests
// that ask for one run on Unix in CI; this lets their packages vet and
// build for Windows.
func RefusedAddr(t testing.TB) string {
	t.Helper()
	t.Skip("testenv.RefusedAddr: a bound, non-listening socket is only made on Unix")
	return ""
}

// RefusedLocalhostPort skips the test off Unix, as RefusedAddr does.
func RefusedLocalhostPort(t testing.TB) int {
	t.Helper()
	t.Skip("testenv.RefusedLocalhostPort: a bound, non-listening socket is only made on Unix")
	return 0
}

// HoldRefusing skips the test off Unix, as RefusedAddr does.
func HoldRefusing(t testing.TB, addr string) (release func(), err error) {
	t.Helper()
	t.Skip("testenv.HoldRefusing: a bound, non-listening socket is only made on Unix")
	return func() {}, nil
}
