//go:build unix && !linux

package agent

const fdDir = "/dev/fd"

func cloexecAbove2() bool { return false }
