package hostgate

import "time"

// SetOutputLimitGrace sets outputLimitGrace for a test, which restores it
// with the function returned.
func SetOutputLimitGrace(d time.Duration) (restore func()) {
	old := outputLimitGrace
	outputLimitGrace = d
	return func() { outputLimitGrace = old }
}
