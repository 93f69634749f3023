//go:build unix

package sftp

import (
	"math"
	"syscall"
)

// fdLimit is the process's soft RLIMIT_NOFILE (which Go's runtime raised
// to the hard limit at start), or 0 if it cannot be read.
func fdLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	return int(min(rl.Cur, math.MaxInt32))
}
