//go:build !unix

package sigreset

// ForChildren does nothing where signals are not POSIX's.
func ForChildren() {}
