package sshlayer

import (
	"context"
	"net"
	"sync"
	"testing"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate"
)

// exitHeldServer is a countingServer whose execs are told exit status 0 at
// once and whose session channels stay open until the client closes them,
// as OpenSSH's sshd keeps one while a process left in the background holds
// the command's output; it answers no signal.
func exitHeldServer(t *testing.T) *countingServer {
	t.Helper()
	host, err := GenerateSessionKey()
	if err != nil {
		t.Fatal(err)
	}
	user, err := GenerateSessionKey()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &countingServer{ln: ln, hostKey: host.Signer, userKey: user}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer conn.Close()
				sc, chans, reqs, err := ssh.NewServerConn(conn, s.config())
				if err != nil {
					return
				}
				defer sc.Close()
				go ssh.DiscardRequests(reqs)
				for nc := range chans {
					ch, reqs, err := nc.Accept()
					if err != nil {
						return
					}
					wg.Go(func() {
						defer ch.Close()
						for req := range reqs {
							_ = req.Reply(req.Type == "exec", nil)
							if req.Type == "exec" {
								_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{0}))
							}
						}
					})
				}
			})
		}
	})
	return s
}

// TestKillAfterExitToldClosesAtOnce: Kill(KILL) of a process whose exit
// the host told already, its session held open by the host, closes the
// session at once, keeping the status told; it waited killGrace (3 s)
// first, which every Exec, Upload and ExecProvider call whose output a
// background process holds waited past its own grace.
func TestKillAfterExitToldClosesAtOnce(t *testing.T) {
	s := exitHeldServer(t)
	ctx := testCtx(t)
	c, err := Connect(ctx, s.dial(t), s.auth())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, err := c.Spawn(ctx, []string{"true"}, hostgate.SpawnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.(*clientProcess).Exited():
	case <-ctx.Done():
		t.Fatal("the host's exit status never told")
	}
	if err := p.Kill(hostgate.SIGKILL); err != nil {
		t.Fatalf("Kill after the exit told: %v", err)
	}
	// Well under killGrace.
	wctx, cancel := context.WithTimeout(ctx, killGrace/3)
	defer cancel()
	waited := make(chan error, 1)
	go func() { waited <- p.Wait() }()
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("Wait after Kill of a process told exit 0: %v, want nil", err)
		}
	case <-wctx.Done():
		_ = c.Close()
		<-waited
		t.Fatalf("Wait after Kill of a process whose exit was told: still waiting after %v, the session not closed (killGrace %v)", killGrace/3, killGrace)
	}
}
