//go:build !unix

package agent

// HideInheritedFDs does nothing where descriptors are not POSIX's.
func HideInheritedFDs() error { return nil }
