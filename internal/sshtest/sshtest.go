//go:build unix

package sshtest

import (
	"testing"

	"github.com/hostgate/hostgate/sshlayer"
)

// Server starts sshlayer's loopback SSH server, closed (and its close
// error reported) at cleanup, and returns it with the auth that reaches it.
func Server(t testing.TB) (*sshlayer.TestServer, sshlayer.Auth) {
	t.Helper()
	ts, err := sshlayer.StartTestServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ts.Close(); err != nil {
			t.Errorf("ssh server close: %v", err)
		}
	})
	return ts, sshlayer.Auth{Signer: ts.ClientSigner, HostKey: ts.HostKey}
}
