package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hostgate/hostgate/internal/dialfirst"
	"github.com/hostgate/hostgate/sshlayer"
)

// Direct sessions. A host whose agent listens for SSH itself (agent
// connect --direct) is published with its addresses, which come with
// every certificate the gateway signs for it (Certificate.Direct). The
// client tries those first and runs its SSH session straight to the
// agent: the relay, one more process on the path, costs a forward of
// small requests about a quarter of its rate (bench/HISTORY.md). The
// session is the same one either way (the host key pinned to the
// gateway's record, the gateway's certificate), and the gateway still
// admits it, audits it and ends it when its token goes: the agent asks
// it over its tunnel. When no address answers, or the agent refuses, the
// client uses the relay, and does not try that host's addresses again
// for directRetry.

// directDialTimeout bounds the TCP connect to a host's direct addresses,
// tried at once, and directHandshakeTimeout the SSH handshake over the
// first that answers (the agent's admission, one round trip to the
// gateway, included). An address that refuses costs a round trip; one
// behind a firewall that drops the packets (an agent's LAN address seen
// from outside it) costs a connect directDialTimeout, once per
// directRetry: short, as direct sessions are for callers near the host,
// whose connects take milliseconds.
var (
	directDialTimeout      = 500 * time.Millisecond
	directHandshakeTimeout = 10 * time.Second
	directRetry            = time.Minute
)

// directFailedKey is the context key of why a direct session just
// failed, which the relay's request then tells the gateway
// (wire.HeaderDirectFailed).
type directFailedKey struct{}

// directState is what a Client remembers of one host's direct path.
type directState struct {
	mu        sync.Mutex
	failedAt  time.Time // the last failed attempt; zero when none or it worked since
	lastError error
	addr      string // the address of the last direct connection that worked
}

// tryDirect reports whether addrs are worth a try now.
func (d *directState) tryDirect() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.failedAt.IsZero() || time.Since(d.failedAt) >= directRetry
}

// result records an attempt: the address it reached, or why it failed.
func (d *directState) result(addr string, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil {
		d.failedAt, d.lastError, d.addr = time.Time{}, nil, addr
		return
	}
	d.failedAt, d.lastError, d.addr = time.Now(), err, ""
}

// directFor is host id's direct state.
func (c *Client) directFor(id string) *directState {
	c.credMu.Lock()
	defer c.credMu.Unlock()
	if c.direct == nil {
		c.direct = map[string]*directState{}
	}
	d := c.direct[id]
	if d == nil {
		d = &directState{}
		c.direct[id] = d
	}
	return d
}

// DirectPath says how the client's last SSH connection to host id went:
// the agent's address when it was a direct session; else why the direct
// path failed, within the last minute (the client used the gateway's
// relay); ("", nil) when the client has not tried one (the host has no
// direct addresses, Options.RelayOnly, or no connection yet).
func (c *Client) DirectPath(id string) (addr string, err error) {
	d := c.directFor(id)
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.failedAt.IsZero() && time.Since(d.failedAt) < directRetry {
		return "", d.lastError
	}
	return d.addr, nil
}

// sshDirect connects SSH to host id over one of addrs, or fails (the
// caller then uses the relay), and records which.
func (c *Client) sshDirect(ctx context.Context, d *directState, addrs []string, auth sshlayer.Auth) (*sshlayer.Client, error) {
	conn, err := dialfirst.Dial(ctx, addrs, directDialTimeout)
	if err != nil {
		d.result("", err)
		return nil, err
	}
	addr := conn.RemoteAddr().String()
	hctx, cancel := context.WithTimeout(ctx, directHandshakeTimeout)
	defer cancel()
	sc, err := sshlayer.ConnectConfig(hctx, conn, auth, &sshlayer.ClientConfig{ForwardAgent: c.agent})
	if err != nil {
		err = fmt.Errorf("direct ssh to %s: %w", addr, err)
	}
	d.result(addr, err)
	return sc, err
}
