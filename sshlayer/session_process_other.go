//go:build unix && !linux

package sshlayer

import "time"

// waitExited is a no-op where waitid(WNOWAIT) is not used: the group is
// signalled right after the leader is reaped instead.
func waitExited(int) {}

// waitGroupGone is a no-op outside Linux: descendants are sent SIGKILL but
// not awaited.
func waitGroupGone(int, int, time.Duration) {}

// setOOMScoreAdj is a no-op outside Linux.
func setOOMScoreAdj(int, int) error { return nil }

// killSession is a no-op outside Linux: a terminal's background jobs are
// not found.
func killSession(int, int, time.Duration) {}
