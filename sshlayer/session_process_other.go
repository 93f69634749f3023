//go:build unix && !linux

package sshlayer

import (
	"log/slog"
	"os/exec"
	"time"
)

// waitExited is a no-op where waitid(WNOWAIT) is not used: the group is
// signalled right after the leader is reaped instead.
func waitExited(int) {}

// setOOMScoreAdj is a no-op outside Linux.
func setOOMScoreAdj(int, int) error { return nil }

// startWithOOMScoreAdj starts c: oom_score_adj is Linux's.
func startWithOOMScoreAdj(c *exec.Cmd, _ int, _ *slog.Logger) (bool, error) { return false, c.Start() }

// withMaxTasks runs start: commands' tasks are bounded on Linux only.
func withMaxTasks(_ int, start func() error, _ *slog.Logger) error { return start() }

// killSession is a no-op outside Linux: the group is sent SIGKILL, but
// not awaited, and a shell's jobs in groups of their own are not found.
func killSession(int, int, pidMark, time.Duration) {}

// pidMark is empty outside Linux: killSession is a no-op there.
type pidMark struct{}

func markPIDs() pidMark { return pidMark{} }
