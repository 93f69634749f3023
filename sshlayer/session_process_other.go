//go:build unix && !linux

package sshlayer

import "time"

// waitExited is a no-op where waitid(WNOWAIT) is not used: the group is
// signalled right after the leader is reaped instead.
func waitExited(int) {}

// setOOMScoreAdj is a no-op outside Linux.
func setOOMScoreAdj(int, int) error { return nil }

// setMaxTasks is a no-op outside Linux.
func setMaxTasks(int, uint64, uint64) error { return nil }

// killSession is a no-op outside Linux: the group is sent SIGKILL, but
// not awaited, and a shell's jobs in groups of their own are not found.
func killSession(int, int, time.Duration) {}
