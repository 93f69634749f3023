//go:build race

package yamux

// raceEnabled scales the stress tests down under the race detector: it
// checks how goroutines share memory, which does not need gigabytes.
const raceEnabled = true
