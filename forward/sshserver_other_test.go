//go:build !unix

package forward

import (
	"testing"

	"github.com/hostgate/hostgate/sshlayer"
)

// sshTCPClient skips the test off Unix, where our SSH test server (the
// agent's server) does not build.
func sshTCPClient(tb testing.TB) *sshlayer.Client {
	tb.Helper()
	tb.Skip("sshlayer.StartTestServer: the agent's SSH server is Unix only")
	return nil
}
