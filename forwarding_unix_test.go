//go:build unix

package hostgate_test

import "testing"

// TestForwardCountsFailedConnectsOverSSH is TestForwardCountsFailedConnects
// over SSH to our server, where a refused connect shows after the client's
// request went out as early data, as the error of the forward's first Read.
func TestForwardCountsFailedConnectsOverSSH(t *testing.T) {
	checkFailedConnects(t, sshHost(t))
}
