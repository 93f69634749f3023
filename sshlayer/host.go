package sshlayer

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/hostgate/hostgate"
)

// Connection turns the client into a hostgate.Connection: exec over SSH
// sessions, the filesystem over SFTP (opened on first use), forwarding over
// SSH, sync as given (see SyncSpec), and Close closing the client. Its
// Name is Auth.Host, so that a Host names it in every error.
func (c *Client) Connection(sync *hostgate.SyncSpec) *hostgate.Connection {
	return &hostgate.Connection{
		Name:      c.host,
		Transport: c,
		FS:        lazySFTP{c},
		Forward:   c,
		Sync:      sync,
		Close:     c.Close,
		Done:      c.done,
	}
}

// SyncSpec returns a synchronous-filesystem spec whose every Connect dials a
// new stream and runs a new SSH connection over it, never reusing the host's
// main connection. The returned FS is that connection's SFTP provider; its
// Close closes the SSH connection and the stream. Its Name is Auth.Host.
func SyncSpec(dial func(ctx context.Context) (net.Conn, error), auth Auth) *hostgate.SyncSpec {
	return &hostgate.SyncSpec{Name: auth.Host, Connect: func(ctx context.Context) (*hostgate.SyncConnection, error) {
		conn, err := dial(ctx)
		if err != nil {
			return nil, fmt.Errorf("sshlayer: sync: dial: %w", err)
		}
		c, err := Connect(ctx, conn, auth)
		if err != nil {
			return nil, fmt.Errorf("sshlayer: sync: %w", err)
		}
		fs, err := c.SFTP(ctx)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("sshlayer: sync: %w", err), c.Close())
		}
		return &hostgate.SyncConnection{FS: fs, Close: c.Close, Done: c.Done(), Err: c.Wait}, nil
	}}
}
