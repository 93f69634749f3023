//go:build unix

package syncfs

import (
	"context"
	"net"
	"testing"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/localexec"
	"github.com/hostgate/hostgate/internal/sshtest"
	"github.com/hostgate/hostgate/sshlayer"
)

// agentSpec is the sync FS over SFTP to a new agent SSH server (sshtest).
func agentSpec(t *testing.T) *hostgate.SyncSpec {
	ts, auth := sshtest.Server(t)
	return sshlayer.SyncSpec(func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", ts.Addr)
	}, auth)
}

// execSpec is the sync FS over ExecProvider on this machine's tools.
func execSpec() *hostgate.SyncSpec {
	return &hostgate.SyncSpec{Connect: func(context.Context) (*hostgate.SyncConnection, error) {
		return &hostgate.SyncConnection{FS: hostgate.ExecProvider(&localexec.Transport{})}, nil
	}}
}
