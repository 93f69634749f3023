//go:build unix && !linux

package sshlayer

import "os"

// applyTTYModes is a no-op outside Linux: the terminal keeps its defaults.
func applyTTYModes(*os.File, []ttyMode) error { return nil }
