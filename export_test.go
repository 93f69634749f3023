package hostgate

import "time"

// SetOutputLimitGrace sets outputLimitGrace for a test, which restores it
// with the function returned.
func SetOutputLimitGrace(d time.Duration) (restore func()) {
	old := outputLimitGrace
	outputLimitGrace = d
	return func() { outputLimitGrace = old }
}

// SetTarOutputGrace sets tarOutputGrace for a test, which restores it
// with the function returned.
func SetTarOutputGrace(d time.Duration) (restore func()) {
	old, oldKill := tarOutputGrace, tarKillWait
	tarOutputGrace = d
	tarKillWait = max(d, 5*time.Second) // past sshlayer's killGrace
	return func() { tarOutputGrace, tarKillWait = old, oldKill }
}
