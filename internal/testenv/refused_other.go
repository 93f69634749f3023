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
