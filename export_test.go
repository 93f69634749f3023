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
	old := tarOutputGrace
	tarOutputGrace = d
	return func() { tarOutputGrace = old }
}
