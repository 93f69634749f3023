//go:build unix

package forward

import (
	"net"
	"testing"

	"github.com/hostgate/hostgate/sshlayer"
)

// sshTCPClient starts our SSH test server and connects our client to it
// over loopback TCP; both end with the test.
func sshTCPClient(tb testing.TB) *sshlayer.Client {
	tb.Helper()
	ts, err := sshlayer.StartTestServer()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = ts.Close() })
	conn, err := net.Dial("tcp", ts.Addr)
	if err != nil {
		tb.Fatal(err)
	}
	return sshClient(tb, conn, ts)
}

// sshClient connects our SSH client to ts over conn until the test ends.
func sshClient(tb testing.TB, conn net.Conn, ts *sshlayer.TestServer) *sshlayer.Client {
	tb.Helper()
	sc, err := sshlayer.Connect(testCtx(tb), conn, sshlayer.Auth{Signer: ts.ClientSigner, HostKey: ts.HostKey})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = sc.Close() })
	return sc
}
