//go:build !race

package yamux

const raceEnabled = false
