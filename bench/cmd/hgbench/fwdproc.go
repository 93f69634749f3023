package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"syscall"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/client"
)

// The forward scenario's separate-process row: ssh -L listens in the ssh
// master, a process of its own, while Host.Forward in this process shares
// one Go runtime (and its two Ps) with the HTTP client and server the
// scenario runs. forwardProc runs Host.Forward in a child hgbench instead,
// so both sides have the same process layout.

// Environment of the forward child (set by forwardProc only).
const (
	envFwdChild   = "HGBENCH_FORWARD_CHILD" // "1" runs the child instead of main
	envFwdGateway = "HGBENCH_FORWARD_GATEWAY"
	envFwdToken   = "HGBENCH_FORWARD_TOKEN"
	envFwdHost    = "HGBENCH_FORWARD_HOST"
	envFwdConnect = "HGBENCH_FORWARD_CONNECT"
)

// forwardChild dials the host through the gateway, starts a local forward
// to the connect address, prints "forwarding ADDR" and serves until
// SIGTERM.
func forwardChild() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	// Through the relay, as the in-process row's Host: the bench host
	// also takes direct sessions.
	c, err := client.New(os.Getenv(envFwdGateway), os.Getenv(envFwdToken), &client.Options{RelayOnly: true})
	if err != nil {
		cancel()
		return err
	}
	defer c.CloseIdleConnections()
	h, err := c.Dial(dctx, os.Getenv(envFwdHost))
	cancel()
	if err != nil {
		return err
	}
	defer h.Close()
	fw, err := h.Forward(ctx, hostgate.ForwardSpec{Kind: hostgate.ForwardLocal, Listen: "127.0.0.1:0", Connect: os.Getenv(envFwdConnect)})
	if err != nil {
		return err
	}
	defer fw.Close()
	fmt.Println("forwarding", fw.Addr())
	<-ctx.Done()
	return nil
}

var forwardingRE = regexp.MustCompile(`^forwarding (\S+)`)

// forwardProc starts the forward child for target and returns it with the
// address it listens on. Stop it when done.
func (e *env) forwardProc(target string) (*proc, string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), envFwdChild+"=1", envFwdGateway+"="+e.gw.url, envFwdToken+"="+e.gw.admin,
		envFwdHost+"=bench", envFwdConnect+"="+target)
	p, err := startProc("forward child", cmd)
	if err != nil {
		return nil, "", err
	}
	m, err := p.waitLine(forwardingRE, 60*time.Second)
	if err != nil {
		p.Stop()
		return nil, "", err
	}
	return p, m[1], nil
}
