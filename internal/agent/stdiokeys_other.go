//go:build !linux

package agent

// protectKeys has no portable equivalent of PR_SET_DUMPABLE; the keys
// preamble is still kept out of argv, environment and files.
func protectKeys() error { return nil }
