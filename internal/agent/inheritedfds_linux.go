package agent

import (
	"math"

	"golang.org/x/sys/unix"
)

const fdDir = "/proc/self/fd"

// cloexecAbove2 does HideInheritedFDs' work in one system call
// (close_range, Linux 5.11 and later), reporting whether it could.
func cloexecAbove2() bool {
	return unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC) == nil
}
