package e2e

import (
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/client"
)

// agentUpRE is an agent's "tunnel up" line.
var agentUpRE = regexp.MustCompile(`msg="tunnel up"`)

// TestAgentPathStalls: the path between an agent and the gateway stops
// forwarding (both ways, sockets left open: a NAT that lost its state, a
// laptop's Wi-Fi gone). A 5 s stall is ridden out: the host stays
// connected and a session opened before it goes on. A stall past the
// keepalive drops the host at the gateway, which says why; what a caller
// ran across it (a command, SFTP, a forward, a Dial begun during the
// stall) fails naming the host and matching hostgate.ErrConnectionEnded
// rather than hanging; the command is killed on the host; and the agent,
// once the path heals, comes back by itself.
func TestAgentPathStalls(t *testing.T) {
	g := startGateway(t, "")
	px := newFaultProxy(t, strings.TrimPrefix(g.url, "http://"))
	a := g.startAgentAt(px.URL(), "alpha", "")
	ctx := testCtx(t, 6*time.Minute)
	h := dialWorking(t, ctx, g, "alpha")
	defer h.Close()

	// A short stall: nothing notices but the latency.
	px.Stall()
	time.Sleep(5 * time.Second) // the stall itself, not a wait for an outcome
	px.Heal()
	if res, err := h.Exec(ctx, []string{"echo", "after-5s"}, hostgate.ExecOptions{}); err != nil || string(res.Stdout) != "after-5s\n" {
		t.Fatalf("exec on the session from before a 5 s stall: %+v %v", res, err)
	}
	if out := g.output(); strings.Contains(out, `msg="tunnel down"`) {
		t.Fatalf("a 5 s stall dropped the host's tunnel:\n%s", out)
	}
	if n := len(agentUpRE.FindAllString(a.output(), -1)); n != 1 {
		t.Fatalf("a 5 s stall made the agent connect again (%d tunnels up):\n%s", n, a.output())
	}

	// What runs across the long stall: a command, a file open for
	// writing, a forward.
	p, err := h.Spawn(ctx, []string{"sh", "-c", "echo $$; exec sleep 600"}, hostgate.SpawnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
	var pid int
	if _, err := fmt.Fscan(p.Stdout(), &pid); err != nil {
		t.Fatalf("command did not start: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	go func() { _, _ = io.Copy(io.Discard, p.Stdout()) }()
	fsys, err := h.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f, err := fsys.Create(ctx, t.TempDir()+"/across", 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fw, err := h.Forward(ctx, hostgate.ForwardSpec{Kind: hostgate.ForwardLocal, Listen: "127.0.0.1:0", Connect: echoServer(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	fc, err := net.Dial("tcp", fw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	if _, err := fc.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(fc, make([]byte, 5)); err != nil {
		t.Fatalf("forward before the stall: %v", err)
	}

	stalled := time.Now()
	px.Stall()
	waited := make(chan error, 1)
	go func() { waited <- p.Wait() }()
	// A caller who dials during the stall: the gateway still counts the
	// host as connected, so only the tunnel's end can answer it.
	dialed := make(chan error, 1)
	go func() {
		dh, err := client.Dial(ctx, g.url, g.admin, "alpha")
		if err == nil {
			_, err = dh.Exec(ctx, []string{"true"}, hostgate.ExecOptions{})
			dh.Close()
		}
		dialed <- err
	}()

	// The gateway's keepalive (a ping every 30 s, answered within 30 s).
	down := g.waitFor(regexp.MustCompile(`msg="tunnel down".*host=alpha.*reason="([^"]*)"`), 2*time.Minute)
	detected := time.Since(stalled)
	t.Logf("gateway dropped the host %v into the stall: %s", detected.Round(100*time.Millisecond), down[0])
	if !strings.Contains(down[1], "stopped answering") {
		t.Errorf("gateway's tunnel down for a stalled path: reason %q, want it to say the agent stopped answering", down[1])
	}
	g.waitConnected("alpha", false, 10*time.Second)

	ended := func(what string, err error) {
		t.Helper()
		switch {
		case err == nil:
			t.Errorf("%s across a stall that dropped the host: no error", what)
		case !errors.Is(err, hostgate.ErrConnectionEnded) || !strings.Contains(err.Error(), "alpha") || !strings.Contains(err.Error(), "connection lost"):
			t.Errorf("%s across a stall that dropped the host: %v; want an error naming host alpha, saying the connection was lost, matching hostgate.ErrConnectionEnded", what, err)
		default:
			t.Logf("%s: %v", what, err)
		}
	}
	select {
	case err := <-waited:
		ended("a command's Wait", err)
	case <-time.After(30 * time.Second): // a guard against a hang, not a timing
		t.Fatal("a command across the stall still waits 30 s after the gateway dropped its host")
	}
	_, err = f.Write([]byte("after"))
	if err == nil {
		err = f.Close()
	}
	ended("an SFTP write", err)
	select {
	case <-fw.Done():
		// A forward's Err is hostgate.ErrConnectionEnded named with the
		// host; its listener's callers saw the connection's own error.
		if err := fw.Err(); !errors.Is(err, hostgate.ErrConnectionEnded) || !strings.Contains(err.Error(), "alpha") {
			t.Errorf("a forward across a stall that dropped the host: %v, want hostgate.ErrConnectionEnded naming host alpha", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("a forward across the stall still runs 30 s after the gateway dropped its host")
	}
	select {
	case err := <-dialed:
		// The gateway still counted the host as connected: the SSH
		// handshake's own bound ended it, and says so (it read "context
		// deadline exceeded", with minutes left on the caller's ctx).
		if err == nil || !strings.Contains(err.Error(), "alpha") || !strings.Contains(err.Error(), "did not finish the SSH handshake within") {
			t.Errorf("a Dial and exec begun during the stall: %v, want an error naming host alpha, saying it did not finish the SSH handshake", err)
		} else {
			t.Logf("a Dial begun during the stall: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("a Dial begun during the stall still waits 30 s after the gateway dropped its host")
	}

	// The agent's own keepalive notices too; on the path's return it
	// connects again by itself.
	a.waitFor(regexp.MustCompile(`msg="gateway tunnel ended`), 2*time.Minute)
	t.Logf("the agent noticed %v into the stall", time.Since(stalled).Round(100*time.Millisecond))
	healed := time.Now()
	px.Heal()
	for len(agentUpRE.FindAllString(a.output(), -1)) < 2 {
		if time.Since(healed) > 90*time.Second {
			t.Fatalf("agent not back 90 s after the path healed:\n%s", a.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the agent was back %v after the path healed", time.Since(healed).Round(10*time.Millisecond))
	g.waitConnected("alpha", true, 30*time.Second)
	execEcho(t, ctx, g.url, g.admin, "alpha", "back")
	if !waitProcessGone(pid, 30*time.Second) {
		t.Errorf("the command across the stall (pid %d) outlived its session by 30 s", pid)
	}
}
