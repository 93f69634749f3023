package hostgate

import "time"

// SetOutputLimitGrace sets outputLimitGrace for a test, which restores it
// with the function returned.
func SetOutputLimitGrace(d time.Duration) (restore func()) {
	old := outputLimitGrace
	outputLimitGrace = d
	return func() { outputLimitGrace = old }
}

// SetOutputHeldGrace sets outputHeldGrace for a test, which restores it
// with the function returned.
func SetOutputHeldGrace(d time.Duration) (restore func()) {
	old, oldKill := outputHeldGrace, heldKillWait
	outputHeldGrace = d
	heldKillWait = max(d, 5*time.Second) // past sshlayer's killGrace
	return func() { outputHeldGrace, heldKillWait = old, oldKill }
}
