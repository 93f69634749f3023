package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"sync"
	"syscall"
	"time"
)

// The forward scenario's relay-floor row: the SSH layer alone (agentServe)
// reached through the cheapest relay a gateway could be, a process that
// accepts a TCP connection, dials the agent and moves the bytes with
// splice(2) (io.Copy between two *net.TCPConn), reading nothing. Against
// the SSH layer alone it prices one more process on the path, which any
// gateway between a caller and a host adds; against the full path it says
// what a relay that spliced raw bytes instead of re-framing them
// (WebSocket, yamux) would win.

// Environment of the relay child (set by relayProc only).
const (
	envRelayChild  = "HGBENCH_RELAY_CHILD" // "1" runs the child instead of main
	envRelayTarget = "HGBENCH_RELAY_TARGET"
)

// relayChild listens on loopback, prints "relaying ADDR" and relays every
// connection to the target until SIGTERM.
func relayChild() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	target := os.Getenv(envRelayTarget)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	context.AfterFunc(ctx, func() { _ = ln.Close() })
	fmt.Println("relaying", ln.Addr())
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		wg.Go(func() { splice(ctx, c.(*net.TCPConn), target) })
	}
}

// splice relays c to a new connection to target, both ways, until both
// directions end or ctx does.
func splice(ctx context.Context, c *net.TCPConn, target string) {
	defer func() { _ = c.Close() }()
	var d net.Dialer
	uc, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		return
	}
	u := uc.(*net.TCPConn)
	defer func() { _ = u.Close() }()
	stop := context.AfterFunc(ctx, func() { _ = c.Close(); _ = u.Close() })
	defer stop()
	var wg sync.WaitGroup
	half := func(dst, src *net.TCPConn) {
		// *net.TCPConn's ReadFrom splices from a TCP source.
		_, _ = io.Copy(dst, src)
		_ = dst.CloseWrite()
	}
	wg.Go(func() { half(u, c) })
	half(c, u)
	wg.Wait()
}

var relayingRE = regexp.MustCompile(`^relaying (\S+)`)

// relayProc starts the relay child for target and returns it with the
// address it listens on. Stop it when done.
func relayProc(target string) (*proc, string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), envRelayChild+"=1", envRelayTarget+"="+target)
	cmd.Env = append(cmd.Env, procEnv()...)
	p, err := startProc("relay child", cmd)
	if err != nil {
		return nil, "", err
	}
	m, err := p.waitLine(relayingRE, 30*time.Second)
	if err != nil {
		p.Stop()
		return nil, "", err
	}
	return p, m[1], nil
}
